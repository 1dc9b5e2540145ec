# NN vs NT, same configurations, and cuBLAS NN vs NT
source .gpu/setup.sh
R=/tmp/r19; rm -rf $R; mkdir -p $R
timeout 400 python3 .gpu/ntnn.py $R/ntnn.jsonl 2> $R/ntnn.log; echo rc=$?
tail -3 $R/ntnn.log
cp -r $R $OUT/
