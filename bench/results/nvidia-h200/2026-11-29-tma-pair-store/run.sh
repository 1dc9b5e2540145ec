source .gpu/setup.sh
R=/tmp/r4; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
ep() {  # tree tag secs
  (cd $1 && PYTHONPATH=/tmp/site:$1 NUMBA_GEMM_CACHE_DIR=/tmp/kc-$2 timeout $3 python3 -m numba_gemm.tools.epilogues --out $R/$2 --jobs 16 --no-overhead --compute tf32 --tokens 4096,512 > $R/$2.txt 2> $R/$2.log)
  echo "$2 rc=$? $(( $(date +%s) - T0 )) s"; (cd /tmp && tar czf $OUT/r4.tgz r4)
}
ep $PWD/.gpu/old before 230
ep $PWD after 230
for t in before after; do echo "== $t"; python3 -c "
import json,sys
for l in open('$R/$t/epilogues.jsonl'):
    r=json.loads(l)
    if r.get('table')=='linear': print(r['model'], r['M'], r['stage'], r['fused'], 'kernel %.4f ms e2e %.4f torch %.4f x%.2f' % (r['ours_kernel_ms'], r['ours_e2e_ms'], r['torch_e2e_ms'], r['speedup']))
"; done
