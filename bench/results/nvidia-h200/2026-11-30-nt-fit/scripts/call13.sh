# training probe: aligned NT projection-like products of training seeds 101 and 102 (no held-out set)
source .gpu/setup.sh
R=/tmp/r13; rm -rf $R; mkdir -p $R
T0=$(date +%s)
pack() { (cd /tmp && tar czf $OUT/r13.tgz r13); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
timeout 330 python3 .gpu/ntprobe.py $R/probe-101.jsonl 101 40 > $R/probe-101.log 2>&1; echo "101 rc=$? $(( $(date +%s) - T0 )) s"; tail -2 $R/probe-101.log; pack
timeout 200 python3 .gpu/ntprobe.py $R/probe-102.jsonl 102 40 > $R/probe-102.log 2>&1; echo "102 rc=$? $(( $(date +%s) - T0 )) s"; tail -2 $R/probe-102.log; pack
wc -l $R/*.jsonl
