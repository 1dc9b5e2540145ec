# call01
source .gpu/setup.sh
ROOT=$PWD; R=/tmp/r01; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
pack() { (cd /tmp && tar czf $OUT/r01.tgz r01); }
ab() { (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $4 python3 $ROOT/.gpu/ab.py 1,2,3,4,5 $2 $R/ab.jsonl $3 >> $R/ab-$2.log 2>&1); echo "$2 rc=$? $(( $(date +%s) - T0 )) s"; grep compiled $R/ab-$2.log | tail -1; pack; }
ab $ROOT/.gpu/aonly aonly 1 120
ab $ROOT both 1 120
ab $ROOT/.gpu/aonly aonly 1 45
ab $ROOT both 1 45
ab $ROOT/.gpu/aonly aonly 1 45
ab $ROOT both 1 45
# ---- call02
source .gpu/setup.sh
R=/tmp/r02; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
pack() { (cd /tmp && tar czf $OUT/r02.tgz r02); }
cp numba_gemm/tuning/sm_90.json $R/sm_90.json
timeout 400 python3 -m numba_gemm.tools.tune --classes skinny_n --stages double_buffering multistage \
  --configs .gpu/bn32.json --budget 140 --jobs 16 --max-compile 20 --out $R/sm_90.json --log $R/tune-log.csv > $R/tune.txt 2> $R/tune.err
echo "tune rc=$? $(( $(date +%s) - T0 )) s"; tail -5 $R/tune.txt; tail -3 $R/tune.err; pack
Q=$(( 570 - ($(date +%s) - T0) )); echo "left $Q s"
timeout $Q python3 -m numba_gemm.tools.tune --retime NT --classes skinny_n --stages double_buffering multistage \
  --jobs 16 --out $R/sm_90.json > $R/retime-nt.txt 2> $R/retime-nt.err
echo "retime rc=$? $(( $(date +%s) - T0 )) s"; tail -3 $R/retime-nt.err; pack
# ---- call03
source .gpu/setup.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlnb/*.whl
ROOT=$PWD; R=/tmp/r03; rm -rf $R; mkdir -p $R/nb
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
for f in notebooks/0*.py; do n=$(basename $f .py | cut -c1-2); (timeout 240 python3 notebooks/execute.py $n --timeout 230 > $R/nb/$n.log 2>&1; echo "$n rc=$?" >> $R/nb/rc.txt) & done; wait
cp notebooks/*.ipynb $R/nb/
(cd /tmp && tar czf $OUT/nb.tgz r03/nb)
echo "notebooks $(( $(date +%s) - T0 )) s"; sort $R/nb/rc.txt | tr '\n' ' '; echo
pack() { (cd /tmp && tar czf $OUT/r03.tgz --exclude=r03/nb r03); }
race() {  # tree name secs layout shapesfile
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $3 python3 -m numba_gemm.tools.shapes --shapes $(cat $ROOT/$5) --layout $4 --reps 10 --jobs 16 --out $R/$2-$4 > /dev/null 2> $R/$2-$4.log)
  echo "$2-$4 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$4/summary.txt 2>/dev/null; pack
}
race $ROOT after 110 NN .gpu/nn.txt
race $ROOT/.gpu/before before 110 NN .gpu/nn.txt
race $ROOT after 110 NT .gpu/nt.txt
Q=$(( 575 - ($(date +%s) - T0) )); echo "left $Q s"
race $ROOT/.gpu/before before $Q NT .gpu/nt.txt
# ---- call04
source .gpu/setup.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlnb/*.whl
R=/tmp/r04; rm -rf $R; mkdir -p $R/nb
T0=$(date +%s)
timeout 230 python3 notebooks/execute.py 09 --timeout 220 > $R/nb/09.log 2>&1; echo "09 rc=$? $(( $(date +%s) - T0 )) s"
cp notebooks/09*.ipynb $R/nb/
(cd /tmp && tar czf $OUT/nb.tgz r04/nb)
# ---- call05 / call06 (one line each): the status draw, after-tree
# R=/tmp/r05; timeout 200 python3 -m numba_gemm.tools.shapes --heldout random --seed 20261353 --layout NN --reps 10 --jobs 16 --out $R/random-NN-20261353
# R=/tmp/r06; timeout 130 python3 -m numba_gemm.tools.shapes --heldout random --seed 20261353 --layout NT --reps 10 --jobs 16 --out $R/random-NT-20261353
