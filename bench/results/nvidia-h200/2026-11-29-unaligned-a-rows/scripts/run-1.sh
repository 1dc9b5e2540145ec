source .gpu/setup.sh
R=/tmp/r23; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
python3 -c "import xdist" 2>/dev/null && X="-n 8" || X=""
timeout 150 python3 -m pytest -q -x $X -p no:cacheprovider tests/test_plan.py tests/test_skinny.py -k "copied_by_element or alignment_rule or misaligned or fill_the_gpu" > $R/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - T0 )) s"; tail -3 $R/tests.log
(cd /tmp && tar czf $OUT/r23.tgz r23)
race() {  # tree name layout shapes seconds tag
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $4 --layout $3 --reps 10 --jobs 16 --out $R/$2-$3-$6 > /dev/null 2> $R/$2-$3-$6.log)
  echo "$2 $3 $6 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3-$6/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r23.tgz r23)
}
NN=10545x3160x58,12x2644x783,1300x1960x3990,1360x15828x165,13x204x4309,14727x8x26,1531x3848x202,15872x44x5138,1591x432x6,159x360x12982,17x4x5657,1859x72x6714,190x5408x19,1x1823x277,1x252x3531,1x2592x6543,2122x228x1,218x76x19,2229x1100x914,2243x24x13,2343x828x15921,2469x60x7,26x2784x7,3036x1192x166,31x2132x82,3x120x17030,3x9228x3894,47x172x8519,4x3276x77,4x60x19557,55x96x21066,5x2644x105,5x3720x9870,786x976x38,8915x88x5351,91x6548x97,9x8x4117
race $PWD/.gpu/old before NN $NN 210 changed
race $PWD after NN $NN 210 changed
