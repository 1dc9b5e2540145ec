# NT scalar GEMV-like products: the tree before, the spread loads without and with the issue fence
source .gpu/setup.sh
export ONLY_NT_SCALAR=1
R=/tmp/r08; rm -rf $R; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/r08.tgz r08); }
NEW=/tmp/site:$PWD; OLD=/tmp/site:$PWD/.gpu/oldtree; NOF=/tmp/site:$PWD/.gpu/nofence
PYTHONPATH=$NEW timeout 150 python3 .gpu/gemv.py $R/probe.jsonl fence1 cublas > $R/fence1.log 2>&1; echo "fence1 rc=$? $(( $(date +%s) - T0 )) s"; pack
PYTHONPATH=$OLD timeout 150 python3 .gpu/gemv.py $R/probe.jsonl old1 > $R/old1.log 2>&1; echo "old1 rc=$? $(( $(date +%s) - T0 )) s"; pack
PYTHONPATH=$NOF timeout 150 python3 .gpu/gemv.py $R/probe.jsonl nofence1 > $R/nofence1.log 2>&1; echo "nofence1 rc=$? $(( $(date +%s) - T0 )) s"; pack
for t in fence2:$NEW old2:$OLD nofence2:$NOF; do PYTHONPATH=${t#*:} timeout 60 python3 .gpu/gemv.py $R/probe.jsonl ${t%%:*} > $R/${t%%:*}.log 2>&1; echo "${t%%:*} rc=$? $(( $(date +%s) - T0 )) s"; pack; done
wc -l $R/probe.jsonl
