# A/B: the 21 held-out model products whose plan changes when B transposed is no longer priced
# from measured shapes of row-major B; the tree before (HEAD b21c80c, its own folder) and after.
source .gpu/setup.sh
R=/tmp/r17; rm -rf $R; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/r17.tgz r17); }
S=128x4608x3584,128x3584x3584,128x3584x4096,128x3072x3072,2000x3072x3072,128x4672x4544,128x4544x4544,320x6144x5120,320x5120x4096,320x28672x5120,320x5120x14336,1500x2048x2048,1500x2048x1536,320x4096x4096,320x4096x16384,48x5120x4096,48x4096x4096,200x5120x4096,200x4096x4096,200x22016x4096,200x4096x11008
(cd .gpu/oldtree && PYTHONPATH=/tmp/site:$PWD python3 -c "import numba_gemm; print(numba_gemm.__file__)" > $R/old-path.txt)
for run in old1 new1 old2 new2; do
  case $run in old*) D=.gpu/oldtree;; *) D=.;; esac; case $run in *1) TL=100;; *) TL=60;; esac
  (cd $D && PYTHONPATH=/tmp/site:$PWD timeout $TL python3 -m numba_gemm.tools.shapes --shapes $S --layout NT --reps 10 --jobs 16 --out $R/$run > /dev/null 2> $R/$run.log); echo "$run rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$run/summary.txt; pack
done
