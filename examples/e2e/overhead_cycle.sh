# Same-run A/B of the agent: one training process under `vramscope run` that
# detaches and re-attaches the agent every BLOCK steps, cycling through MODES
# (see train.py's switch()), RUNS times. Prints each run's per-mode medians as
# a JSON line; with RAW set, each run's whole result (every step's time) goes
# to $RAW.<run>.json. Env: SEQ (512), MODES (off,sampled,norecord), BLOCK
# (100), SETTLE (10), STEPS (1800), RUNS (2), RAW.
set -e
D=$(mktemp -d /tmp/vscyc.XXXX)
export PYTHONPATH=$PWD/jupyter:$PWD/examples/e2e
bin/vramscope serve --socket $D/s --data-dir $D/data --quiet &
DPID=$!
sleep 1
BLOCK=${BLOCK:-100}
for r in $(seq ${RUNS:-2}); do
  bin/vramscope run --socket $D/s -- python3 examples/e2e/train.py --seq ${SEQ:-512} --steps ${STEPS:-1800} \
    --cycle ${MODES:-off,sampled,norecord} --block $BLOCK --settle ${SETTLE:-10} --warmup $BLOCK 2>/dev/null |
    RAW_TO=${RAW:+$RAW.$r.json} python3 -c "
import json, os, sys
line = sys.stdin.read().strip().splitlines()[-1]
if os.environ.get('RAW_TO'):
    open(os.environ['RAW_TO'], 'w').write(line + '\n')
print(json.dumps(json.loads(line)['cycle']))"
done
kill $DPID
