#!/bin/bash
# The next device call for issue #27 (inference's cost), as the device tool runs it (in the repository
# root, $OUT the folder that comes back). Before it, here:
#   mkdir -p .gpu /tmp/gpubin && go build -ldflags "-s -w" -o /tmp/gpubin/vramscope ./cmd/vramscope \
#     && gzip -9 -c /tmp/gpubin/vramscope > .gpu/vramscope.gz   (.gpu/ listed in .git/info/exclude)
# then run `bash examples/device/next_call.sh` with carry [".gpu"] and timeout_s 480 (~420 s).
# The device tool returns at most 8 files: this writes 5, each as soon as its part ends.
# Why: on 2026-12-03 the host's speed stepped by 2x for tens of seconds, so blocks of 5-6 s paired with
# their neighbours read +-6-11% (docs/inference.md). Many short blocks (2.5 s, 50-60 a workload) put more
# pairs inside one regime; discovery now ends after 8 root calls without a new root (half a serve request),
# and cost.py leaves its calls out and records each call's CPU time on the calling thread beside its wall
# time (a slow stretch that is the host's shows in wall time only).
set -u
. examples/device/daemon.sh
L=$OUT/log.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> $L
echo "threads serve $(date -u +%FT%TZ)" >> $L
timeout 70 $B run --socket $D/s -- python3 examples/inference/threads.py --workload serve --seconds 35 > $OUT/threads_serve.json 2>> $L
python3 -c "
import json
r = json.load(open('$OUT/threads_serve.json'))
for x in r['intervals'][1:]:
    print('threads', {k: v for k, v in x.items() if k.endswith('share') or k == 'calls'})
" | tee -a $L
show() {
python3 - "$1" <<'PY' | tee -a "$2"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(sys.argv[1].rsplit('/', 1)[-1], json.dumps(r["by_call"]), json.dumps(r["summary"].get("default")), json.dumps(r.get("own")))
PY
}
echo "serve $(date -u +%FT%TZ)" >> $L
timeout 180 python3 examples/inference/cost.py --workload serve --cycle off,default --blocks 60 --block-s 2.5 --period-s 1.25 --record-slowdown 0.31 > $OUT/cycle_serve.json 2>> $L
show $OUT/cycle_serve.json $L
echo "generate32 $(date -u +%FT%TZ)" >> $L
timeout 160 python3 examples/inference/cost.py --workload generate32 --cycle off,default --blocks 50 --block-s 2.5 --period-s 1.25 --record-slowdown 0.31 > $OUT/cycle_generate32.json 2>> $L
show $OUT/cycle_generate32.json $L
kill $DPID
