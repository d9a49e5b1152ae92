#!/bin/bash
# The next device call for issue #27 (inference's cost), as the device tool runs it (in the repository
# root, $OUT the folder that comes back). Before it, build .gpu/vramscope.gz here as daemon.sh says.
# Then run `bash examples/device/next_call.sh` with carry [".gpu"] and timeout_s 430 (~370 s).
# The device tool returns at most 8 files: this writes 6, each as soon as its part ends.
# Why: on 2026-12-03 the host's speed stepped by 2x for tens of seconds, so blocks of 5-6 s paired with
# their neighbours read +-6-11% (docs/inference.md). `cost.py --alternate` runs each call three times in
# a row within one attach (the agent's parts off, on, on and recording), so the three share the host's
# speed; the clock's windows are counted as 1% of the record calls' cost, the link's and clock's threads
# by their CPU share. Discovery now ends after 8 root calls without a new root (half a serve request).
set -u
. examples/device/daemon.sh
L=$OUT/log.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >> $L
echo "threads serve $(date -u +%FT%TZ)" >> $L
timeout 70 $B run --socket $D/s -- python3 examples/inference/threads.py --workload serve --seconds 20 > $OUT/threads_serve.json 2>> $L
python3 -c "
import json
r = json.load(open('$OUT/threads_serve.json'))
for x in r['intervals'][1:]:
    print('threads', {k: v for k, v in x.items() if k.endswith('share') or k == 'calls'})
" | tee -a $L
alt() {
  echo "$1 alternate $(date -u +%FT%TZ)" >> $L
  timeout $(( $2 + 45 )) python3 examples/inference/cost.py --workload $1 --alternate --seconds $2 > $OUT/alt_$1.json 2>> $L
  python3 - "$OUT/alt_$1.json" <<'PY' | tee -a $L
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(sys.argv[1].rsplit('/', 1)[-1], len(r["rows"]), "triples", json.dumps({k: r.get(k) for k in ("on", "record", "steady_threads_share", "default_estimate")}))
PY
}
alt serve 120
alt generate32 100
alt eval 30
kill $DPID
