# The default mode's cost per step (issue: <= 1% of the median step), same-run
# A/B: one GPT-2 124M training process under `vramscope run` detaches and
# re-attaches the agent every 150 steps, alternating "off" and "sampled" (the
# default) for 6,000 steps after a 100-step warm-up: 20 blocks of each mode,
# the first 10 steps of each block not counted. A sampled block opens with the
# agent's 3-step warm-up window (not counted: attach costs) and holds one
# 2-step window of the steady state (steps 101-102), which is counted: with
# 100-step blocks no steady-state window fell in a block. Two step sizes: batch 8 x
# seq 512 and batch 4 x seq 256. Writes OUT/cycle_bB_sS.json (every step's
# time, and the agent's own measure of its cost per block) and
# OUT/cycle_bB_sS.stats.json (cycle_stats.py: medians, paired block
# differences, bootstrap intervals, and the "decomposition": recorded share x
# the cost of a recorded step against its own block's unrecorded steps, plus
# the agent's own time per step — the figure a noisy host can still resolve).
#   OUT=dir sh examples/oom/overhead.sh
set -e
D=$(mktemp -d /tmp/vsovh.XXXX)
export PYTHONPATH=$PWD/jupyter:$PWD/examples/e2e
bin/vramscope serve --socket $D/s --data-dir $D/data --quiet &
DPID=$!
sleep 1
for cfg in "8 512" "4 256"; do
  set -- $cfg
  bin/vramscope run --socket $D/s -- python3 examples/e2e/train.py --batch $1 --seq $2 --steps ${STEPS:-6100} \
    --cycle off,sampled --block 150 --settle 10 --warmup 100 2>/dev/null | tail -1 >"$OUT/cycle_b$1_s$2.json"
  python3 examples/e2e/cycle_stats.py "$OUT/cycle_b$1_s$2.json" --block 150 --settle 10 --modes off,sampled --steady-share 0.02 \
    >"$OUT/cycle_b$1_s$2.stats.json"
  cat "$OUT/cycle_b$1_s$2.stats.json"
done
kill $DPID
