source .gpu/setup.sh
ROOT=$PWD; R=/tmp/r31; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
pack() { (cd /tmp && tar czf $OUT/r31.tgz r31); }
host() { (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=$ROOT/.gpu/kc-$2 timeout $3 python3 $ROOT/.gpu/host.py $2 >> $R/host.jsonl 2> $R/host-$2.log); echo "$2 rc=$? $(( $(date +%s) - T0 )) s"; pack; }
host $ROOT/.gpu/old old 40
host $ROOT new 40
host $ROOT/.gpu/old old 25
host $ROOT new 25
python3 -c "
import json
for l in open('$R/host.jsonl'):
    r=json.loads(l); print(r['tree'], r['impl'], r['size'], round(r['us_per_call'],2))"
race() {  # tree name layout shapes seconds tag
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $5 python3 -m numba_gemm.tools.shapes --shapes $4 --layout $3 --reps 10 --jobs 16 --out $R/$2-$3-$6 > /dev/null 2> $R/$2-$3-$6.log)
  echo "$2 $3 $6 rc=$? $(( $(date +%s) - T0 )) s"; tail -1 $R/$2-$3-$6/summary.txt 2>/dev/null; pack
}
NT=164x73x1353,132x524x4863,249x452x2488,108x71x2421,109x548x7953,76x1510x12350,79x82x12215,269x961x10051,6941x124x1676,233x65x3934,428x85x17630,153x100x1708,88x924x10108,128x3584x18944,128x8192x3584,128x3584x14336,128x9216x3072,128x16384x3072,128x3072x8192,128x4544x18176,128x2048x8192,320x2048x5632,320x2048x1536,320x1536x1536,320x1536x8960,320x2304x2304,320x2304x5760,200x7680x2560,200x2560x2048,200x2048x16384,1000x2048x16384,200x2048x5632
Q=$(( 580 - ($(date +%s) - T0) )); echo "left $Q s"
race $ROOT/.gpu/old2 before NT $NT $(( Q / 2 )) pin2
Q=$(( 585 - ($(date +%s) - T0) ))
race $ROOT after NT $NT $Q pin2
