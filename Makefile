# The two commands a person needs: `make demo` and `make test` (and `make test-fast` before every commit). Heavy things (the virtual environment, the
# Go-built control plane) live in a cache outside the clone, keyed by what they were built from.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

CACHE ?= $(or $(TJ_CACHE_DIR),$(HOME)/.cache/trainingjob)
export TJ_CACHE_DIR := $(CACHE)
UV_VERSION := 0.13.9
UV := $(CACHE)/tools/uv-$(UV_VERSION)/bin/uv
VENV := $(CACHE)/venv-$(shell sha256sum uv.lock | cut -c1-16)
PY := $(VENV)/bin/python
export PYTHONPATH := $(CURDIR)/operator:$(CURDIR)/api:$(CURDIR)/trainer-image:$(CURDIR)
export UV_PROJECT_ENVIRONMENT := $(VENV)
PYTEST_ARGS ?=

.PHONY: help demo demo-cluster demo-cluster-down venv controlplane kueue promtool pythons node node-packages node-binaries images setup lint fmt test test-fast crds locks \
	dist run-operator run-api bench bench-kubeflow dev-cluster dev-cluster-down clean-cache

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

demo: venv ## run the main job end to end: DDP on digits, a rank killed part-way, resumed from its checkpoint
	@echo "[demo] examples/digits-ddp.yaml on this machine (local mode): 2 DDP ranks; worker-1 is killed at step 250"
	bin/tjctl run examples/digits-ddp.yaml --kill worker-1@250 --workdir .tjctl/demo

$(UV):
	python3 -m venv $(CACHE)/tools/uv-$(UV_VERSION)
	$(CACHE)/tools/uv-$(UV_VERSION)/bin/pip install --quiet uv==$(UV_VERSION)

$(VENV)/.complete: uv.lock | $(UV)
	@echo "[venv] creating $(VENV) from uv.lock (torch is large: the first time takes a few minutes)"
	$(UV) sync --locked --all-extras --python 3.11 --compile-bytecode  # every run imports from .pyc: the operator does not compile the Kubernetes client at start (about 40 MiB of RSS)
	touch $@

venv: $(VENV)/.complete ## create or reuse the virtual environment

controlplane: ## build or reuse etcd, kube-apiserver, controller-manager, scheduler, kwok and helm
	@bash scripts/build-controlplane.sh >/dev/null

kueue: ## build or reuse Kueue's manager and its CRDs (the cluster tier's Kueue tests run it)
	@bash scripts/build-kueue.sh >/dev/null

promtool: ## build or reuse promtool (the alert rules' checker and unit-test runner)
	@bash scripts/build-promtool.sh >/dev/null

pythons: ## build or find CPython 3.12 and 3.13 (the package tests install the wheel on 3.11-3.13)
	@bash scripts/build-pythons.sh >/dev/null

node: node-binaries images ## install the node tier's Debian packages (root), build kubelet/kube-proxy/CoreDNS and our images

node-packages:
	bash scripts/install-node-packages.sh

# kubelet and kube-proxy come from the same Kubernetes module as the control plane: built after it, they reuse the
# packages it compiled (Go's build cache) instead of compiling them a second time beside it. The images need no Go.
node-binaries: controlplane node-packages
	@bash scripts/build-node.sh >/dev/null

images: node-packages
	@bash scripts/build-images.sh >/dev/null

lint: venv ## ruff, mypy --strict, import-linter, hadolint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $$(git ls-files --cached --others --exclude-standard '*.py')
	$(VENV)/bin/lint-imports
	dockerfiles=$$(git ls-files --cached --others --exclude-standard '*Dockerfile'); \
	  if [ -n "$$dockerfiles" ]; then $(VENV)/bin/hadolint $$dockerfiles; fi

fmt: venv ## format and auto-fix
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The builds are independent of each other (each in its own cache folder): side by side they take about half the
# time on 2 cores, since each spends much of it downloading, configuring or linking on one core.
SETUP_JOBS ?= 6
# The tests run on two workers (pytest-xdist): much of their time is spent waiting on apiservers, kubelets and
# trainers. A test module stays on one worker, the node tier too (tests/conftest.py's TierScheduling).
# TEST_WORKERS=0 runs them in this process (for -s, or pdb).
TEST_WORKERS ?= 2

setup: ## build or reuse everything make test needs (venv, control plane, promtool, pythons, node tier), side by side
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) --output-sync=target venv controlplane kueue promtool pythons node

test: ## set everything up (make setup) and lint side by side, then run every test (node tier included)
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) --output-sync=target venv controlplane kueue promtool pythons node lint
	TJ_CONTROLPLANE_BIN=$$(bash scripts/build-controlplane.sh 2>/dev/null) \
	  TJ_KUEUE_BIN=$$(bash scripts/build-kueue.sh 2>/dev/null) \
	  TJ_NODE_BIN=$$(bash scripts/build-node.sh 2>/dev/null) \
	  TJ_PROMTOOL=$$(bash scripts/build-promtool.sh 2>/dev/null) \
	  TJ_PYTHONS=$$(bash scripts/build-pythons.sh 2>/dev/null | paste -sd: -) \
	  TJ_UV=$(UV) \
	  $(VENV)/bin/pytest -n $(TEST_WORKERS) --durations=10 $(PYTEST_ARGS)

