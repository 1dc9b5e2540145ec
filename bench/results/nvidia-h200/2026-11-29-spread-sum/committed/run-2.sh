source .gpu/setup.sh
R=/tmp/r21; rm -rf $R; mkdir -p $R
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_tuning.py -k "concurrent_streams or spread_split_k_sum" > $R/tests.log 2>&1
echo "tests rc=$?"; tail -3 $R/tests.log
cp $R/tests.log $OUT/tests21.log
