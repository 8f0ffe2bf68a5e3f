# Two entry points for a fresh clone: `make demo` and `make test`.
# Each sets up what it needs: a virtualenv in .venv and the pinned Helm binaries in .tools (`make
# test` also the pinned OCI registry and promtool that some tests run).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HELM4 := .tools/helm-4.1.4/helm
HELM3 := .tools/helm-3.17.2/helm
# Programs some tests run, from pinned Debian packages (scripts/install_debian_tools.py): the CNCF
# distribution registry the OCI tests push the chart to, and promtool for the alert rules.
REGISTRY := .tools/docker-registry-2.8.2/docker-registry
PROMTOOL := .tools/promtool-2.42.0/promtool
DEMO_VALUES := tutorials/assets/values-16-disagg-prefill.yaml
# `make demo` plans Llama-3.1-8B-Instruct on 8 x H100-80GB offline (from the catalog) into this file,
# for prompts of 16000 tokens and answers of 500: a workload where the estimates pick PD.
DEMO_OUT := build/demo-values.yaml
PY_DIRS := pdctl tests scripts $(wildcard benchmarks)
# Where `make package` writes the release artifacts (the tests point it at a temporary folder).
DIST ?= dist

export PDCTL_HELM ?= $(CURDIR)/$(HELM4)

.PHONY: help demo test test-fast test-lowest lint schema docs corpus golden setup helm package clean checkov

# `make help` lists the targets whose line carries a `## what it does` comment.
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)$$/  \1\t\2/' | expand -t 12

setup: $(VENV)/.installed helm ## install the virtualenv (.venv) and the pinned Helm 3 and 4 (.tools)

# pdctl/__init__.py holds the version: a bump reinstalls so the installed metadata follows it.
$(VENV)/.installed: pyproject.toml pdctl/__init__.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# The real NIXL for the preflight probe's loopback transfer test (tests/test_preflight_probe.py),
# for `make test` only: nixl-cu13 declares torch, several GB the probe never imports, hence
# --no-deps and its numpy.
$(VENV)/.nixl: $(VENV)/.installed
	$(BIN)/pip install --quiet --no-deps 'nixl==1.5.1' 'nixl-cu13==1.5.1'
	$(BIN)/pip install --quiet 'numpy>=1.26'
	touch $@

helm: $(HELM4) $(HELM3)

$(HELM4) $(HELM3): scripts/install_helm.py
	$(PYTHON) scripts/install_helm.py
	touch $(HELM4) $(HELM3)

# The local loop of `make demo`: the planned release as processes on this machine, the engines
# the pd-stack simulator (not vLLM; pdctl up), proven, measured and stopped. The trap stops the
# release however a step ends, so no process is left running.
DEMO_RELEASE := demo
DEMO_REPORT := build/demo-report
DEMO_BENCH := --concurrency 1,4 --requests 8 --input-len 2000 --output-len 64

demo: setup ## plan a Llama-3.1-8B layout, then run it here on the simulator: verify, bench, down
	$(BIN)/pdctl init --model meta-llama/Llama-3.1-8B-Instruct --gpus 8 --gpu-type H100-80GB \
		--input-len 16000 --output-len 500 --offline --out $(DEMO_OUT) --force
	$(BIN)/pdctl validate $(DEMO_OUT) --release pd
	$(BIN)/pdctl template -f $(DEMO_OUT) --release pd --summary
	@echo
	rm -rf $(DEMO_REPORT)
	@run() { echo "$$*"; "$$@"; }; up=; set -e; \
	trap '[ -z "$$up" ] || run $(BIN)/pdctl down --release $(DEMO_RELEASE)' EXIT; \
	run $(BIN)/pdctl up -f $(DEMO_OUT) --release $(DEMO_RELEASE) --engine sim; up=1; \
	run $(BIN)/pdctl verify --release $(DEMO_RELEASE); \
	run $(BIN)/pdctl bench --release $(DEMO_RELEASE) $(DEMO_BENCH) --report $(DEMO_REPORT)
	@echo
	@echo "The bench report (PNG plots, CSV, JSON): $(CURDIR)/$(DEMO_REPORT)/plot-ttft.png and beside it"
	@echo "Next: pdctl and the pinned helm are in this checkout, not on PATH. Run them as"
	@echo "  $(BIN)/pdctl --help"
	@echo "  $(HELM4) version"
	@echo "or put both on PATH for this shell:"
	@echo "  export PATH=\"$(CURDIR)/$(BIN):$(CURDIR)/$(dir $(HELM4)):\$$PATH\""
	@echo "On a machine with GPUs and vLLM, pdctl up -f $(DEMO_OUT) runs real vLLM engines instead."

lint: setup ## ruff, formatting, mypy and the import layers
	$(BIN)/ruff check $(PY_DIRS)
	$(BIN)/ruff format --check $(PY_DIRS)
	$(BIN)/mypy
	$(BIN)/lint-imports

schema: setup ## regenerate helm/values.schema.json from schemas/values.schema.yaml
	$(BIN)/python scripts/build_schema.py

# docs/production-stack.md (from helm/files/production-stack.yaml), helm/README.md, the values
# reference (from the schema and values.yaml), the Grafana dashboard
# helm/files/dashboards/pd-stack.json (scripts/build_dashboard.py), and the canary's script
# helm/files/canary/pd_canary.py (scripts/build_canary.py); a test checks all are current.
docs: setup ## regenerate the generated pages and the chart version lines
	$(BIN)/python scripts/build_docs.py

