source .gpu/setup.sh
R=/tmp/r33; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
timeout 570 python3 .gpu/train.py run 1,2,3,4,5 $R/train.jsonl > $R/train.log 2>&1
echo "rc=$? $(( $(date +%s) - T0 )) s"; tail -3 $R/train.log; wc -l $R/train.jsonl
(cd /tmp && tar czf $OUT/r33.tgz r33)
