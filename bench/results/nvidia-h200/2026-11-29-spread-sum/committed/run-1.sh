source .gpu/setup.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlnb/*.whl
R=/tmp/r20; rm -rf $R; mkdir -p $R/nb
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
python3 -c "import xdist" 2>/dev/null && X="-n 8" || X=""
timeout 150 python3 -m pytest -q -x $X -p no:cacheprovider tests/test_tuning.py -k "split_k_is_deterministic or spread" > $R/tests.log 2>&1
echo "tests rc=$? $(( $(date +%s) - T0 )) s"; tail -2 $R/tests.log
(cd /tmp && tar czf $OUT/r20.tgz --exclude=r20/nb r20)
for f in notebooks/0*.py; do n=$(basename $f .py | cut -c1-2); (timeout 240 python3 notebooks/execute.py $n --timeout 230 > $R/nb/$n.log 2>&1; echo "$n rc=$?" >> $R/nb/rc.txt) & done; wait
cp notebooks/*.ipynb $R/nb/
(cd /tmp && tar czf $OUT/nb.tgz r20/nb)
echo "notebooks $(( $(date +%s) - T0 )) s"; sort $R/nb/rc.txt | tr '\n' ' '; echo
race() {  # tree name layout shapes seconds
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $4 --layout $3 --reps 10 --jobs 16 --out $R/$2-$3 > /dev/null 2> $R/$2-$3.log)
  echo "$2 $3 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r20.tgz --exclude=r20/nb r20)
}
NN=213x189x196,1546x46x499,19x42x481,13x31x20346,15872x44x5138,757x155x389,11x22739x1469,5x3720x9870,8x3126x14199,8x4833x342
NT=79x82x12215,78x280x218,1207x320x1329,8609x33x8177,2719x12x3096,1x6153x11602,3x18x16969,4x881x90,3156x97x12868,269x961x10051
Q=$(( (545 - ($(date +%s) - T0)) / 4 )); echo "slots $Q s"
race $PWD/.gpu/old before NN $NN $Q
race $PWD after NN $NN $Q
race $PWD/.gpu/old before NT $NT $Q
race $PWD after NT $NT $Q
