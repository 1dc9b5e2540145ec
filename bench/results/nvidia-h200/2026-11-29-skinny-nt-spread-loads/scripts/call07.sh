# GEMV probe: the model's top 10 candidates at 24 constructed products, the tree before / after
# the skinny stage's spread loads of a transposed B (scalar), two passes each; GPU tests
source .gpu/setup.sh
R=/tmp/r07; rm -rf $R; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/r07.tgz r07); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
NEW=/tmp/site:$PWD; OLD=/tmp/site:$PWD/.gpu/oldtree
PYTHONPATH=$NEW timeout 200 python3 .gpu/gemv.py $R/probe.jsonl new1 cublas > $R/new1.log 2>&1; echo "new1 rc=$? $(( $(date +%s) - T0 )) s"; tail -2 $R/new1.log; pack
PYTHONPATH=$OLD timeout 200 python3 .gpu/gemv.py $R/probe.jsonl old1 > $R/old1.log 2>&1; echo "old1 rc=$? $(( $(date +%s) - T0 )) s"; tail -2 $R/old1.log; pack
PYTHONPATH=$NEW timeout 60 python3 .gpu/gemv.py $R/probe.jsonl new2 > $R/new2.log 2>&1; echo "new2 rc=$? $(( $(date +%s) - T0 )) s"; pack
PYTHONPATH=$OLD timeout 60 python3 .gpu/gemv.py $R/probe.jsonl old2 > $R/old2.log 2>&1; echo "old2 rc=$? $(( $(date +%s) - T0 )) s"; pack
PYTHONPATH=$NEW timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_layouts.py -k "skinny" > $R/tests.txt 2>&1; echo "tests rc=$? $(( $(date +%s) - T0 )) s"; tail -2 $R/tests.txt; pack
wc -l $R/probe.jsonl
