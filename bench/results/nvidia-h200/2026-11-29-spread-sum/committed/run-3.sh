source .gpu/setup.sh
R=/tmp/r22; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
race() {  # name secs args...
  local n=$1 s=$2; shift 2
  timeout $s python3 -m numba_gemm.tools.shapes "$@" --reps 10 --jobs 16 --out $R/$n > /dev/null 2> $R/$n.log
  echo "$n rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$n/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r22.tgz r22)
}
race random-NN-20261338 75 --heldout random --seed 20261338 --layout NN
race random-NT-20261338 120 --heldout random --seed 20261338 --layout NT
