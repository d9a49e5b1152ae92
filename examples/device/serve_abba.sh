#!/bin/bash
# The request loop (examples/inference, workload serve) in processes one after another: plain python (P),
# `vramscope run` with the defaults (A), and with the stack sampler off (S, VRAMSCOPE_STACK_HZ=0), in the
# order given ($1, default "P A S A P S"), $2 seconds of requests each (default 30). Each process's JSON
# (every request's time, by request number) is copied to $OUT as soon as it ends. Run by the device tool
# from the repository root with .gpu/vramscope.gz carried (examples/device/next_call.sh says how to build it).
set -u
ORDER=${1:-P A S A P S}; SECS=${2:-30}
. examples/device/daemon.sh
n=0
for m in $ORDER; do
  n=$((n+1)); echo "$n $m $(date -u +%FT%TZ)" >> $OUT/when.txt
  f=$OUT/$n.$m
  case $m in
    P) timeout $((SECS+40)) python3 examples/inference/cost.py --workload serve --seconds $SECS > $f.json 2> $f.err ;;
    A) timeout $((SECS+40)) $B run --socket $D/s -- python3 examples/inference/cost.py --workload serve --seconds $SECS --record-slowdown 0.31 > $f.json 2> $f.err ;;
    S) VRAMSCOPE_STACK_HZ=0 timeout $((SECS+40)) $B run --socket $D/s -- python3 examples/inference/cost.py --workload serve --seconds $SECS --record-slowdown 0.31 > $f.json 2> $f.err ;;
  esac
  python3 - "$f.json" <<'PY'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
    print(sys.argv[1].rsplit('/', 1)[-1], r["iterations"], round(r["median_s"], 4), json.dumps(r.get("own")))
except Exception as e:
    print(sys.argv[1], "no result", e)
PY
done
kill $DPID
