# Records labelled counter phases on a GPU machine into $1 (default $OUT):
# vramscope's own NVML sampler (JSON lines), nvidia-smi dmon text, and the labels.
set -e
D=${1:-$OUT}
mkdir -p "$D"
bin/vramscope counters --json --interval 100ms --duration 95s > "$D/nvml.jsonl" 2>&1 &
V=$!
nvidia-smi dmon -s pucmt -o DT -d 1 > "$D/dmon.txt" 2>&1 &
N=$!
python3 examples/record/record_counters.py "$D/labels.json"
sleep 1
kill $N 2>/dev/null || true
wait $V || true
wc -l "$D"/*
