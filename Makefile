# numba_gemm developer tasks. `make setup` then `make test` works on a CPU-only machine
# (the tests run the kernels on the Numba CUDA simulator).
PYTHON ?= python3
# PyTorch for the numba_gemm.torch tests (an optional peer of the package): 2.13.0 is the CPU build
# a CI machine holds on disk; TORCH= (empty) skips it, those tests then skip
TORCH  ?= torch==2.13.0
VENV   ?= .venv
PY     := $(VENV)/bin/python
SIZES  ?= 128..4096
RESULTS_CSV ?=

.PHONY: setup test test-gpu lint resources bench bench-sim tune precompile results-table notebooks \
	clean

setup:  ## virtual environment with the package (editable) and the test/bench/lint extras
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,bench,lint]"
	$(if $(TORCH),$(PY) -m pip install -q "$(TORCH)")

test: lint  ## lint, then the whole suite on the CUDA simulator (CPU only)
	NUMBA_ENABLE_CUDASIM=1 $(PY) -m pytest -n auto --dist loadgroup -q

test-gpu:  ## the same suite on a real GPU
	$(PY) -m pytest -q

lint:  ## ruff: the lint rules and the formatting (run by `make test`, so CI runs it)
	$(PY) -m ruff check numba_gemm tests notebooks
	$(PY) -m ruff format --check numba_gemm tests notebooks

resources:  ## registers, spills, SMEM and occupancy per stage for sm_90, without a GPU
	$(PY) -m numba_gemm.tools.resources

bench:  ## every stage against cuBLAS on the GPU: table, CSV/JSON, plots under bench/results/
	$(PY) -m numba_gemm.bench --sizes $(SIZES)

bench-sim:  ## the bench pipeline on the simulator, about a minute on 2 cores (timings not comparable)
	$(PY) -m numba_gemm.bench --simulator --out $${TMPDIR:-/tmp}/numba_gemm-bench-sim

tune:  ## sweep tile configurations on this GPU and cache the winners
	$(PY) -m numba_gemm.tools.tune

precompile:  ## compile this GPU's tuned kernels into the on-disk cache, in parallel
	$(PY) -m numba_gemm.tools.precompile

results-table:  ## README's results tables (one per precision, FP32 end to end) from the newest run
	$(PY) -m numba_gemm.tools.results_table $(RESULTS_CSV)

notebooks:  ## .ipynb from the jupytext sources, executed in place (GPU if present, else simulator)
	$(PY) notebooks/execute.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