# Regenerate what the tests compare against: the defective-values corpus and the golden renders of
# the shipped values files (review the diff: a changed golden file is a changed install).
corpus: setup ## regenerate the defective-values corpus (review the diff)
	$(BIN)/python tests/corpus/make_bad_corpus.py

golden: setup ## regenerate the golden renders of the shipped values files and the golden outputs (review the diff)
	PDCTL_REGEN_GOLDEN=1 $(BIN)/python -m pytest tests/test_chart_versions.py -q -k golden
	PDCTL_REGEN_GOLDEN=1 $(BIN)/python -m pytest tests/test_person_output.py -q

$(REGISTRY) $(PROMTOOL): scripts/install_debian_tools.py
	$(PYTHON) scripts/install_debian_tools.py $(notdir $@)
	touch $@

# Three workers on two cores: the suite's helm runs and servers leave a worker's core idle part of
# the time, which a third fills (11.5 minutes with two, 9.7 with three on an idle 2-core machine);
# worksteal hands a finished worker the queued tests of a busy one.
TEST_WORKERS ?= 3

test: setup lint $(VENV)/.nixl $(REGISTRY) $(PROMTOOL) ## lint, then the whole test suite (what CI runs, with checkov)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal -q

# The unit tier (tests/tiers.py): the library and the CLI in-process, no helm, no server; what to
# run after a one-line change. `make test` runs every tier.
test-fast: setup ## the unit tier alone: no helm, no child process, no server (README "Tests")
	$(BIN)/python -m pytest -n 2 -q -m unit

# The lowest-versions lane: the unit tier on the lowest release of each dependency that
# pyproject.toml allows (uv's --resolution lowest-direct, from the package index; what those pull
# in at their newest), on the lowest Python found here of those pyproject.toml allows (3.10 where
# pyenv has it, else $(PYTHON)): a floor that does not work fails here. Its own virtualenv, made
# anew when pyproject.toml changes; uv comes from the package index into it. CI runs it after
# `make test checkov` (README "Tests" says how long it takes).
LOWEST_VENV := .venv-lowest
UV_VERSION := 0.13.9
LOWEST_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.10.*/bin/python3.10) $(PYTHON))

$(LOWEST_VENV)/.installed: pyproject.toml pdctl/__init__.py
	rm -rf $(LOWEST_VENV)
	$(LOWEST_PYTHON) -m venv $(LOWEST_VENV)
	$(LOWEST_VENV)/bin/pip install --quiet 'uv==$(UV_VERSION)'
	$(LOWEST_VENV)/bin/uv pip install --quiet --python $(LOWEST_VENV)/bin/python \
		--resolution lowest-direct -e '.[test]'
	touch $@

test-lowest: $(LOWEST_VENV)/.installed ## the unit tier on the lowest versions pyproject.toml allows
	$(LOWEST_VENV)/bin/python -m pytest -n 2 -q -m unit -p no:cacheprovider

# checkov (Kubernetes checks) over the chart rendered with every tutorial asset: at most 6 distinct
# failed checks, each listed with its reason in docs/production-checklist.md
# (scripts/checkov_assets.py). CI runs it after `make test`. checkov has its own virtualenv: it pulls
# about 100 packages (boto3, networkx, ...), some 290 MB and three minutes to install, too heavy for
# the `test` extra.
CHECKOV_VENV := .venv-checkov
CHECKOV_VERSION := 3.3.30

$(CHECKOV_VENV)/.installed: Makefile
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/pip install --quiet 'checkov==$(CHECKOV_VERSION)'
	touch $@

checkov: helm $(CHECKOV_VENV)/.installed ## checkov over the tutorial renders (CI runs it)
	$(PYTHON) scripts/checkov_assets.py --checkov $(CHECKOV_VENV)/bin/checkov --helm $(HELM4)

# Release artifacts for the version in pdctl/__init__.py (chart version and appVersion are the
# same, tests/test_versions.py): the chart archive $(DIST)/pd-stack-<version>.tgz, to push with
# `helm push $(DIST)/pd-stack-<version>.tgz oci://<registry>/<path>`, and pdctl's sdist and wheel
# (built from that sdist by `python -m build`; both carry the chart). Only the build backend
# (hatchling) comes from the package index, into build's isolated environment.
# The chart archive is reproducible (scripts/package_chart.py: file times set from the last commit
# that changed helm/). SIGN_KEY=<name or email> signs it (a .prov beside it) with that key from the
# legacy GnuPG secret keyring KEYRING (docs/chart.md, "Signed releases").
SIGN_KEY ?=
KEYRING ?= $(HOME)/.gnupg/secring.gpg

package: setup ## the chart archive, sdist and wheel into dist/ (or DIST=folder; SIGN_KEY= signs)
	rm -f $(DIST)/pd-stack-*.tgz $(DIST)/pd-stack-*.tgz.prov $(DIST)/pdctl-*.tar.gz $(DIST)/pdctl-*.whl
	$(HELM4) lint --strict helm/
	$(BIN)/python scripts/package_chart.py --helm $(HELM4) --dest $(DIST) \
		$(if $(SIGN_KEY),--sign '$(SIGN_KEY)' --keyring '$(KEYRING)')
	$(BIN)/python -m build --outdir $(DIST) .

clean: ## remove the virtualenvs, tools and build output
	rm -rf $(VENV) $(CHECKOV_VENV) $(LOWEST_VENV) .tools .pytest_cache .ruff_cache .hypothesis dist
