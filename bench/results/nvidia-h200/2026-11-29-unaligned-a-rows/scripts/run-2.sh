source .gpu/setup.sh
R=/tmp/r24; rm -rf $R; mkdir -p $R
T0=$(date +%s)
race() {  # tree name layout shapes seconds tag
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $4 --layout $3 --reps 10 --jobs 16 --out $R/$2-$3-$6 > /dev/null 2> $R/$2-$3-$6.log)
  echo "$2 $3 $6 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3-$6/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r24.tgz r24)
}
status() {  # name secs args...
  local n=$1 s=$2; shift 2
  NUMBA_GEMM_CACHE_DIR=/tmp/kc-after timeout $s python3 -m numba_gemm.tools.shapes "$@" --reps 10 --jobs 16 --out $R/$n > /dev/null 2> $R/$n.log
  echo "$n rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$n/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r24.tgz r24)
}
NT=1x60x17297,1x6153x11602,1x1266x237,1x336x1035
race $PWD/.gpu/old before NT $NT 60 changed
race $PWD after NT $NT 60 changed
status random-NN-20261339 150 --heldout random --seed 20261339 --layout NN
status random-NT-20261339 200 --heldout random --seed 20261339 --layout NT
