#!/bin/bash
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit
export NUMBA_GEMM_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name --format=csv,noheader
S=$(date +%s)
python3 bench/shapes.py --out $OUT/nt --layout NT --jobs 16 --shapes 4096x4096x4096,4095x4095x4095,4097x4097x4097,4097x1023x4095,4096x16x4096,8x4096x4096 2>&1 | tr '\r' '\n' | grep -v '^{\|^precompile:' | tail -2
cat $OUT/nt/summary.txt; echo "nt: $(( $(date +%s) - S )) s"
python3 bench/shapes.py --out $OUT/nn --jobs 16 --shapes 4096x16x4096,4095x4095x4095 2>&1 | tr '\r' '\n' | grep -v '^{\|^precompile:' | tail -2
cat $OUT/nn/summary.txt; echo "all: $(( $(date +%s) - S )) s"
