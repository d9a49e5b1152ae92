#!/bin/bash
# Issue #27's cost, token by token, as the device tool runs it (in the repository root, $OUT the folder that
# comes back). Before it, build .gpu/vramscope.gz here as daemon.sh says.
# Then run `bash examples/device/tokens_call.sh [SECONDS [WORKLOADS]]` with carry [".gpu"] and timeout_s 360 (~250 s at the
# default 90 s a workload). Its first run (18:18 UTC) also ran `cost.py --workload eval --alternate --seconds 30`.
# Why: call by call (--alternate, 2026-12-03 18:00 UTC) the host's noise left serve's and generate32's
# intervals at +-1.5-2.7%; a token takes ~10 ms, so a token's neighbour shares the host's speed far more
# closely. Since a root's generate call is one step (no hook runs during its tokens), --tokens times each
# token and the stack sampler's ticks: a token a tick fell in against its neighbours gives the tick's delay
# to the program's thread. Runs of 18:18 and 18:39 UTC used the protocol before this one (root hooks
# toggled token by token: commit ce5a84b). --record-slowdown is what recording cost the same workload in
# the 18:00 run (its record means).
set -u
. examples/device/daemon.sh
L=$OUT/log.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> $L
tok() {
  echo "$1 tokens $(date -u +%FT%TZ)" >> $L
  timeout $(( $2 + 90 )) python3 examples/inference/cost.py --workload $1 --tokens --seconds $2 \
    --record-slowdown $3 > $OUT/tok_$1.json 2>> $L
  python3 - "$OUT/tok_$1.json" <<'PY' | tee -a $L
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(sys.argv[1].rsplit("/", 1)[-1], r["calls"], "calls", r.get("steps"), "steps", r.get("ticked_tokens"), "ticked tokens",
      json.dumps({k: r.get(k) for k in ("tick", "sampler_share", "hooks_share", "thread_shares",
                                         "default_estimate")}))
PY
}
for w in ${2:-serve generate32}; do
  case $w in serve) tok serve ${1:-90} 0.164 ;; generate32) tok generate32 ${1:-90} 0.235 ;; esac
done
kill $DPID
