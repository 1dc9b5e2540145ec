# grouped NT: GPU tests of the grouped kernels, then the sweep with stage 9's tiles
source .gpu/setup.sh
R=/tmp/r03; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
pack() { (cd /tmp && tar czf $OUT/r03.tgz r03); }
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_grouped.py > $R/grouped-tests.txt 2>&1; echo "tests rc=$? $(( $(date +%s) - T0 )) s"; tail -2 $R/grouped-tests.txt; pack
Q=$(( 585 - ($(date +%s) - T0) )); echo "left $Q s"
timeout $Q python3 -m numba_gemm.tools.grouped --sweep --layout NT --mean 48,128,384 \
  --configs 64x128,32x256,db32x128,db32x256,db64x128,db64x128-tm4,db128x128 --jobs 16 --out $R/sweep > $R/sweep.log 2>&1
echo "sweep rc=$? $(( $(date +%s) - T0 )) s"; wc -l $R/sweep/*.jsonl; tail -3 $R/sweep.log; pack
