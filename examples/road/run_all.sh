#!/bin/bash
# Runs every road program at once on one GPU (each its own process and
# caching allocator; the caps are per process), each under a time limit.
# Results: $OUT/<program>.json and $OUT/road.log.
cd "$(dirname "$0")"
export OUT=${OUT:-.}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/road.log"
for p in "leak.py" "leak.py --varlen" grad_accum.py varlen.py eval_warmup.py late_long.py; do
  timeout 200 python3 $p >> "$OUT/road.log" 2>&1 &
done
wait
echo done >> "$OUT/road.log"
