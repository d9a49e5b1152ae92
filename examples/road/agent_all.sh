#!/bin/bash
# The road programs under the agent, all at once under one daemon, on one GPU
# (docs/oom-warning.md, "Under the agent"): the two leaks must be warned well
# before they run out, late_long and the healthy three never. Needs
# bin/vramscope. Writes to $OUT: events.jsonl (every event the daemon sent,
# with the unix time it came), ps.jsonl.gz (process.list once a second),
# findings.json (every stored snapshot's findings), times (each program's exit
# status and end), <program>.out/.err/.json (levels.py's own every-step levels),
# daemon.log and levels/ID.json.gz (the steps the daemon stored beside each
# snapshot). PROGRAMS="leak.py,varlen.py" runs those alone (default: all six).
set -u
cd "$(dirname "$0")/../.."
OUT=$(cd "${OUT:-.}" && pwd)
D=$(mktemp -d /tmp/vsagent.XXXX)
export PYTHONPATH=$PWD/jupyter:$PWD/examples/e2e:$PWD/examples/road
BIN=$PWD/bin/vramscope
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$OUT/when.txt"
date -u +%FT%TZ >>"$OUT/when.txt"
$BIN serve --socket $D/s --data-dir $D/data >"$OUT/daemon.log" 2>&1 &
DPID=$!
sleep 1
python3 examples/road/watch.py $D/s events "$OUT/events.jsonl" &
EPID=$!
python3 examples/road/watch.py $D/s ps "$OUT/ps.jsonl" &
PPID_=$!
echo "start $(date +%s.%N)" >"$OUT/times"
PIDS=()
IFS=, read -ra PROGS <<<"${PROGRAMS:-leak.py,leak.py --varlen --cap 6 --leak-mib 4,grad_accum.py,varlen.py,eval_warmup.py,late_long.py}"
for p in "${PROGS[@]}"; do
  n=$(echo "$p" | sed 's/\.py//; s/ --/_/g; s/ /_/g; s/-//g')
  (cd examples/road && OUT="$OUT" timeout 240 $BIN run --socket $D/s -- python3 $p >"$OUT/$n.out" 2>"$OUT/$n.err"
   echo "$n rc=$? end=$(date +%s.%N)" >>"$OUT/times") &
  PIDS+=($!)
done
wait "${PIDS[@]}"
sleep 3  # the last snapshots' analyses
python3 examples/road/watch.py $D/s findings "$OUT/findings.json"
mkdir -p "$OUT/levels"
for f in $D/data/cache/*/levels.json.gz; do [ -e "$f" ] && cp "$f" "$OUT/levels/$(basename $(dirname $f)).json.gz"; done
date -u +%FT%TZ >>"$OUT/when.txt"
kill $EPID $PPID_ $DPID
gzip -f "$OUT/ps.jsonl"
