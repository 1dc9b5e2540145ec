source .gpu/setup.sh
R=/tmp/r26; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
race() {  # tree name layout shapes seconds tag
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $4 --layout $3 --reps 10 --jobs 16 --out $R/$2-$3-$6 > /dev/null 2> $R/$2-$3-$6.log)
  echo "$2 $3 $6 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3-$6/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r26.tgz r26)
}
NN=1772x2120x102,1417x112x426,7776x28x10,915x200x5610,1x37x10230
NT=1x1266x237,1x336x1035,1x25x10850
race $PWD/.gpu/old before NN $NN 100 fresh
race $PWD after NN $NN 100 fresh
race $PWD/.gpu/old before NT $NT 60 fresh
race $PWD after NT $NT 60 fresh
