source .gpu/setup.sh
R=/tmp/r16; rm -rf $R; mkdir -p $R
T0=$(date +%s)
timeout 330 python3 .gpu/occ.py $R/occ.jsonl > $R/occ.log 2>&1; echo "occ rc=$? $(( $(date +%s) - T0 )) s"; wc -l $R/occ.jsonl
(cd /tmp && tar czf $OUT/r16.tgz r16)
