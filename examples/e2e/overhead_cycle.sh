# Same-run A/B of the agent: one training process under `vramscope run` that
# detaches and re-attaches the agent every 10 steps (off / context alloc /
# context all), twice. Prints the per-mode medians as JSON lines.
set -e
D=$(mktemp -d /tmp/vscyc.XXXX)
export PYTHONPATH=$PWD/jupyter:$PWD/examples/e2e
bin/vramscope serve --socket $D/s --data-dir $D/data --quiet &
DPID=$!
sleep 1
SEQ=${SEQ:-512}
MODES=${MODES:-off,alloc,all}
for r in 1 2; do
  bin/vramscope run --socket $D/s -- python3 examples/e2e/train.py --seq $SEQ --steps 240 --cycle $MODES --block 10 2>/dev/null | python3 -c "import json,sys; r=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(json.dumps(r['cycle']))"
done
kill $DPID
