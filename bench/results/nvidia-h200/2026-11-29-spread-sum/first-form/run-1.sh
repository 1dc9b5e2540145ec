source .gpu/setup.sh
R=/tmp/r17; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
python3 -c "import xdist" 2>/dev/null && X="-n 8" || X=""
timeout 170 python3 -m pytest -q -x $X -p no:cacheprovider tests/test_tuning.py -k "split_k_is_deterministic or spread" > $R/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - T0 )) s"; tail -3 $R/tests.log
(cd /tmp && tar czf $OUT/r17.tgz r17)
race() {  # tree name layout shapes seconds
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $4 --layout $3 --reps 10 --jobs 16 --out $R/$2-$3-$6 > /dev/null 2> $R/$2-$3-$6.log)
  echo "$2 $3 $6 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3-$6/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r17.tgz r17)
}
NN=213x189x196,1546x46x499,19x42x481,13x31x20346,15872x44x5138,757x155x389,11x22739x1469,5x3720x9870,8x3126x14199,8x4833x342
NT=79x82x12215,78x280x218,1207x320x1329,8609x33x8177,2719x12x3096,1x6153x11602,3x18x16969,4x881x90,3156x97x12868,269x961x10051
race $PWD/.gpu/old before NN $NN 90 random
race $PWD after NN $NN 90 random
race $PWD/.gpu/old before NT $NT 90 random
race $PWD after NT $NT 90 random
