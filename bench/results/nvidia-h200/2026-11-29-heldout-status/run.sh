source .gpu/setup.sh
R=/tmp/r6; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
race() {  # name secs args...
  local n=$1 s=$2; shift 2
  timeout $s python3 -m numba_gemm.tools.shapes "$@" --reps 10 --jobs 16 --out $R/$n > /dev/null 2> $R/$n.log
  echo "$n rc=$? $(( $(date +%s) - T0 )) s"; tail -3 $R/$n/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r6.tgz r6)
}
race random-NN-20261327 100 --heldout random --seed 20261327 --layout NN
race random-NT-20261327 100 --heldout random --seed 20261327 --layout NT
race models3 100 --heldout models3
