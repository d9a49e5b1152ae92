#!/bin/bash
# The next device call for issues #27, #33 and #34, as the device tool runs it (in the repository root,
# $OUT the folder that comes back). Before it, here:
#   mkdir -p .gpu && go build -ldflags "-s -w" -o /tmp/gpubin/vramscope ./cmd/vramscope \
#     && gzip -9 -c /tmp/gpubin/vramscope > .gpu/vramscope.gz   (.gpu/ listed in .git/info/exclude)
# then run `bash examples/device/next_call.sh` with carry [".gpu"] and timeout_s 600.
# Each part tars itself into $OUT when it ends (a call cut by its limit keeps the parts that ended).
# A (parallel, ~200 s): fit's 20 new plans (--reuse keeps the 7 that ran as advised); the leak under the
#   agent 3x and its varlen variant, at once (the walk at a step's end: no crash expected), with events;
#   levels and the walk's tests on real torch. C: the per-step bookkeeping's cost. B: generation's cost.
#   D: the request loop's cost. Limit: timeout_s 600; parts' timeouts sum to ~420 s.
set -u
gunzip -kf .gpu/vramscope.gz; B=$PWD/.gpu/vramscope
R=/tmp/res; mkdir -p $R/A/fit $R/A/road $R/A/inf $R/B $R/C $R/D
export PYTHONPATH=$PWD/jupyter:$PWD/examples/oom:$PWD/examples/e2e PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $R/A/when.txt; date -u +%FT%TZ >> $R/A/when.txt
D=$(mktemp -d /tmp/vsd.XXXX)
$B serve --socket $D/s --data-dir $D/data > $R/A/daemon.log 2>&1 &
DPID=$!
sleep 1
# --- A
(timeout 200 python3 examples/fit/verify_fit.py --bin $B --out $R/A/fit --snapshots docs/gpu/fit --margin-budgets --reuse docs/gpu/fit/fit_verify_final.json > $R/A/fit/log.txt 2>&1; echo "fit rc=$?" >> $R/A/times) &
(cd jupyter && timeout 90 python3 -m pytest tests/test_levels_torch.py tests/test_levels.py tests/test_tensors_torch.py tests/test_walk_beside_backward.py -q > $R/A/levels_torch.txt 2>&1; echo "tests rc=$?" >> $R/A/times) &
python3 - "$D/s" > $R/A/road/events.jsonl 2>&1 <<'PY' &
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rb")
s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "events.subscribe", "params": {"topics": ["memory_warning", "oom_captured"]}}).encode() + b"\n")
s.settimeout(130); end = time.time() + 130
try:
    while time.time() < end:
        line = f.readline()
        if not line: break
        print(time.time(), line.decode().strip(), flush=True)
except Exception as e:
    print("end", e)
PY
EPID=$!
for i in 1 2 3 v; do
  mkdir -p $R/A/road/$i; a=""; [ $i = v ] && a="--varlen --cap 6 --leak-mib 4"
  (cd examples/road && OUT=$R/A/road/$i VRAMSCOPE_DEBUG=$([ $i = 1 ] && echo 1) timeout 90 $B run --socket $D/s -- python3 leak.py $a > $R/A/road/$i/leak.out 2>&1; echo "leak $i rc=$? end=$(date +%s.%N)" >> $R/A/road/times) &
done
wait $(jobs -p | grep -v "^$DPID$" | grep -v "^$EPID$") 2>/dev/null
sleep 2
python3 - "$D/s" "$R/A/road" <<'PY'
import json, sys, os
import gpu_e2e
c = gpu_e2e.Client(sys.argv[1])
for s in c.call("snapshot.list", {}).get("snapshots", []):
    if s.get("reason") in ("warning", "oom"):
        json.dump(c.call("analysis.report", {"id": s["id"]}), open(os.path.join(sys.argv[2], "report_%s_%s.json" % (s.get("reason"), s["id"])), "w"))
PY
kill $EPID 2>/dev/null
wait $(jobs -p | grep -v "^$DPID$") 2>/dev/null
date -u +%FT%TZ >> $R/A/when.txt
tar czf $OUT/A.tgz -C $R/A . ; echo "A done $(date -u +%T)"; cat $R/A/times $R/A/road/times
# --- C: the per-step bookkeeping
date -u +%FT%TZ > $R/C/when.txt
VRAMSCOPE_RECORD=0 timeout 85 $B run --socket $D/s -- python3 examples/oom/road_cost.py > $R/C/road_cost.json 2> $R/C/road_cost.err
date -u +%FT%TZ >> $R/C/when.txt
tar czf $OUT/C.tgz -C $R/C . ; echo "C done $(date -u +%T)"
python3 -c "
import json
for l in open('$R/C/road_cost.json'):
    d=json.loads(l)
    for k,v in d.items():
        if isinstance(v,dict) and 'own_share' in v: print(k, 'own %.4f%%' % (100*v['own_share']), 'paired %.3f%%' % (100*v['paired_diff_share']), 'own_us %.1f' % (1e6*v['own_s_per_step_median']))
"
# --- B: generation, within one process, blocks off/default/default/off
export VRAMSCOPE_SOCKET=$D/s
date -u +%FT%TZ > $R/B/when.txt
timeout 55 python3 examples/inference/cost.py --workload generate32 --cycle off,default,default,off --blocks 12 --block-s 3 --period-s 1.5 --record-slowdown 0.31 > $R/B/cycle_generate32.json 2> $R/B/err.txt
date -u +%FT%TZ >> $R/B/when.txt
tar czf $OUT/B.tgz -C $R/B . ; echo "B done $(date -u +%T)"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('generate32', json.dumps(r['summary']), json.dumps(r.get('own')))" $R/B/cycle_generate32.json
# --- D: the request loop
date -u +%FT%TZ > $R/D/when.txt
timeout 65 python3 examples/inference/cost.py --workload serve --cycle off,default,default,off --blocks 16 --block-s 2.5 --period-s 1.25 --record-slowdown 0.31 > $R/D/cycle_serve.json 2> $R/D/err.txt
date -u +%FT%TZ >> $R/D/when.txt
tar czf $OUT/D.tgz -C $R/D . ; echo "D done $(date -u +%T)"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('serve', json.dumps(r['summary']), json.dumps(r.get('own')))" $R/D/cycle_serve.json
kill $DPID
