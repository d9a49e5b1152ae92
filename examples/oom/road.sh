# The road to a late OOM and the per-step levels' cost, on the GPU machine
# (docs/road-to-oom.md). Needs bin/vramscope; writes to $OUT road_cost.json
# (road_cost.py's lines), levels_torch.txt (pytest of the levels on real
# torch) and road.tgz (the rest: road_oom.out/.err, the daemon's log, and
# road/: the OOM snapshot, its meta, levels.json.gz and analysis.report JSON;
# road_repeat.json with REPEAT=N, short/ with SHORT=1, no road_cost.json with COST=0, below).
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
keep() {  # keep DIR: the newest snapshot, its meta, levels and analysis.report JSON in $R/DIR
  ID=$(ls -t $D/data/snapshots/*.json | head -1 | xargs basename | sed 's/\.json$//')
  cp $D/data/snapshots/$ID.pickle $D/data/snapshots/$ID.json "$R/$1/"
  cp $D/data/cache/$ID/levels.json.gz "$R/$1/" 2>/dev/null || ls -R $D/data >"$R/$1/ls.txt"
  python3 - "$D/s" "$ID" "$R/$1/report.json" <<'PY'
import json, sys
import gpu_e2e
c = gpu_e2e.Client(sys.argv[1])
json.dump(c.call("analysis.report", {"id": sys.argv[2]}), open(sys.argv[3], "w"))
PY
}
keep road
# REPEAT=N: road_oom.py N times more against the same daemon; road_repeat.json has, for
# every OOM snapshot, the steps stored beside it (all 65 steps, the last the failing one, expected)
for _ in $(seq 1 "${REPEAT:-0}"); do
  VRAMSCOPE_SAMPLE=every=15,window=2 timeout 100 bin/vramscope run --socket $D/s -- python3 examples/oom/road_oom.py \
    >/dev/null 2>>"$R/road_repeat.err"
done
python3 - "$D/data" >"$R/road_repeat.json" <<'PY'
import glob, gzip, json, os, sys
for meta in sorted(glob.glob(os.path.join(sys.argv[1], "snapshots", "*.json"))):
    sid = os.path.basename(meta)[:-len(".json")]
    try:
        with gzip.open(os.path.join(sys.argv[1], "cache", sid, "levels.json.gz")) as f:
            steps = json.load(f)["levels"]
    except OSError:
        steps = []
    print(json.dumps({"id": sid, "steps": len(steps), "first": steps[0]["step"] if steps else None,
                      "last": steps[-1]["step"] if steps else None, "last_oom": bool(steps and steps[-1].get("oom"))}))
PY
# SHORT=1: road_oom_short.py (8 ms steps, sparse) into $R/short/
if [ -n "${SHORT:-}" ]; then
  mkdir -p "$R/short"
  VRAMSCOPE_SAMPLE=every=15,window=2 timeout 100 bin/vramscope run --socket $D/s -- python3 examples/oom/road_oom_short.py \
    >"$R/short/road_oom_short.out" 2>"$R/short/road_oom_short.err"
  keep short
fi
# COST=0: no road_cost.py
if [ "${COST:-1}" != 0 ]; then
  VRAMSCOPE_RECORD=0 timeout 150 bin/vramscope run --socket $D/s -- python3 examples/oom/road_cost.py \
    >"$OUT/road_cost.json" 2>"$R/road_cost.err"
fi
kill $DPID
date -u +%FT%TZ >"$R/when.txt"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$R/when.txt"
tar czf "$OUT/road.tgz" -C "$R" .
