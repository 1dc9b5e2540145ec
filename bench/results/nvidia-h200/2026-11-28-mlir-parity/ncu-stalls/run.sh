# stall reasons: vectorize (vector, scalar) and gmem_coalesce at 4096^3, both compilers
source .gpu/setup.sh > $OUT/gpu.txt
W=/tmp/numba_cuda_mlir-0.6.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
cat /tmp/mw/part00 /tmp/mw/part01 .mlirC/part02 > $W
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/mlirsite $W >> $OUT/gpu.txt 2>&1
export CUDA_HOME=/usr/local/cuda PYTHONPATH=/tmp/site:/tmp/mlirsite:$PWD
mkdir -p $OUT/ncu
run() { # backend stage variant
  NUMBA_GEMM_BACKEND=$1 timeout 100 ncu --clock-control none --launch-skip 1 --launch-count 1 -k regex:sgemm \
    --section WarpStateStats --section SchedulerStats --section InstructionStats --section LaunchStats --section Occupancy --section SpeedOfLight \
    --csv --page raw python3 .gpu/one.py $2 $3 > $OUT/ncu/$1-$2-$3.csv 2> $OUT/ncu/$1-$2-$3.err
  echo "ncu $1 $2 $3 rc=$?" >> $OUT/gpu.txt
}
for be in numba-cuda numba-cuda-mlir; do
  run $be vectorize vector; run $be vectorize scalar; run $be gmem_coalesce -
done
cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu
