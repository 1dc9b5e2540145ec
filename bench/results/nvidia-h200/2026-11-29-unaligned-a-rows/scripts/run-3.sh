source .gpu/setup.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlnb/*.whl
R=/tmp/r25; rm -rf $R; mkdir -p $R/nb
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
for f in notebooks/0*.py; do n=$(basename $f .py | cut -c1-2); (timeout 240 python3 notebooks/execute.py $n --timeout 230 > $R/nb/$n.log 2>&1; echo "$n rc=$?" >> $R/nb/rc.txt) & done; wait
cp notebooks/*.ipynb $R/nb/
(cd /tmp && tar czf $OUT/nb.tgz r25/nb)
echo "notebooks $(( $(date +%s) - T0 )) s"; sort $R/nb/rc.txt | tr '\n' ' '; echo
status() {  # name secs args...
  local n=$1 s=$2; shift 2
  NUMBA_GEMM_CACHE_DIR=/tmp/kc-after timeout $s python3 -m numba_gemm.tools.shapes "$@" --reps 10 --jobs 16 --out $R/$n > /dev/null 2> $R/$n.log
  echo "$n rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$n/summary.txt 2>/dev/null
  (cd /tmp && tar czf $OUT/r25.tgz --exclude=r25/nb r25)
}
Q=$(( 560 - ($(date +%s) - T0) )); echo "left $Q s"
status random-NN-20261340 $(( Q * 2 / 5 )) --heldout random --seed 20261340 --layout NN
Q=$(( 570 - ($(date +%s) - T0) ))
status random-NT-20261340 $Q --heldout random --seed 20261340 --layout NT
