#!/bin/bash
# The vector_loads variant (128-bit loads of A and W, 32-bit stores of C) on x @ W.T with odd N:
# GPU tests of the new variant, then the old package (abold/: 77062a1) and the new one
# alternated twice on the NT products whose plan changes, each in its own kernel cache.
# Before the device call, from the project root (abold/ travels as an untracked folder):
#   mkdir abold && git archive 77062a1 numba_gemm bench/shapes.py | tar -x -C abold
# Not run yet (bench/NOTES.md, fourteenth session): no device time was left.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 || exit
nvidia-smi --query-gpu=name --format=csv,noheader
S=$(date +%s)
SHAPES=1x50257x768,8x50257x768,16x50257x768,64x50257x768,256x50257x768,4096x50257x768,4096x1x4096,1000x1001x1000
(PYTHONPATH=$PYTHONPATH:$PWD NUMBA_GEMM_CACHE_DIR=/tmp/kc_t python3 -m pytest -q -p no:randomly -p no:cacheprovider tests/test_layouts.py -k "68-70-24 or 9-41-200 or 8-9-136" 2>&1 | tail -3) &
T=$!
for i in 1 2; do
  for v in old new; do
    if [ $v = old ]; then R=abold; else R=$PWD; fi
    (cd $R && PYTHONPATH=$PYTHONPATH:$R NUMBA_GEMM_CACHE_DIR=/tmp/kc_$v python3 bench/shapes.py --out $OUT/$v$i --layout NT --jobs 12 --shapes $SHAPES 2>&1 | tr '\r' '\n' | grep -v '^{\|^precompile:' | tail -2)
    echo "== $v$i at $(( $(date +%s) - S )) s"; cat $OUT/$v$i/summary.txt | head -30
    if [ $i = 1 ] && [ $v = old ]; then wait $T; echo "tests done at $(( $(date +%s) - S )) s"; fi
  done
done
