#!/bin/bash
# Issue #27's cost across processes, call by call, as the device tool runs it (in the repository root, $OUT
# the folder that comes back). Before it, build .gpu/vramscope.gz here as daemon.sh says.
# Then run `bash examples/device/lockstep_call.sh [SECONDS [WORKLOADS [--control]]]` with carry [".gpu"] and
# timeout_s 420 (~380 s at the default 120 s a workload: 60 s to build and warm the processes, 20 s of
# warm-up rounds, the counted rounds). A workload named twice runs twice, with new processes; --control adds
# a second plain process (lockstep.py).
# Why: processes run one after the other moved 2.6x on this host (2026-12-03), and run at once they share
# the GPU by time slices. lockstep.py keeps both processes up and asks one call of each in turn.
set -u
. examples/device/daemon.sh
L=$OUT/log.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> $L
k=0
for w in ${2:-serve generate32}; do
  k=$((k + 1)); f=$OUT/lock_${k}_$w.json
  echo "$w lockstep ${3:-} $(date -u +%FT%TZ)" >> $L
  timeout $(( ${1:-120} + 140 )) python3 examples/inference/lockstep.py --workload $w --seconds ${1:-120} \
    --warm-s 20 --vramscope $B --socket $D/s ${3:-} > $f 2>> $L
  python3 - "$f" <<'PY' | tee -a $L
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(sys.argv[1].rsplit("/", 1)[-1], len(r["rows"]), "rounds",
      json.dumps({k: r.get(k) for k in ("agent_vs_plain", "plain2_vs_plain", "agent_vs_plains", "by_order")}))
PY
done
kill $DPID
