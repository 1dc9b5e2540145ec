# a fresh random draw (seed 20261363, never raced), NN and NT, the tree after the NT fit
source .gpu/setup.sh
R=/tmp/r16; rm -rf $R; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/r16.tgz r16); }
for lay in NN NT; do
  timeout 200 python3 -m numba_gemm.tools.shapes --heldout random --seed 20261363 --layout $lay --reps 10 --jobs 16 --out $R/random-$lay > /dev/null 2> $R/random-$lay.log; echo "$lay rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/random-$lay/summary.txt; pack
done
