# spread-tail A/B (NG_TAIL=0 whole waves / 1 spread tail), held-out random the three model sets (NT)
source .gpu/setup.sh
R=/tmp/r02; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
race() {  # tail name layout shapesfile secs
  (NG_TAIL=$1 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $(cat .gpu/$4) --layout $3 --reps 10 --jobs 16 --out $R/$2-$3 > /dev/null 2> $R/$2-$3.log)
  echo "$2 $3 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r02.tgz r02)
}
race 0 before NT tail-models.txt 260
Q=$(( 585 - ($(date +%s) - T0) )); echo "left $Q s"
race 1 after NT tail-models.txt $Q
