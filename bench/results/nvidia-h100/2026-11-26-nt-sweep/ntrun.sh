#!/bin/bash
# NT (x @ W.T) sweeps of the skinny stage: $1 = part (c: compile, s1, s2, race)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit
export NUMBA_GEMM_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name --format=csv,noheader
S1=1x4096x4096,8x4096x4096,16x4096x4096,16x6144x4096,16x28672x4096,16x4096x14336
S2=1x6144x4096,1x28672x4096,1x4096x14336,16x2304x768,16x768x768,16x3072x768,16x768x3072,1x2304x768,1x768x768,1x3072x768,1x768x3072
SW="--layout NT --sweep --stages skinny --extra bench/results/nvidia-h100/2026-11-26-nt-sweep/nt_extra.json --jobs 16"
for part in "$@"; do
  S=$(date +%s)
  case $part in
    c) python3 bench/shapes.py --out /tmp/c --shapes $S1,$S2 $SW --compile-only 2>&1 | tr '\r' '\n' | grep -v '^precompile:' | tail -3 ;;
    s1) python3 bench/shapes.py --out $OUT/s1 --shapes $S1 $SW 2>&1 | tr '\r' '\n' | grep -v '^{\|^precompile:' | tail -5 ;;
    s2) python3 bench/shapes.py --out $OUT/s2 --shapes $S2 $SW 2>&1 | tr '\r' '\n' | grep -v '^{\|^precompile:' | tail -5 ;;
    race) python3 bench/shapes.py --out $OUT/race --layout NT --jobs 16 2>&1 | tr '\r' '\n' | grep -v '^{\|^precompile:' | tail -3; cat $OUT/race/summary.txt ;;
  esac
  echo "part $part: $(( $(date +%s) - S )) s"
done
