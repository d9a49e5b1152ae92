#!/bin/bash
# The next device call for issue #27 (inference's cost), as the device tool runs it (in the repository
# root, $OUT the folder that comes back). Before it, here:
#   mkdir -p .gpu && go build -ldflags "-s -w" -o /tmp/gpubin/vramscope ./cmd/vramscope \
#     && gzip -9 -c /tmp/gpubin/vramscope > .gpu/vramscope.gz   (.gpu/ listed in .git/info/exclude)
# then run `bash examples/device/next_call.sh` with carry [".gpu"] and timeout_s 600 (~500 s).
# Each part tars itself into $OUT when it ends (a call cut by its limit keeps the parts that ended).
# T: where the agent's threads spend their CPU (the stack sampler included now), generate32 and serve
#    alone under `vramscope run`, 35 s each.
# P: the request loop in processes one after another (the 2026-12-03 run had them at once, time-sliced
#    on the GPU): plain, the default, the default without the stack sampler (VRAMSCOPE_STACK_HZ=0),
#    in the order P A S S A P P A S S A P, 20 s of calls each: serve read +19-21% under the agent in
#    both protocols of that day, where the agent's own measure says ~2%.
set -u
gunzip -kf .gpu/vramscope.gz; B=$PWD/.gpu/vramscope
R=/tmp/res; mkdir -p $R/T $R/P
export PYTHONPATH=$PWD/jupyter PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $R/T/when.txt
D=$(mktemp -d /tmp/vsd.XXXX)
$B serve --socket $D/s --data-dir $D/data > $R/T/daemon.log 2>&1 &
DPID=$!
sleep 1
for w in generate32 serve; do
  date -u +%FT%TZ >> $R/T/when.txt
  timeout 70 $B run --socket $D/s -- python3 examples/inference/threads.py --workload $w --seconds 35 > $R/T/threads_$w.json 2> $R/T/threads_$w.err
done
tar czf $OUT/T.tgz -C $R/T . ; echo "T done $(date -u +%T)"
python3 -c "
import json
for w in ('generate32', 'serve'):
    try:
        r = json.load(open('$R/T/threads_%s.json' % w))
    except Exception as e:
        print(w, 'no result', e); continue
    for x in r['intervals'][1:]:
        print(w, {k: v for k, v in x.items() if k.endswith('share') or k == 'calls'})
"
n=0
for m in P A S S A P P A S S A P; do
  n=$((n+1)); date -u +%FT%TZ >> $R/P/when.txt
  case $m in
    P) timeout 50 python3 examples/inference/cost.py --workload serve --seconds 20 > $R/P/$n.$m.json 2> $R/P/$n.$m.err ;;
    A) timeout 50 $B run --socket $D/s -- python3 examples/inference/cost.py --workload serve --seconds 20 --record-slowdown 0.31 > $R/P/$n.$m.json 2> $R/P/$n.$m.err ;;
    S) VRAMSCOPE_STACK_HZ=0 timeout 50 $B run --socket $D/s -- python3 examples/inference/cost.py --workload serve --seconds 20 --record-slowdown 0.31 > $R/P/$n.$m.json 2> $R/P/$n.$m.err ;;
  esac
done
tar czf $OUT/P.tgz -C $R/P . ; echo "P done $(date -u +%T)"
python3 -c "
import json, glob, statistics
by = {}
for f in sorted(glob.glob('$R/P/*.json')):
    m = f.split('.')[-2]
    try:
        r = json.loads(open(f).read().strip().splitlines()[-1])
    except Exception:
        continue
    by.setdefault(m, []).append(r['median_s'])
    print(f.split('/')[-1], r['iterations'], round(r['median_s'], 4), json.dumps(r.get('own')))
print({m: round(statistics.fmean(v), 4) for m, v in by.items()})
"
kill $DPID
