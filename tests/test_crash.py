"""Crash trials: review sessions SIGKILLed at 20 random instants (fixed seed); nothing lost or half-applied after any restart.

With a shared remote, a session killed at every step of its sync, and the next one recovering.

The machinery (and the 200-trial version) is benchmarks/crash_trials.py; see its docstring for
what each trial does and checks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from crash_trials import SYNC_STEPS, check, run_trials, sync_kills  # noqa: E402

# slow: SIGKILL trials: sessions killed at 20 instants and at every step of a sync, each one restarted
pytestmark = pytest.mark.slow


def test_sigkill_at_20_instants_leaves_corpus_journal_and_db_consistent(tmp_path):
    lines: list[str] = []
    report = run_trials(tmp_path / "trials", trials=20, seed=7, small=True, delay_s=0.2, log=lines.append)
    assert report.inconsistencies == [], "\n".join(lines + report.inconsistencies)
    assert report.trials == 20
    # The kills landed where it matters: half-way through applying a decision (an intent, written
    # or staged files left behind) and while verdicts were being bought.
    assert report.interrupted["apply"] >= 2, "\n".join(lines)
    assert report.interrupted["judging"] >= 4, "\n".join(lines)
    # After it all, the real executable finds the corpus caught up: every answer was kept.
    assert report.final["exit"] == 0 and report.final["calls"] == 0, report.final
    assert set(report.final["states"].values()) <= {"caught-up", "nothing-qualified"}, report.final

    # and the checks would have seen a half-applied change or a lost verdict
    root = tmp_path / "trials" / "corpus"
    fact = next((root / "facts").rglob("*.md"))
    # what a torn write would leave
    fact.write_text(fact.read_text()[:40], encoding="utf-8")
    journal = root / ".knomit" / "verdicts" / "prune.jsonl"
    journal.write_bytes(b"".join(journal.read_bytes().splitlines(keepends=True)[1:]))  # a verdict lost
    found = "\n".join(check(root))
    assert "git status" in found and "fact does not parse" in found and "missing from the journal" in found


def test_sigkill_at_every_step_of_the_sync_is_recovered_by_the_next_session(tmp_path):
    lines: list[str] = []
    report = sync_kills(tmp_path / "sync", log=lines.append)
    assert report.inconsistencies == [], "\n".join(lines + report.inconsistencies)
    assert report.trials == len(SYNC_STEPS) == 6
    # the kills landed mid-merge: a merge in progress, and a fast-forward half-done, each recovered
    assert report.interrupted["MERGE_HEAD"] == 2 and report.interrupted["knomit-merge.json"] == 3, "\n".join(lines)
