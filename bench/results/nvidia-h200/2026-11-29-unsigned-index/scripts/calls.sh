source .gpu/setup.sh
R=/tmp/r36; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
timeout 560 python3 .gpu/stage_probe.py run 1,2,3,4,5 $R/stage.jsonl > $R/stage.log 2>&1
echo "rc=$? $(( $(date +%s) - T0 )) s"; tail -3 $R/stage.log; wc -l $R/stage.jsonl
(cd /tmp && tar czf $OUT/r36.tgz r36)
source .gpu/setup.sh
ROOT=$PWD; R=/tmp/r38; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
pack() { (cd /tmp && tar czf $OUT/r38.tgz r38); }
ab() { (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $4 python3 $ROOT/.gpu/ab.py 1,2,3,4,5 $2 $R/ab.jsonl $3 >> $R/ab-$2.log 2>&1); echo "$2 rc=$? $(( $(date +%s) - T0 )) s"; grep compiled $R/ab-$2.log | tail -1; pack; }
ab $ROOT/.gpu/old old 1 110
ab $ROOT new 1 110
ab $ROOT/.gpu/old old 1 40
ab $ROOT new 1 40
source .gpu/setup.sh
ROOT=$PWD; R=/tmp/r40; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
pack() { (cd /tmp && tar czf $OUT/r40.tgz r40); }
ab() { (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $4 python3 $ROOT/.gpu/ab.py 20261343,20261344 $2 $R/ab.jsonl $3 >> $R/ab-$2.log 2>&1); echo "$2 rc=$? $(( $(date +%s) - T0 )) s"; grep compiled $R/ab-$2.log | tail -1; pack; }
ab $ROOT/.gpu/old old 1 75
ab $ROOT new 1 75
ab $ROOT/.gpu/old old 1 25
ab $ROOT new 1 25
status() {  # name secs args...
  local n=$1 s=$2; shift 2
  NUMBA_GEMM_CACHE_DIR=/tmp/kc-new timeout $s python3 -m numba_gemm.tools.shapes "$@" --reps 10 --jobs 16 --out $R/$n > /dev/null 2> $R/$n.log
  echo "$n rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$n/summary.txt 2>/dev/null; pack
}
Q=$(( 480 - ($(date +%s) - T0) )); echo "left $Q s"
status random-NT-20261343 $Q --heldout random --seed 20261343 --layout NT
source .gpu/setup.sh
R=/tmp/r41; rm -rf $R; mkdir -p $R
T0=$(date +%s)
status() {  # name secs args...
  local n=$1 s=$2; shift 2
  NUMBA_GEMM_CACHE_DIR=/tmp/kc-new timeout $s python3 -m numba_gemm.tools.shapes "$@" --reps 10 --jobs 16 --out $R/$n > /dev/null 2> $R/$n.log
  echo "$n rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$n/summary.txt 2>/dev/null; (cd /tmp && tar czf $OUT/r41.tgz r41)
}
status random-NN-20261343 250 --heldout random --seed 20261343 --layout NN
source .gpu/setup.sh
R=/tmp/r42; rm -rf $R; mkdir -p $R
T0=$(date +%s)
status() {  # name secs args...
  local n=$1 s=$2; shift 2
  NUMBA_GEMM_CACHE_DIR=/tmp/kc-new timeout $s python3 -m numba_gemm.tools.shapes "$@" --reps 10 --jobs 16 --out $R/$n > /dev/null 2> $R/$n.log
  echo "$n rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$n/summary.txt 2>/dev/null; (cd /tmp && tar czf $OUT/r42.tgz r42)
}
status random-NN-20261344 95 --heldout random --seed 20261344 --layout NN
Q=$(( 180 - ($(date +%s) - T0) ))
status random-NT-20261344 $Q --heldout random --seed 20261344 --layout NT
