# grouped NT with the new rule: GPU tests of the grouped kernels, the bench (NT) at 128 and 512 tokens
source .gpu/setup.sh
R=/tmp/r04; rm -rf $R; mkdir -p $R
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/gpu.txt
pack() { (cd /tmp && tar czf $OUT/r04.tgz r04); }
bench() { timeout $3 python3 -m numba_gemm.tools.grouped --layout NT --layers $1 --mean $2 --jobs 16 --out $R/$4 > $R/$4.log 2>&1; echo "$4 rc=$? $(( $(date +%s) - T0 )) s"; pack; }
bench mixtral-up:8,deepseek-moe-expert:8,deepseek-moe-expert:64 128,512 200 grouped-nt
bench olmoe-expert:64,qwen3-moe-expert:128 128,512 130 heldout-nt
bench dbrx-up:16 128 60 heldout-nt-dbrx
Q=$(( 585 - ($(date +%s) - T0) )); echo "left $Q s"
timeout $Q python3 -m pytest -q -p no:cacheprovider tests/test_grouped.py > $R/grouped-tests.txt 2>&1; echo "tests rc=$? $(( $(date +%s) - T0 )) s"; tail -2 $R/grouped-tests.txt; pack
