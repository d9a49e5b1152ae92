# The cost table of docs/inference.md, on the GPU machine, from the repository root
# (bin/vramscope built): within one process, blocks alternating off / default
# (clock scaled 6x: a window in every 5 s block) / record (recording all along),
# for generation, evaluation and a request loop; then, across processes, plain
# python against `vramscope run` (the true defaults), PAIRS alternating pairs.
# Env: OUT (results), BLOCKS (12), BLOCK_S (5), RUN_S (32), PAIRS (1), WORKLOADS.
set -o pipefail
OUT=${OUT:-/tmp/vscost}
mkdir -p $OUT
D=$(mktemp -d /tmp/vscost.XXXX)
export PYTHONPATH=$PWD/jupyter PYTHONUNBUFFERED=1
bin/vramscope serve --socket $D/s --data-dir $D/data --quiet &
DPID=$!
sleep 1
export VRAMSCOPE_SOCKET=$D/s
for w in ${WORKLOADS:-generate eval serve}; do
  python3 examples/inference/cost.py --workload $w --cycle off,default,record --blocks ${BLOCKS:-12} \
    --block-s ${BLOCK_S:-5} > $OUT/cycle_$w.json
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], json.dumps(r['summary']))" $OUT/cycle_$w.json $w
done
for w in ${WORKLOADS:-generate eval serve}; do
  for p in $(seq ${PAIRS:-1}); do
    for how in plain agent; do
      t0=$(date +%s.%N)
      if [ $how = plain ]; then
        env -u VRAMSCOPE_SOCKET python3 examples/inference/cost.py --workload $w --seconds ${RUN_S:-32} > $OUT/proc_${w}_${how}_$p.json
      else
        bin/vramscope run --socket $D/s -- python3 examples/inference/cost.py --workload $w --seconds ${RUN_S:-32} > $OUT/proc_${w}_${how}_$p.json
      fi
      t1=$(date +%s.%N)
      python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], 'process_s=%.2f' % (float(sys.argv[5])-float(sys.argv[4])), 'iters', r['iterations'], 'mean_s %.5f' % r['mean_s'], json.dumps(r.get('agent')))" \
        $OUT/proc_${w}_${how}_$p.json $w $how $t0 $t1
    done
  done
done
kill $DPID
