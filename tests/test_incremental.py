"""Incremental by construction: an unchanged corpus costs nothing; an edit re-asks only what it changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import FAST, REPO, SMALL, fact_text, make_repo, scripted, write_config

from knomit_judge import ReviewOptions, load_config, load_corpus, review
from knomit_judge.embeddings import Embedder
from knomit_judge.file_index import FileIndex
from knomit_judge.passes.base import Inputs
from knomit_judge.passes.registry import all_passes
from knomit_judge.store import Store

# SMALL plus facts on other mechanisms, so that with k = 2 most questions do not involve any one fact.
FACTS = {
    **SMALL,
    "facts/eco/f5.md": fact_text(
        "Subsidised fishing fleets deplete the stock that pays for them",
        ["subsidy-erodes-base"],
        0.6,
        ["s5"],
        "Cheap fuel keeps boats out after the catch per trip has collapsed.",
    ),
    "facts/eco/f6.md": fact_text(
        "Grants that reward output drain the soil the farm depends on",
        ["subsidy-erodes-base"],
        0.5,
        ["s6"],
        "Yield bonuses push continuous cropping until fertility falls.",
    ),
    "facts/sw/f7.md": fact_text(
        "Flaky tests teach engineers to ignore red builds",
        ["alarm-fatigue"],
        0.7,
        ["s7"],
        "After enough false failures a real one is retried, not read.",
    ),
    "facts/sw/f8.md": fact_text(
        "Pager storms make on-call staff silence real alerts",
        ["alarm-fatigue"],
        0.6,
        ["s8"],
        "Hundreds of pages a night train people to acknowledge without looking.",
    ),
    "facts/hr/f9.md": fact_text(
        "Hiring for culture fit narrows the pool of ideas",
        ["homophily-narrows"],
        0.4,
        ["s9"],
        "Interviewers favour people like themselves, and teams converge.",
    ),
    "facts/hr/f10.md": fact_text(
        "Stack ranking makes colleagues hoard information",
        ["competition-blocks-sharing"],
        0.5,
        ["s10"],
        "When a peer's gain is your loss, nobody documents their tricks.",
    ),
}
CONFIG = (
    FAST
    + """
[shortlist]
k = 2

[budget]
enabled = false
"""
)
EDITED = "facts/sw/f7.md"

# A session in a process where loading the model is impossible: torch and sentence-transformers cannot be imported.
NO_MODEL = """
import json, sys
sys.modules["torch"] = None
sys.modules["sentence_transformers"] = None
from knomit_judge import ReviewOptions, review
from knomit_judge.encoders import load_model
result = review(sys.argv[1], ReviewOptions(judge=sys.argv[2]))
try:
    load_model()
    blocked = False
except ImportError:
    blocked = True
