# Two entry points for a fresh clone: `make demo` and `make test`.
# Each sets up what it needs: a virtualenv in .venv and the pinned Helm binaries in .tools.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HELM4 := .tools/helm-4.1.4/helm
HELM3 := .tools/helm-3.17.2/helm
DEMO_VALUES := tutorials/assets/values-16-disagg-prefill.yaml
PY_DIRS := pdctl tests scripts $(wildcard benchmarks)

export PDCTL_HELM ?= $(CURDIR)/$(HELM4)

.PHONY: demo test lint schema setup helm clean

setup: $(VENV)/.installed helm

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

helm: $(HELM4) $(HELM3)

$(HELM4) $(HELM3): scripts/install_helm.py
	$(PYTHON) scripts/install_helm.py
	touch $(HELM4) $(HELM3)

demo: setup
	$(BIN)/pdctl validate $(DEMO_VALUES) --release pd
	$(BIN)/pdctl template -f $(DEMO_VALUES) --release pd --summary

lint: setup
	$(BIN)/ruff check $(PY_DIRS)
	$(BIN)/ruff format --check $(PY_DIRS)

schema: setup
	$(BIN)/python scripts/build_schema.py

test: setup lint
	$(BIN)/python -m pytest -n 2 -q

clean:
	rm -rf $(VENV) .tools .pytest_cache .ruff_cache .hypothesis
