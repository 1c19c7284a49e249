"""Ctrl-C and SIGTERM end a session within a second wherever it is, embedding included, keeping the vectors so far.

The real console script runs on a cold corpus of benchmarks/gen_corpus.py (600 facts, about a thousand texts
to embed: seconds of work on any machine); the signal goes once it is embedding, and the test measures how
long the process takes to end after it (issue 54: pressed 6 s into a dry run, Ctrl-C waited for the whole
embedding, then threw the vectors away).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import GIT_ENV, REPO, git

KNOMIT_JUDGE = Path(sys.executable).parent / "knomit-judge"
GEN = REPO / "benchmarks" / "gen_corpus.py"

# slow: a cold corpus embedded in subprocesses of the real CLI
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cold_built(tmp_path_factory) -> Path:
    """600 facts, initialised, committed and never embedded; gen_corpus's truth and scripted replies beside it."""
    root = tmp_path_factory.mktemp("cold") / "corpus"
    subprocess.run(
        [sys.executable, str(GEN), "600", "--seed", "5", "--out", str(root)],
        check=True,
        capture_output=True,
        env={**os.environ, **GIT_ENV},
    )
    subprocess.run(
        [str(KNOMIT_JUDGE), "-q", "init", str(root)], check=True, capture_output=True, env={**os.environ, **GIT_ENV}
    )
    return root


@pytest.fixture
def cold(cold_built, tmp_path) -> Path:
    root = tmp_path / "corpus"
    shutil.copytree(cold_built, root, symlinks=True)
    for sibling in ("corpus.truth.json", "corpus.replies.jsonl"):
        shutil.copy(cold_built.parent / sibling, tmp_path / sibling)
    return root


class Run:
    """The CLI as its own process, its stderr read as it comes."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [str(KNOMIT_JUDGE), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **GIT_ENV, **(env or {})},
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stderr.readline, "")))
        self.reader.start()

    def wait_for(self, text: str, count: int = 1, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while sum(text in line for line in self.lines) < count:
            assert self.proc.poll() is None, f"ended before {text!r}: {self.lines}"
            assert time.monotonic() < deadline, f"no {text!r} in {timeout} s: {self.lines}"
            time.sleep(0.01)

    def signal_and_time(self, sig: int) -> float:
        """Send sig; the seconds until the process has ended."""
        assert self.proc.poll() is None, f"ended before the signal: {self.lines}"
        self.proc.send_signal(sig)
        sent = time.monotonic()
        self.proc.wait(timeout=60)
        ended = time.monotonic() - sent
        self.reader.join(timeout=10)
        return ended

    @property
    def stderr(self) -> str:
        return "".join(self.lines)


def vectors(root: Path) -> int:
    conn = sqlite3.connect(f"file:{root / '.knomit' / 'judge.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    finally:
        conn.close()


def test_ctrl_c_ends_a_cold_dry_run_within_a_second_and_keeps_the_vectors_embedded_so_far(cold):
    judge = f"scripted:{cold.parent / 'corpus.replies.jsonl'}"
    head = git(cold, "rev-parse", "HEAD")
    run = Run("review", str(cold), "--dry-run", "--judge", judge)
    run.wait_for("loading embedding model")
    # into the embedding: a thousand texts take seconds
    time.sleep(1.0)
    ended = run.signal_and_time(signal.SIGINT)
    assert run.proc.returncode == 130, run.stderr
    assert ended < 1.0, f"{ended:.2f} s from Ctrl-C to exit"
    # a dry run says what it keeps: derived caches only, not "verdicts parsed so far"
    assert "verdicts parsed" not in run.stderr
    assert "interrupted; a dry run buys and commits nothing: only the derived caches" in run.stderr
    kept = vectors(cold)
    assert kept > 0, run.stderr
    assert f"dry run stopped: {kept} vector(s) embedded so far kept in the db" in run.stderr
    assert git(cold, "rev-parse", "HEAD") == head and git(cold, "status", "--porcelain") == ""

    # the next run embeds only what the first did not
    done = subprocess.run(
        [str(KNOMIT_JUDGE), "-q", "review", str(cold), "--dry-run", "--judge", judge, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    embedded = json.loads(done.stdout)["embedded"]
    assert 0 < embedded and kept + embedded == vectors(cold)


def test_sigterm_ends_a_cold_session_within_a_second_keeping_vectors_and_committing_its_journal(cold):
    truth = json.loads((cold.parent / "corpus.truth.json").read_text(encoding="utf-8"))
    run = Run("review", str(cold), "--judge", f"scripted:{cold.parent / 'corpus.replies.jsonl'}")
    # the exact duplicates are retracted first, one commit each; then the embedding starts
    run.wait_for("exact: retract", count=len(truth["exact_duplicates"]))
    time.sleep(1.0)
    ended = run.signal_and_time(signal.SIGTERM)
    assert run.proc.returncode == 130, run.stderr
    assert ended < 1.0, f"{ended:.2f} s from SIGTERM to exit"
    assert "interrupted; the verdicts parsed and the vectors embedded so far are kept" in run.stderr
    assert vectors(cold) > 0
    assert git(cold, "status", "--porcelain") == ""
    status = json.loads(
        subprocess.run(
            [str(KNOMIT_JUDGE), "status", str(cold), "--json"], capture_output=True, text=True, check=True
        ).stdout
    )
    passes = status["last_session"]["passes"]
    assert {passes[n]["state"] for n in ("alias", "prune", "discovery")} == {"aborted"}, passes


def test_the_daemons_sigterm_mid_embedding_ends_its_session_within_a_second_as_its_stop_does(cold):
    """The daemon's stop (nothing new offered, the judgment in flight finishes: tests/test_daemon.py) is seen in
    an embedding too: no judgment is in flight there, so the session ends at once, recorded as stopped."""
    truth = json.loads((cold.parent / "corpus.truth.json").read_text(encoding="utf-8"))
    run = Run(
        "daemon", str(cold), "--cron", "*/1 * * * * *", "--judge", f"scripted:{cold.parent / 'corpus.replies.jsonl'}"
    )
    run.wait_for("exact: retract", count=len(truth["exact_duplicates"]))
    time.sleep(1.0)
    ended = run.signal_and_time(signal.SIGTERM)
    assert run.proc.returncode == 0, run.stderr
    assert ended < 1.0, f"{ended:.2f} s from SIGTERM to exit"
    assert "daemon: stopped after 1 session(s)" in run.stderr and "Traceback" not in run.stderr
    assert vectors(cold) > 0
    assert git(cold, "status", "--porcelain") == ""
    status = json.loads(
        subprocess.run(
            [str(KNOMIT_JUDGE), "status", str(cold), "--json"], capture_output=True, text=True, check=True
        ).stdout
    )
    passes = status["last_session"]["passes"]
    assert status["last_session"]["ended_at"] and status["unfinished"] == 0
    assert {passes[n]["state"] for n in ("alias", "prune", "discovery")} == {"aborted"}, passes
    assert all("aborted: interrupted" in passes[n]["notes"] for n in ("alias", "prune", "discovery"))
