# Two commands a new user needs: `make demo` and `make test`; both install first.
PY := .venv/bin/python
SPEC ?= experiments/specs/priority-demo.yaml

.PHONY: install demo test test-fast bench clean
install:
	@bash scripts/install.sh

demo: install
	$(PY) -m experiments.cli run $(SPEC)

# Full CI suite: unit tests plus real-emulation tests (root), no long experiments.
test: install
	$(PY) -m pytest -m "not slow" tests

# Unit tests only: no root, no OVS.
test-fast: install
	$(PY) -m pytest -m "not root and not slow" tests

bench: install
	$(PY) -m experiments.bench

clean:
	$(PY) -m experiments.cli clean

# GPU co-location validation (CUDA machine; its own torch + PyG, no install step):
# estimator grid at real dataset sizes, CoGNN Table V, GNNSched tables, into GPU_OUT.
# Run it again to resume: parts measured already in GPU_OUT are kept.
# GPU_ARGS trims it to a device-time budget, e.g. GPU_ARGS="--repeats 1 --queues gcn mix".
GPU_PY ?= python3
GPU_ARGS ?=
GPU_OUT ?= results/colocate-gpu
.PHONY: colocate-gpu
colocate-gpu:
	$(GPU_PY) -m experiments.colocation.gpu_validation --device cuda --out $(GPU_OUT) $(GPU_ARGS)
