# make demo: a full review of corpus-fixtures/demo with the scripted judge (no key needed).
# make test: the type and lint gates, then the whole suite. make test-fast: the gates and the tests not marked slow.
# Both create or update .venv first and install nothing outside the clone and .venv; the tests write nothing
# outside the clone either: their temporary corpora go to .pytest-tmp/ (tests/conftest.py), gone after a run that passes.
# make docs: rewrite the generated parts of docs/ (every --help, every config key and default) from the code.
# make test-browser: the report's browser tests in a headless Chromium (which you install yourself; see the README).
# CI (.ci/run) installs Chromium with apt, then runs make test with KNOMIT_REQUIRE_BROWSER=1: a browser test that skips fails.
# make dist: the sdist and the wheel in dist/, what `pipx install` or `uv tool install` takes (README).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Scratch corpora inside the clone (git-ignored), so the demo writes nothing outside it.
DEMO := $(or $(DEMO_DIR),$(CURDIR)/.demo/knomit-demo)
CALIBRATION := $(or $(CALIBRATION_DIR),$(CURDIR)/.demo/knomit-calibration)
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo lint test test-fast docs test-browser dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first and pinned: the CPU wheel on this machine's disk; unpinned, pip would pull a multi-GB CUDA build.
# The torch extra: the tests compare the PyTorch backend, and the int8 model is exported from the weights.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,torch]'
	touch $@

# The int8 embedding model the wheel ships (git-ignored), exported once from the weights as a session would.
MODEL := knomit_judge/data/model/model-int8.onnx
$(MODEL): $(VENV)/.installed
	$(BIN)/python -c "from pathlib import Path; from knomit_judge.encoders import ship; ship(Path('$(@D)'))"

# Only .venv: no system package. The report's browser tests skip without Chromium (see test-browser).
install: $(VENV)/.installed $(MODEL)

# A scratch copy of the demo corpus, reviewed twice with the scripted judge: the first run merges,
# the second is caught-up with 0 judge calls; then git log shows the decisions and their trailers.
demo: install
	rm -rf "$(DEMO)" && mkdir -p "$(DEMO)"
	cp -r corpus-fixtures/demo/facts corpus-fixtures/demo/knomit-judge.toml "$(DEMO)/"
	git -C "$(DEMO)" init -q -b main
	$(BIN)/knomit-judge -q init "$(DEMO)"
	git -C "$(DEMO)" add facts knomit-judge.toml
	git -C "$(DEMO)" -c user.name=demo -c user.email=demo@localhost commit -q -m "demo corpus"
	@echo "== first review"
	$(BIN)/knomit-judge review "$(DEMO)" --judge scripted:$(CURDIR)/corpus-fixtures/demo/judge-replies.jsonl
	@echo "== second review (nothing changed: caught-up, 0 judge calls)"
	$(BIN)/knomit-judge review "$(DEMO)" --judge scripted:$(CURDIR)/corpus-fixtures/demo/judge-replies.jsonl
	@echo "== git log --grep 'Knomit-Pass:' (the audit trail)"
	git -C "$(DEMO)" log --grep='Knomit-Pass:' --format='%h %s%n%(trailers:only,unfold)'
	@echo "== calibrate: the scripted judge against the human labels of corpus-fixtures/calibration"
	rm -rf "$(CALIBRATION)" && mkdir -p "$(CALIBRATION)"
	cp -r corpus-fixtures/calibration/facts "$(CALIBRATION)/"
	git -C "$(CALIBRATION)" init -q -b main
	$(BIN)/knomit-judge -q init "$(CALIBRATION)"
	git -C "$(CALIBRATION)" add facts
	git -C "$(CALIBRATION)" -c user.name=demo -c user.email=demo@localhost commit -q -m "calibration corpus"
	$(BIN)/knomit-judge calibrate corpus-fixtures/calibration/labels.jsonl "$(CALIBRATION)" \
		--judge scripted:$(CURDIR)/corpus-fixtures/calibration/judge-replies.jsonl
	@echo "== report: one self-contained HTML page of the demo's sessions, throttle and decisions"
	$(BIN)/knomit-judge report "$(DEMO)" --html "$(DEMO)-report.html"
	@echo "== report of the calibration corpus: a calibration is kept in the db of the corpus it ran on"
	$(BIN)/knomit-judge report "$(CALIBRATION)" --html "$(CALIBRATION)-report.html"

# mypy (every function annotated: pyproject's [tool.mypy]) and ruff ([tool.ruff]) on the package and the tests;
# `ruff format --check` fails on a file the formatter would change (run `.venv/bin/ruff format knomit_judge tests`).
lint: install
	$(BIN)/mypy
	$(BIN)/ruff check knomit_judge tests
	$(BIN)/ruff format --check knomit_judge tests

# Two pytest-xdist workers, each given whole files (--dist loadfile), so a module's fixtures are built by one
# worker, and the template corpora once per worker. On this 2-core machine, shared with other jobs: eight
# session-heavy files back to back took 65.6 s serial and 53.0 s with -n 2; the fast tier 257 s and 143 s.
# pytest's exit 5 (no test ran) still fails the target.
PARALLEL := -n 2 --dist loadfile

test: lint
	$(BIN)/python -m pytest -q $(PARALLEL)

test-fast: lint
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not slow and not browser"

# docs/cli.md's --help blocks and docs/configuration.md's key tables, from the code (tests/test_docs.py checks them).
docs: install
	$(BIN)/python -m knomit_judge.docgen

# The report rendered by a real headless Chromium; fails (rather than skips) when there is none.
test-browser: install
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
		{ echo "test-browser needs chromium on PATH (Debian/Ubuntu: sudo apt-get install chromium)" >&2; exit 2; }
	KNOMIT_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -q -m browser

# Built offline with .venv's setuptools (the PEP 517 hooks pip would call), from the work tree as it is.
dist: install
	rm -rf dist build
	$(BIN)/python -c "from setuptools import build_meta as b; b.build_sdist('dist'); b.build_wheel('dist')" >/dev/null
	rm -rf build
	@ls dist/*

clean:
	rm -rf $(VENV) "$(DEMO)" "$(DEMO)-report.html" "$(CALIBRATION)" "$(CALIBRATION)-report.html" dist build .pytest-tmp
