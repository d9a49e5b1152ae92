# The road to a late OOM and the per-step levels' cost, on the GPU machine
# (docs/road-to-oom.md). Needs bin/vramscope; writes to $OUT road_cost.json
# (road_cost.py's lines), levels_torch.txt (pytest of the levels on real
# torch) and road.tgz (the rest: road_oom.out/.err, the daemon's log, and
# road/: the OOM snapshot, its meta, levels.json.gz and analysis.report JSON).
set -u
D=$(mktemp -d /tmp/vsroad.XXXX)
export PYTHONPATH=$PWD/jupyter:$PWD/examples/oom:$PWD/examples/e2e
R=$D/res
mkdir -p "$R/road"
(cd jupyter && timeout 60 python3 -m pytest tests/test_levels_torch.py tests/test_levels.py -q) >"$OUT/levels_torch.txt" 2>&1
bin/vramscope serve --socket $D/s --data-dir $D/data >"$R/daemon.log" 2>&1 &
DPID=$!
sleep 1
VRAMSCOPE_SAMPLE=every=15,window=2 timeout 100 bin/vramscope run --socket $D/s -- python3 examples/oom/road_oom.py \
  >"$R/road_oom.out" 2>"$R/road_oom.err"
ID=$(ls $D/data/snapshots/*.json | head -1 | xargs basename | sed 's/\.json$//')
cp $D/data/snapshots/$ID.pickle $D/data/snapshots/$ID.json "$R/road/"
cp $D/data/cache/$ID/levels.json.gz "$R/road/" 2>/dev/null || ls -R $D/data >"$R/road/ls.txt"
python3 - "$D/s" "$ID" "$R/road/report.json" <<'PY'
import json, sys
import gpu_e2e
c = gpu_e2e.Client(sys.argv[1])
json.dump(c.call("analysis.report", {"id": sys.argv[2]}), open(sys.argv[3], "w"))
PY
VRAMSCOPE_RECORD=0 timeout 150 bin/vramscope run --socket $D/s -- python3 examples/oom/road_cost.py \
  >"$OUT/road_cost.json" 2>"$R/road_cost.err"
kill $DPID
date -u +%FT%TZ >"$R/when.txt"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$R/when.txt"
tar czf "$OUT/road.tgz" -C "$R" .
