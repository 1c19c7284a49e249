# make demo: a full review of corpus-fixtures/demo with the scripted judge (no key needed).
# make test: the whole suite. Both create or update .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO := $(or $(DEMO_DIR),/tmp/knomit-demo)
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first and pinned: the CPU wheel on this machine's disk; unpinned, pip would pull a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	bash benchmarks/demo.sh "$(DEMO)"

test: install
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) /tmp/knomit-demo
