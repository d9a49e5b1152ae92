# Debug helper: one training run under `vramscope run` with the agent's debug log.
set -x
D=$(mktemp -d /tmp/vsdbg.XXXX)
export PYTHONPATH=$PWD/jupyter:$PWD/examples/e2e VRAMSCOPE_DEBUG=1
bin/vramscope serve --socket $D/s --data-dir $D/data > $D/log 2>&1 &
sleep 1
python3 -m vramscope boot-path
timeout 120 bin/vramscope run --socket $D/s -- python3 examples/e2e/train.py --steps 6 2>&1 | tail -40
bin/vramscope ps --socket $D/s
cat $D/log
