source .gpu/setup.sh
R=/tmp/r14; rm -rf $R; mkdir -p $R
T0=$(date +%s)
race() {  # tree name layout shapes seconds
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $4 --layout $3 --reps 10 --jobs 16 --out $R/$2-$3-$6 > /dev/null 2> $R/$2-$3-$6.log)
  echo "$2 $3 $6 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3-$6/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r14.tgz r14)
}
race $PWD/.gpu/old before NN 25x3629x12,13x204x4309,4x60x19557,79x99x5204,118x1725x279,55x96x21066,3294x25x945,12x21x10453,38x1649x1993 110 random
race $PWD after NN 25x3629x12,13x204x4309,4x60x19557,79x99x5204,118x1725x279,55x96x21066,3294x25x945,12x21x10453,38x1649x1993 110 random
race $PWD/.gpu/old before NT 282x208x602,771x34x2817,3902x98x21983,43x75x6214,251x822x2260,19x9775x14072,2875x179x10265,5865x107x827,75x1946x192,21x6655x92,6113x114x8029,193x312x2929 120 random
race $PWD after NT 282x208x602,771x34x2817,3902x98x21983,43x75x6214,251x822x2260,19x9775x14072,2875x179x10265,5865x107x827,75x1946x192,21x6655x92,6113x114x8029,193x312x2929 120 random
