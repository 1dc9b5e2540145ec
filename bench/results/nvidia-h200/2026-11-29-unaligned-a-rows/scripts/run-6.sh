# .gpu/old2: git archive of commit 7f6c673 (before the pin of loose launch bounds); the tree after: that commit plus it
source .gpu/setup.sh
R=/tmp/r29; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
race() {  # tree name layout shapes seconds tag
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $4 --layout $3 --reps 10 --jobs 16 --out $R/$2-$3-$6 > /dev/null 2> $R/$2-$3-$6.log)
  echo "$2 $3 $6 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3-$6/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r29.tgz r29)
}
NN=1859x72x6714,915x200x5610,1417x112x426,2888x112x1108,8915x88x5351,272x50x5235,316x2079x978,1467x495x652
NT=128x2048x2048,320x2048x2048,200x2560x2560,128x8192x2048,426x98x12845,409x678x10666
race $PWD/.gpu/old2 before NN $NN 85 pin
race $PWD after NN $NN 85 pin
race $PWD/.gpu/old2 before NT $NT 75 pin
race $PWD after NT $NT 75 pin
