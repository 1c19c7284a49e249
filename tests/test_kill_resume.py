"""A session killed mid-way: SIGKILL loses only unfinished calls; SIGTERM cancels cleanly.

The review runs in a subprocess (the real console entry point) against the loopback server,
which runs here, in the test process, and records every prompt it was asked.
"""

from __future__ import annotations

import json
import signal

import pytest
import sqlite_utils
from helpers import fact_text, git, make_repo, write_config
from processes import signal_after, slow_then_held, start

from knomit_judge.judge import cache_key
from knomit_judge.models import format_schema
from knomit_judge.prompts import load_prompt
from knomit_judge.rebuild import rebuild
from knomit_judge.session.review import ReviewOptions, review

DIFFERENT = json.dumps({"same": False, "mechanism": ""})
TOPICS = [
    "queue growth amplifies latency",
    "retry storms overload the backend",
    "a cache stampede on expiry",
    "a breaker latches open",
    "backpressure stalls the producer",
    "a leader election flaps",
]
# swap_sample = 1: every question asked in both orders, so a kill can land between a question's two replies
CONFIG = (
    "[judge]\nbackoff_s = 0.0\nconcurrency = 2\nswap_sample = 1.0\n\n[shortlist]\nk = 2\n\n[budget]\nenabled = false\n"
)


# slow: review subprocesses killed or interrupted mid-session, then resumed
pytestmark = pytest.mark.slow


@pytest.fixture
def busy_repo(tmp_path):
    """Six motifs and their pair questions, embedded beforehand so the subprocess never loads the model."""
    facts = {
        f"facts/t/f{i}.md": fact_text(t.capitalize(), [t.replace(" ", "-")], body=f"{t.capitalize()}.")
        for i, t in enumerate(TOPICS)
    }
    repo = make_repo(tmp_path / "busy", facts)
    write_config(repo, CONFIG)
    rebuild(repo.root)
    return repo


def key(request) -> str:
    prompt = load_prompt("alias")
    # the reply contract as structured outputs take it: claude-sonnet-5-5's dialect (models.py)
    return cache_key(
        "claude-sonnet-5-5",
        prompt.id,
        prompt.system,
        request.prompt,
        0,
        tool={"format": format_schema(prompt.reply_schema)},
    )


def db(repo) -> sqlite_utils.Database:
    return sqlite_utils.Database(repo.root / ".knomit" / "judge.db")


def test_sigkill_then_rerun_asks_only_what_was_not_parsed(busy_repo, messages_server):
    released = slow_then_held(messages_server, 6)
    code, _ = signal_after(start(busy_repo, messages_server), messages_server, 6, signal.SIGKILL, released)
    assert code == -signal.SIGKILL
    before = messages_server.requests
    parsed = {r["key"] for r in db(busy_repo)["replies"].rows}
    assert parsed and parsed <= {key(r) for r in before}
    unfinished = {key(r) for r in before} - parsed

    proc = start(busy_repo, messages_server)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    alias = json.loads(out)["passes"]["alias"]
    rerun = [key(r) for r in messages_server.requests[len(before) :]]
    assert not set(rerun) & parsed, "a reply parsed before the kill was paid for again"
    assert len(rerun) == len(set(rerun)) == alias["judge_calls"]
    # what was in flight at the kill is asked again
    assert unfinished <= set(rerun)
    verdicts = list(db(busy_repo)["verdicts"].rows)
    assert alias["state"] == "worked" and len(verdicts) == alias["candidates"] > alias["judged"]
    assert db(busy_repo)["replies"].count == 2 * len(verdicts) == len(parsed) + len(rerun)


# An ignored SIGINT is inherited: a shell starts background jobs so, and SIGTERM must still cancel cleanly.
@pytest.mark.parametrize("sigint", [signal.SIG_DFL, signal.SIG_IGN], ids=["foreground", "sigint-ignored"])
def test_sigterm_cancels_cleanly_keeping_only_whole_verdicts(busy_repo, messages_server, sigint):
    released = slow_then_held(messages_server, 6)
    code, err = signal_after(start(busy_repo, messages_server, sigint), messages_server, 6, signal.SIGTERM, released)
    assert code == 130 and "interrupted" in err
    verdicts = list(db(busy_repo)["verdicts"].rows)
    cached = {r["key"] for r in db(busy_repo)["replies"].rows}
    questions = review(busy_repo.root, ReviewOptions(dry_run=True, passes=("alias",))).passes["alias"].candidates
    assert 0 < len(verdicts) < questions  # cut mid-way
    # a verdict exists only for a question whose both orders were answered and parsed
    for v in verdicts:
        assert json.loads(v["replies"]) == [DIFFERENT, DIFFERENT] and v["calls"] == 2
    assert len(cached) >= 2 * len(verdicts)
    # the session's cleanup ran: journal committed, session closed
    assert git(busy_repo.root, "status", "--porcelain") == ""
    journal = (busy_repo.root / ".knomit" / "verdicts" / "alias.jsonl").read_text().splitlines()
    assert {json.loads(line)["id"] for line in journal} == {v["id"] for v in verdicts}
    assert "journal: verdicts of session" in git(busy_repo.root, "log", "-1", "--format=%s")
    [session] = list(db(busy_repo)["sessions"].rows)
    assert session["ended_at"] is not None