# The model-based tests run here with 100 random sequences each (make test runs their full count).
test-fast: venv ## before every commit: ruff and the fast tier (no control plane, node or promtool), in under 3 minutes
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	TJ_MODEL_EXAMPLES=$${TJ_MODEL_EXAMPLES:-100} $(VENV)/bin/pytest -n $(TEST_WORKERS) -m "fast or model" $(PYTEST_ARGS)

dist: $(UV) ## build the wheel and the sdist into dist/ (then: pip install dist/trainingjob-<version>-py3-none-any.whl)
	rm -rf dist
	$(UV) build --out-dir dist

run-operator: venv ## run the operator in the foreground against the dev cluster (.dev/kubeconfig), CRDs applied first
	@test -f .dev/kubeconfig || { echo "no .dev/kubeconfig: run 'make dev-cluster' first"; exit 1; }
	kubectl --kubeconfig .dev/kubeconfig apply --server-side -f crds/
	KUBECONFIG=$(CURDIR)/.dev/kubeconfig TJ_OPERATOR_METRICS_PORT=$${TJ_OPERATOR_METRICS_PORT:-8080} $(PY) -m trainingjob

run-api: venv ## run the REST API in the foreground against the dev cluster (.dev/kubeconfig), on http://127.0.0.1:8000
	@test -f .dev/kubeconfig || { echo "no .dev/kubeconfig: run 'make dev-cluster' first"; exit 1; }
	kubectl --kubeconfig .dev/kubeconfig apply --server-side -f crds/
	@# A caller for the dev cluster only: a ServiceAccount with cluster-admin, whose tokens the API accepts.
	kubectl --kubeconfig .dev/kubeconfig create serviceaccount tj-dev --dry-run=client -o yaml | \
	  kubectl --kubeconfig .dev/kubeconfig apply -f -
	kubectl --kubeconfig .dev/kubeconfig create clusterrolebinding tj-dev --clusterrole=cluster-admin \
	  --serviceaccount=default:tj-dev --dry-run=client -o yaml | kubectl --kubeconfig .dev/kubeconfig apply -f -
	@echo "[run-api] http://127.0.0.1:$${TJ_API_PORT:-8000} (docs at /docs, dashboard at /ui/). From another shell:"
	@echo "  TOKEN=\$$(kubectl --kubeconfig .dev/kubeconfig create token tj-dev --audience trainingjob-api)"
	@echo "  curl -H \"Authorization: Bearer \$$TOKEN\" http://127.0.0.1:$${TJ_API_PORT:-8000}/api/v1/namespaces/default/trainingjobs"
	@echo "  bin/tjctl --server http://127.0.0.1:$${TJ_API_PORT:-8000} --token \"\$$TOKEN\" list"
	TJ_API_KUBECONFIG=$(CURDIR)/.dev/kubeconfig TJ_API_PORT=$${TJ_API_PORT:-8000} $(PY) -m trainingjob_api

bench: venv controlplane node ## run the benchmarks (each prints ratios against a baseline measured in the same run; the Kubeflow comparison is bench-kubeflow)
	for bench in $$(ls bench/bench_*.py | grep -v bench_kubeflow); do \
	  echo "== $$bench"; TJ_CONTROLPLANE_BIN=$$(bash scripts/build-controlplane.sh 2>/dev/null) \
	    TJ_NODE_BIN=$$(bash scripts/build-node.sh 2>/dev/null) $(PY) $$bench; done

bench-kubeflow: venv controlplane ## our operator against Kubeflow's PyTorchJob operator on the cluster tier; rewrites docs/performance.md
	bash scripts/build-kubeflow.sh >/dev/null
	TJ_CONTROLPLANE_BIN=$$(bash scripts/build-controlplane.sh 2>/dev/null) \
	  $(PY) bench/bench_kubeflow.py --write-doc $${BENCH_KUBEFLOW_ARGS:-}

demo-cluster: venv controlplane node ## a real node with the chart installed: digits DDP, a rank killed, resumed; the cluster stays up
	TJ_CONTROLPLANE_BIN=$$(bash scripts/build-controlplane.sh 2>/dev/null) \
	  TJ_NODE_BIN=$$(bash scripts/build-node.sh 2>/dev/null) \
	  $(PY) -m testbed.demo_cluster up --dir .demo-cluster

demo-cluster-down: venv ## take the demo cluster down and put the machine back as it was
	$(PY) -m testbed.demo_cluster down --dir .demo-cluster

dev-cluster: venv controlplane ## start the cluster tier for people: .dev/kubeconfig, .dev/bin
	TJ_CONTROLPLANE_BIN=$$(bash scripts/build-controlplane.sh 2>/dev/null) \
	  $(PY) -m testbed.devcluster up --dir .dev

dev-cluster-down: venv ## stop the dev cluster
	$(PY) -m testbed.devcluster down --dir .dev

clean-cache: ## remove the cached virtual environments, control planes, node binaries and images
	rm -rf $(CACHE)

crds: venv ## regenerate crds/ (and the chart's copy) and the chart's operator settings from the pydantic models
	$(PY) -m trainingjob.generate.crd --out crds
	cp crds/*.yaml charts/trainingjob-operator/crds/
	$(PY) -m trainingjob.generate.chart_settings

locks: venv ## regenerate the images' hash-locked requirements (trainer-image/, operator/, api/) from uv.lock
	$(PY) -m testbed.image_locks --uv $(UV)
