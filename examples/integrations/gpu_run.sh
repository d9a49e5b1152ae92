#!/bin/bash
# The one GPU run of issue #36 (docs/gpu/): the pytest plugin on real CUDA
# tests, its cost to unmarked tests, and the trainer callbacks with the real
# libraries. Run from a folder holding site/ (pytest 9 and vramscope
# installed with --target), bin/vramscope and this examples/integrations/.
# `gpu_run.sh gates` runs the plugin's parts only (gates, baseline, CPU-only).
set -o pipefail
here=$(pwd)
export PYTHONPATH=$here/site PYTHONUNBUFFERED=1 VRAMSCOPE_BIN=$here/bin/vramscope
ex=examples/integrations
date -u; nvidia-smi -L
python -c 'import torch, pytest, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "pytest", pytest.__version__, "transformers", transformers.__version__)'
echo "== gates on real CUDA tests"
python -m pytest -p no:cacheprovider -rA $ex/gates_demo.py 2>&1 | tail -60
echo "== baseline: first run writes, second (rows x4) fails"
python -m pytest -q -p no:cacheprovider --vram-baseline $OUT/baseline.json $ex/gates_demo.py -k grows 2>&1 | tail -3
GATES_DEMO_ROWS=16384 python -m pytest -q -p no:cacheprovider --vram-baseline $OUT/baseline.json $ex/gates_demo.py -k grows 2>&1 | tail -8
echo "== CPU-only (CUDA_VISIBLE_DEVICES empty)"
CUDA_VISIBLE_DEVICES= python -m pytest -q -p no:cacheprovider $ex/gates_demo.py -k on_cpu 2>&1 | tail -4
[ "$1" = gates ] && exit 0
echo "== cost to 200 unmarked tests: plugin on, plugin off (-p no:vramscope), 3 runs each"
for i in 1 2 3; do
  for p in "" "-p no:vramscope"; do
    echo "run $i plugin=${p:-on}: $(python -m pytest -q -p no:cacheprovider $p $ex/many_tests.py 2>&1 | tail -1)"
  done
done
echo "== trainer callbacks"
python $ex/trainers.py $OUT $VRAMSCOPE_BIN 2>&1 | grep -v Warning | tail -60
rm -f $OUT/*.pickle
