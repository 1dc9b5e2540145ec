source .gpu/setup.sh
R=/tmp/r12; rm -rf $R; mkdir -p $R
T0=$(date +%s)
timeout 300 python3 .gpu/pin.py $R/pin.jsonl > $R/pin.txt 2> $R/pin.log; echo "pin rc=$? $(( $(date +%s) - T0 )) s"
(cd /tmp && tar czf $OUT/r12.tgz r12)
timeout 100 python3 -m numba_gemm.tools.shapes --shapes 77x17597x1,80x17600x1,77x17600x4,77x17597x8 --layout NT --reps 10 --jobs 16 --out $R/k1 > /dev/null 2> $R/k1.log; echo "k1 rc=$? $(( $(date +%s) - T0 )) s"
(cd /tmp && tar czf $OUT/r12.tgz r12)
cat $R/pin.txt; tail -8 $R/k1/summary.txt
