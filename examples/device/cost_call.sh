#!/bin/bash
# Inference's cost after the agent's idle threads were made cheaper (stack sampler 10 Hz, the link's
# poll 1 s): the agent's threads in the request loop (threads.py, 35 s under `vramscope run`), then
# within one process blocks alternating off and the default for the request loop and generation
# (cost.py --cycle; its by_call compares each call with the same call in the off blocks). Each part's
# output goes to $OUT as it ends. Run by the device tool from the repository root, .gpu/vramscope.gz
# carried (examples/device/next_call.sh says how to build it); ~300 s.
set -u
. examples/device/daemon.sh
echo "threads $(date -u +%FT%TZ)" >> $OUT/when.txt
timeout 70 $B run --socket $D/s -- python3 examples/inference/threads.py --workload serve --seconds 35 > $OUT/threads_serve.json 2> $OUT/threads_serve.err
python3 -c "
import json
r = json.load(open('$OUT/threads_serve.json'))
for x in r['intervals'][1:]:
    print('threads', {k: v for k, v in x.items() if k.endswith('share') or k == 'calls'})
"
show() {
python3 - "$1" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(sys.argv[1].rsplit('/', 1)[-1], json.dumps(r["by_call"]), json.dumps(r["summary"].get("default")), json.dumps(r.get("own")))
PY
}
echo "serve $(date -u +%FT%TZ)" >> $OUT/when.txt
timeout 150 python3 examples/inference/cost.py --workload serve --cycle off,default --blocks 20 --block-s 6 --period-s 3 --record-slowdown 0.31 > $OUT/cycle_serve.json 2> $OUT/cycle_serve.err
show $OUT/cycle_serve.json
echo "generate32 $(date -u +%FT%TZ)" >> $OUT/when.txt
timeout 110 python3 examples/inference/cost.py --workload generate32 --cycle off,default --blocks 16 --block-s 5 --period-s 2.5 --record-slowdown 0.31 > $OUT/cycle_generate32.json 2> $OUT/cycle_generate32.err
show $OUT/cycle_generate32.json
kill $DPID
