# A/B: the 59 held-out products (model sets 1-3, seed 20261363's NT draw) whose plan the NT fit
# changes; the tree before (HEAD, from its own folder) and after, old / new / old / new.
source .gpu/setup.sh
R=/tmp/r14; rm -rf $R; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/r14.tgz r14); }
S=128x3584x18944,128x8192x3584,128x28672x3584,128x3584x14336,128x9216x3072,128x16384x3072,2000x16384x3072,2000x3072x8192,2000x4672x4544,2000x4544x4544,2000x4544x18176,128x8192x2048,128x2048x8192,1500x6144x5120,1500x5120x4096,1500x5120x14336,24x2048x2048,1500x2048x5632,24x2048x1536,24x1536x1536,24x17920x1536,1500x1536x1536,1500x1536x8960,24x12288x4096,320x16384x4096,1500x4096x4096,1500x4096x16384,320x6912x2304,48x5120x3072,48x3072x3072,48x16384x3072,48x3072x8192,1000x3072x8192,48x22016x4096,48x4096x11008,48x7680x2560,48x2560x2560,48x10240x2560,48x2560x10240,200x7680x2560,200x2560x2560,1000x7680x2560,1000x2560x2560,48x2560x2048,48x2048x2048,48x32768x2048,48x2048x16384,200x2560x2048,200x2048x2048,1000x2560x2048,1000x2048x2048,1000x32768x2048,48x11264x2048,48x2048x5632,200x2048x5632,1000x2048x5632,20660x753x2426,8688x16974x830,4027x2769x1429
(cd .gpu/oldtree && PYTHONPATH=/tmp/site:$PWD python3 -c "import numba_gemm; print(numba_gemm.__file__)" > $R/old-path.txt)
for run in old1 new1 old2 new2; do
  case $run in old*) D=.gpu/oldtree;; *) D=.;; esac
  (cd $D && PYTHONPATH=/tmp/site:$PWD timeout 140 python3 -m numba_gemm.tools.shapes --shapes $S --layout NT --reps 10 --jobs 16 --out $R/$run > /dev/null 2> $R/$run.log); echo "$run rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$run/summary.txt; pack
done
