source .gpu/setup.sh
R=/tmp/r28; rm -rf $R; mkdir -p $R
T0=$(date +%s)
(cd /tmp && tar czf $OUT/r28.tgz r28)
timeout 300 python3 bench/results/nvidia-h200/2026-11-29-unaligned-a-rows/scripts/probe.py $R/probe.jsonl > $R/probe.txt 2> $R/probe.log
echo "probe rc=$? $(( $(date +%s) - T0 )) s"; cat $R/probe.txt | grep -v compiled
(cd /tmp && tar czf $OUT/r28.tgz r28)