print(json.dumps({**result.json(), "model_blocked": blocked}))
"""


@pytest.fixture
def repo(tmp_path):
    repo = make_repo(tmp_path / "corpus", FACTS)
    write_config(repo, CONFIG)
    return repo


def shortlisted(root) -> dict[tuple[str, str], dict]:
    """Every question the passes shortlist now, keyed by (pass, fingerprint), computed apart from any session."""
    store = Store.read_only(root)
    ctx = Inputs(corpus=load_corpus(root), embedder=Embedder(store), config=load_config(root))
    try:
        return {(p.name, c.fingerprint): c.subject for p in all_passes().values() for c in p.candidates(ctx)}
    finally:
        store.close()


def asked(root, session: str) -> set[tuple[str, str]]:
    """The questions a session judged: its verdicts, by (pass, fingerprint)."""
    store = Store.for_corpus(root)
    try:
        return {
            (v.pass_name, v.fingerprint) for v in store.verdicts() if v.session == session and v.pass_name != "exact"
        }
    finally:
        store.close()


def calls(result) -> int:
    return sum(r.judge_calls for r in result.passes.values())


def test_an_unchanged_corpus_embeds_nothing_calls_nothing_and_loads_no_model(repo, tmp_path):
    # no recorded replies: every question gets its pass's default
    judge = scripted(tmp_path)
    first = review(repo.root, ReviewOptions(judge=judge))
    assert first.embedded > 0 and first.parsed == len(FACTS) and calls(first) > 0

    second = review(repo.root, ReviewOptions(judge=judge))
    assert second.json()["embedded"] == 0 and second.json()["parsed"] == 0
    assert calls(second) == 0
    assert second.passes["alias"].state == second.passes["prune"].state == "caught-up"

    # The same in a process that cannot load the model: nothing in the session needed it.
    proc = subprocess.run(
        [sys.executable, "-c", NO_MODEL, str(repo.root), judge],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # the block is real: loading the model there fails
    assert out["model_blocked"]
    assert out["embedded"] == 0 and out["parsed"] == 0
    assert all(p["judge_calls"] == 0 and p["offered"] == 0 for p in out["passes"].values())


def test_after_an_edit_the_questions_asked_are_exactly_those_whose_fingerprint_changed(repo, tmp_path):
    judge = scripted(tmp_path)
    first = review(repo.root, ReviewOptions(judge=judge))
    before = shortlisted(repo.root)
    # budget off: the first session asks everything
    assert asked(repo.root, first.session) == set(before)

    repo.write(
        EDITED,
        fact_text(
            "Flaky tests teach engineers to ignore red builds",
            ["alarm-fatigue"],
            0.7,
            ["s7"],
            "After enough false failures a real one is retried, not read, for months.",
        ),
    )
    repo.commit("edit one fact")
    after = shortlisted(repo.root)
    changed = set(after) - set(before)
    # the edit re-opened some questions, not all
    assert changed and len(changed) < len(after)

    second = review(repo.root, ReviewOptions(judge=judge))
    assert asked(repo.root, second.session) == changed
    # every re-opened question is about the edited fact, or a motif it carries
    for pass_name, fp in changed:
        subject = after[(pass_name, fp)]
        assert (
            EDITED in subject.get("group", [])
            or EDITED in (subject.get("a"), subject.get("b"))
            or "alarm-fatigue" in (subject.get("a"), subject.get("b"))
        ), subject
    # at most both orders of each, fewer when a prompt is unchanged
    assert calls(second) <= 2 * len(changed)
    # the edited fact's text and its one new sentence (the title is unchanged), which alias's gloss of
    # 'alarm-fatigue' reads (nominate.sentences); the other files are not parsed
    assert second.embedded == 2 and second.parsed == 1


def load_indexed(root):
    """Load the corpus through its file index, as a session does, and save the index."""
    store = Store.for_corpus(root)
    try:
        index = FileIndex(store)
        corpus = load_corpus(root, index=index)
        index.save()
        return corpus, index
    finally:
        store.close()


def test_the_file_index_skips_parsing_unchanged_files_and_verifies_content(repo, tmp_path):
    review(repo.root, ReviewOptions(judge=scripted(tmp_path)))

    load = lambda: load_indexed(repo.root)  # noqa: E731

    corpus, index = load()
    assert (index.reused, index.parsed) == (len(FACTS), 0)

    # Same size, same mtime, different bytes: the content id check still sees the edit.
    path = repo.root / EDITED
    st = path.stat()
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("Flaky", "Flakey").replace("red builds", "red build"), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    corpus, index = load()
    assert (index.reused, index.parsed) == (len(FACTS) - 1, 1)
    assert corpus.facts[EDITED].title == "Flakey tests teach engineers to ignore red build"

    # A touched file with the same bytes is parsed once more, then reused again.
    os.utime(repo.root / "facts/ops/f1.md")
    assert load()[1].parsed == 1
    assert load()[1].parsed == 0


def test_a_parse_cached_by_an_older_reader_is_made_again(repo, tmp_path, monkeypatch):
    """A record the index kept before the reader learnt a field (aliases) would read back without it."""
    review(repo.root, ReviewOptions(judge=scripted(tmp_path)))
    assert load_indexed(repo.root)[1].parsed == 0
    # the version before aliases were read
    monkeypatch.setattr("knomit_judge.corpus.PARSE_VERSION", 1)
    assert load_indexed(repo.root)[1].parsed == len(FACTS)
    assert load_indexed(repo.root)[1].parsed == 0


def test_a_caught_up_load_reads_no_fact_file_once_verified(repo, tmp_path, monkeypatch):
    review(repo.root, ReviewOptions(judge=scripted(tmp_path)))
    # the files were written just now; no clock tick to wait for
    monkeypatch.setattr(FileIndex, "RACY_NS", 0)

    load = lambda: load_indexed(repo.root)  # noqa: E731

    # files parsed by the session are verified by reading once
    first = load()[1]
    assert (first.reused, first.read, first.parsed) == (len(FACTS), len(FACTS), 0)
    corpus, second = load()
    # stat alone answered every file
    assert (second.reused, second.read, second.parsed) == (len(FACTS), 0, 0)
    assert corpus.facts[EDITED].title == "Flaky tests teach engineers to ignore red builds"

    # An edit that keeps size and mtime still changes ctime: the file is read (and parsed) again.
    path = repo.root / EDITED
    st = path.stat()
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("Flaky", "Flakey").replace("red builds", "red build"), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    corpus, third = load()
    assert (third.read, third.parsed) == (0, 1)
    assert corpus.facts[EDITED].title == "Flakey tests teach engineers to ignore red build"
