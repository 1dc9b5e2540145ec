# the three held-out model sets (x @ W.T) with the tree after the NT fit
source .gpu/setup.sh
R=/tmp/r15; rm -rf $R; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/r15.tgz r15); }
for m in models models2 models3; do
  timeout 175 python3 -m numba_gemm.tools.shapes --heldout $m --reps 10 --jobs 16 --out $R/$m > /dev/null 2> $R/$m.log; echo "$m rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$m/summary.txt; pack
done
