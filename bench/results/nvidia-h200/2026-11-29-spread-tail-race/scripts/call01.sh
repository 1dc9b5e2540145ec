# spread-tail A/B (NG_TAIL=0 whole waves / 1 spread tail), held-out random seeds 20261354-61
source .gpu/setup.sh
R=/tmp/r01; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
race() {  # tail name layout shapesfile secs
  (NG_TAIL=$1 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $(cat .gpu/$4) --layout $3 --reps 10 --jobs 16 --out $R/$2-$3 > /dev/null 2> $R/$2-$3.log)
  echo "$2 $3 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r01.tgz r01)
}
race 0 before NN tail-NN.txt 150
race 1 after NN tail-NN.txt 100
race 0 before NT tail-NT.txt 150
Q=$(( 580 - ($(date +%s) - T0) )); echo "left $Q s"
race 1 after NT tail-NT.txt $Q
