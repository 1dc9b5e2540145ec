# call 9's race was not an A/B: `python -m` puts the working folder first on sys.path, so both runs
# imported this tree. Here the old tree runs from its own folder. Old first, then new, then old again.
source .gpu/setup.sh
R=/tmp/r10; rm -rf $R; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/r10.tgz r10); }
S=1x25x10850,1x60x17297,1x157x3045,1x186x7511,1x336x1035,1x759x3689,1x1266x237,1x1672x4637,1x6153x11602,2x1436x1507,2x2396x435,2x12623x78,2x19529x637,3x125x3003,3x526x790,3x6665x149,3x8504x210,4x881x90,4x20059x87,5x1128x62,5x4476x989,7x454x15334,13x452x423,14x803x42,14x3078x82,14x15455x1245,22x744x38
(cd .gpu/oldtree && PYTHONPATH=/tmp/site:$PWD timeout 120 python3 -c "import numba_gemm; print(numba_gemm.__file__)" > $R/old-path.txt; PYTHONPATH=/tmp/site:$PWD timeout 120 python3 -m numba_gemm.tools.shapes --shapes $S --layout NT --reps 10 --jobs 16 --out $R/old1 > /dev/null 2> $R/old1.log); echo "old1 rc=$? $(( $(date +%s) - T0 )) s"; cat $R/old-path.txt; tail -1 $R/old1/summary.txt; pack
PYTHONPATH=/tmp/site:$PWD timeout 120 python3 -m numba_gemm.tools.shapes --shapes $S --layout NT --reps 10 --jobs 16 --out $R/new1 > /dev/null 2> $R/new1.log; echo "new1 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/new1/summary.txt; pack
(cd .gpu/oldtree && PYTHONPATH=/tmp/site:$PWD timeout 60 python3 -m numba_gemm.tools.shapes --shapes $S --layout NT --reps 10 --jobs 16 --out $R/old2 > /dev/null 2> $R/old2.log); echo "old2 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/old2/summary.txt; pack
PYTHONPATH=/tmp/site:$PWD timeout 60 python3 -m numba_gemm.tools.shapes --shapes $S --layout NT --reps 10 --jobs 16 --out $R/new2 > /dev/null 2> $R/new2.log; echo "new2 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/new2/summary.txt; pack
