# The road to a late OOM and the per-step levels' cost, on the GPU machine
# (docs/road-to-oom.md). Needs bin/vramscope; writes to $OUT:
#   road_oom.out          the OOM program's JSON line
#   road/                 its OOM snapshot, meta, levels.json.gz, analysis.report JSON
#   road_cost.json        road_cost.py's line
#   levels_torch.txt      pytest jupyter/tests/test_levels_torch.py
set -u
D=$(mktemp -d /tmp/vsroad.XXXX)
export PYTHONPATH=$PWD/jupyter:$PWD/examples/oom:$PWD/examples/e2e
mkdir -p "$OUT/road"
(cd jupyter && timeout 60 python3 -m pytest tests/test_levels_torch.py tests/test_levels.py -q) >"$OUT/levels_torch.txt" 2>&1
bin/vramscope serve --socket $D/s --data-dir $D/data >"$OUT/daemon.log" 2>&1 &
DPID=$!
sleep 1
VRAMSCOPE_SAMPLE=every=15,window=2 timeout 100 bin/vramscope run --socket $D/s -- python3 examples/oom/road_oom.py \
  >"$OUT/road_oom.out" 2>"$OUT/road_oom.err"
ID=$(ls $D/data/snapshots/*.json | head -1 | xargs basename | sed 's/\.json$//')
cp $D/data/snapshots/$ID.pickle $D/data/snapshots/$ID.json "$OUT/road/"
cp $D/data/cache/$ID/levels.json.gz "$OUT/road/" 2>/dev/null || ls -R $D/data >"$OUT/road/ls.txt"
python3 - "$D/s" "$ID" "$OUT/road/report.json" <<'PY'
import json, sys
import gpu_e2e
c = gpu_e2e.Client(sys.argv[1])
json.dump(c.call("analysis.report", {"id": sys.argv[2]}), open(sys.argv[3], "w"))
PY
VRAMSCOPE_RECORD=0 timeout 150 bin/vramscope run --socket $D/s -- python3 examples/oom/road_cost.py \
  >"$OUT/road_cost.json" 2>"$OUT/road_cost.err"
kill $DPID
date -u +%FT%TZ >"$OUT/when.txt"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$OUT/when.txt"
