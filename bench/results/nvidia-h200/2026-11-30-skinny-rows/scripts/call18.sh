# The rule of design.md §4.20 raced: six 24-token NT products, the tree before (.gpu/oldtree, HEAD
# e22fa37) and after (.gpu/newtree: the same with the rule), each from its own folder,
# old / new / old / new; then the second model set on the tree after. Prepared here:
#   git archive HEAD numba_gemm | tar -x -C .gpu/oldtree   (and .gpu/newtree, then the rule)
# .gpu/setup.sh installs the carried wheels into /tmp/site (../shared/device/README.md).
source .gpu/setup.sh
R=/tmp/r18; rm -rf $R; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/r18.tgz r18); }
S=24x6144x5120,24x5120x4096,24x28672x5120,24x5120x14336,24x4096x4096,24x4096x16384
for run in old1 new1 old2 new2; do
  case $run in old*) D=.gpu/oldtree;; *) D=.gpu/newtree;; esac
  (cd $D && PYTHONPATH=/tmp/site:$PWD timeout 90 python3 -m numba_gemm.tools.shapes --shapes $S --layout NT --reps 10 --jobs 16 --out $R/$run > /dev/null 2> $R/$run.log); echo "$run rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$run/summary.txt; pack
done
(cd .gpu/newtree && PYTHONPATH=/tmp/site:$PWD timeout 175 python3 -m numba_gemm.tools.shapes --heldout models2 --reps 10 --jobs 16 --out $R/models2-new > /dev/null 2> $R/models2-new.log); echo "models2-new rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/models2-new/summary.txt; pack
