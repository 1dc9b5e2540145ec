source .gpu/setup.sh
R=/tmp/r34; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
status() {  # name secs args...
  local n=$1 s=$2; shift 2
  NUMBA_GEMM_CACHE_DIR=/tmp/kc-after timeout $s python3 -m numba_gemm.tools.shapes "$@" --reps 10 --jobs 16 --out $R/$n > /dev/null 2> $R/$n.log
  echo "$n rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$n/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r34.tgz r34)
}
status models 150 --heldout models
status models2 130 --heldout models2
status models3 130 --heldout models3
Q=$(( 580 - ($(date +%s) - T0) ))
status random-NN-20261342 $(( Q / 2 )) --heldout random --seed 20261342 --layout NN
Q=$(( 585 - ($(date +%s) - T0) ))
status random-NT-20261342 $Q --heldout random --seed 20261342 --layout NT
