source .gpu/setup.sh
R=/tmp/r15; rm -rf $R; mkdir -p $R
T0=$(date +%s)
race() {  # tree name layout shapes seconds
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $4 --layout $3 --reps 10 --jobs 16 --out $R/$2-$3-$6 > /dev/null 2> $R/$2-$3-$6.log)
  echo "$2 $3 $6 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3-$6/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r15.tgz r15)
}
race $PWD/.gpu/old before NN 38x4143x2,9x8x4117,26x2784x7,1859x72x6714,17x4x5657,223x711x1056,62x18x3349,21x2x9701,139x16080x10308,8915x88x5351 115 random
race $PWD after NN 38x4143x2,9x8x4117,26x2784x7,1859x72x6714,17x4x5657,223x711x1056,62x18x3349,21x2x9701,139x16080x10308,8915x88x5351 115 random
race $PWD/.gpu/old before NT 81x127x981,6204x53x659,10x107x10083,12x87x5986,21294x36x3039,3x105x6690,87x3302x963,1512x101x426,47x7397x568,11759x213x993,12x6x12598,17x12x4524 125 random
race $PWD after NT 81x127x981,6204x53x659,10x107x10083,12x87x5986,21294x36x3039,3x105x6690,87x3302x963,1512x101x426,47x7397x568,11759x213x993,12x6x12598,17x12x4524 125 random
