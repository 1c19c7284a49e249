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

test: install
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) /tmp/knomit-demo
