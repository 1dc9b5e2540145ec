source .gpu/setup.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlnb/*.whl
R=/tmp/r18; rm -rf $R; mkdir -p $R/nb
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
for f in notebooks/0*.py; do n=$(basename $f .py | cut -c1-2); (timeout 240 python3 notebooks/execute.py $n --timeout 230 > $R/nb/$n.log 2>&1; echo "$n rc=$?" >> $R/nb/rc.txt) & done; wait
cp notebooks/*.ipynb $R/nb/
(cd /tmp && tar czf $OUT/nb.tgz r18/nb r18/gpu.txt)
echo "notebooks $(( $(date +%s) - T0 )) s"; sort $R/nb/rc.txt | tr '\n' ' '; echo
race() {  # tree name seconds args...
  local t=$1 n=$2 s=$3; shift 3
  (cd $t && PYTHONPATH=/tmp/site:$t NUMBA_GEMM_CACHE_DIR=/tmp/kc-$n timeout $s python3 -m numba_gemm.tools.shapes "$@" --reps 10 --jobs 16 --out $R/$n > /dev/null 2> $R/$n.log)
  echo "$n rc=$? $(( $(date +%s) - T0 )) s"; tail -2 $R/$n/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r18.tgz --exclude=r18/nb r18)
}
Q=$(( (560 - ($(date +%s) - T0)) / 2 )); echo "slots $Q s"
race $PWD/.gpu/old before-models3 $Q --heldout models3
race $PWD after-models3 $Q --heldout models3
