# status: the pricing fix's two untimed picks, and a fresh draw (seed 20261362), committed tree
source .gpu/setup.sh
R=/tmp/r06; rm -rf $R; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/r06.tgz r06); }
timeout 60 python3 -m numba_gemm.tools.shapes --shapes 20601x27x7050,19008x35x417 --layout NT --reps 10 --jobs 16 --out $R/fix-picks-NT > /dev/null 2> $R/fix-picks.log; echo "fix rc=$? $(( $(date +%s) - T0 )) s"; tail -3 $R/fix-picks-NT/summary.txt; pack
timeout 190 python3 -m numba_gemm.tools.shapes --heldout random --seed 20261362 --layout NN --reps 10 --jobs 16 --out $R/random-NN-20261362 > /dev/null 2> $R/nn.log; echo "NN rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/random-NN-20261362/summary.txt; pack
Q=$(( 440 - ($(date +%s) - T0) )); echo "left $Q s"
timeout $Q python3 -m numba_gemm.tools.shapes --heldout random --seed 20261362 --layout NT --reps 10 --jobs 16 --out $R/random-NT-20261362 > /dev/null 2> $R/nt.log; echo "NT rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/random-NT-20261362/summary.txt; pack
