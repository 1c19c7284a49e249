"""Session history and `knomit-judge status`: what it shows, and that it asks nothing and writes nothing."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import get_args

from click.testing import CliRunner
from helpers import motif_repo, session, stored_sessions, tree_digest, write_config
from messages_server import DEFAULT_REPLY, text

from knomit_judge.cli import cli
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.status import STATES, PassResult, State
from knomit_judge.store import Store

PACKAGE = Path(__file__).resolve().parent.parent / "knomit_judge"


def states_given(source: str) -> set[str]:
    """The states a PassResult is given in `source`: each string put in a `.state` (`r.state = "aborted"`, the
    branches of a conditional, one of a tuple's targets) or passed as `state=` (`PassResult(name, state="broken")`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        values: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = (
                    zip(target.elts, node.value.elts)
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                    else [(target, node.value)]
                )
                values += [v for t, v in pairs if isinstance(t, ast.Attribute) and t.attr == "state"]
        elif isinstance(node, ast.Call):
            values += [k.value for k in node.keywords if k.arg == "state"]
        found |= {
            c.value for v in values for c in ast.walk(v) if isinstance(c, ast.Constant) and isinstance(c.value, str)
        }
    return found


def test_states_name_every_state_a_pass_result_is_given():
    """STATES is the State type's values (so the two cannot drift), and every state status.py or a session gives a
    pass's result is one of them, each of them given somewhere: `aborted` and `would-offer` were left out (#53)."""
    assert STATES == get_args(State) and PassResult("alias").state in STATES
    given: set[str] = set()
    for path in [PACKAGE / "status.py", *sorted((PACKAGE / "session").rglob("*.py"))]:
        given |= states_given(path.read_text(encoding="utf-8"))
    assert given == set(STATES)


def test_the_state_scan_finds_each_way_a_state_is_given():
    source = "\n".join(
        [
            'r.state = "aborted"',
            'r.state, r.notes = "skipped", ["off"]',
            'r.state = "worked" if r.applied else ("nothing-qualified" if not groups else "caught-up")',
            'result.passes[n] = PassResult(n, state="broken", notes=["no fact read"])',
            # a comparison and another field give nothing
            'ok = r.state == "batched"; r.notes = ["would-offer"]',
        ]
    )
    assert states_given(source) == {"aborted", "skipped", "worked", "nothing-qualified", "caught-up", "broken"}


def status_cli(root, *extra):
    result = CliRunner().invoke(cli, ["-q", "status", str(root), *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_every_session_is_recorded_with_counts_cost_and_commits(tmp_path, judge_env, monkeypatch):
    repo = motif_repo(tmp_path, "optimistic_cap = 2\n")
    first = review(repo.root, ReviewOptions(passes=("alias",)))
    # a larger opening cap: the balance, derived from the verdicts, is 6 - 2 = 4 questions
    write_config(repo, repo.read("knomit-judge.toml").replace("optimistic_cap = 2", "optimistic_cap = 6"))
    # a model with no price now exits 2 (test_spend); a reply without usage still makes the cost unknown
    judge_env.responder = lambda req, n: text(DEFAULT_REPLY, usage=False)
    second = review(repo.root, ReviewOptions(passes=("alias",)))
    # a dry run records no session
    review(repo.root, ReviewOptions(dry_run=True))

    rows = stored_sessions(repo)
    assert [r["id"] for r in rows] == [first.session, second.session]
    for row, result in zip(rows, (first, second)):
        assert row["started_at"] <= row["ended_at"]
        assert row["passes"] == json.loads(json.dumps(result.json()["passes"]))
        assert row["commits"] == result.commits and len(row["commits"]) == 1  # the journal commit
    assert second.passes["alias"].throttle == "unproven"
    assert rows[0]["passes"]["alias"]["judged"] == 2 and rows[1]["passes"]["alias"]["judged"] == 4
    assert rows[0]["cost_usd"] == first.cost_usd and rows[0]["cost_usd"] > 0
    assert rows[1]["cost_usd"] is None and second.cost_usd is None
    assert "cost incomplete" in status_cli(repo.root).splitlines()[0]


def test_status_shows_lines_throttle_and_sessions_without_a_call_or_a_write(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "optimistic_cap = 2\nprobe_every = 3\n")
    session(repo, judge_env)
    last, _ = session(repo, judge_env)
    calls, digest = judge_env.calls, tree_digest(repo.root)
    db = (repo.root / ".knomit" / "judge.db").read_bytes()

    out = status_cli(repo.root).splitlines()
    assert out[0].startswith(f"last session {last.session} (")
    assert any(line.startswith("  alias: defunded (next probe in 2 sessions) - candidates ") for line in out)
    assert any(line.startswith("  exact: nothing-qualified - ") for line in out)
    throttle = out[out.index("throttle for the next session:") + 1 :][:3]
    # optimistic_cap = 2 judge-model questions, converted: the balance counts money
    assert throttle[0].startswith(
        "  alias: defunded (next probe in 2 sessions) - balance 0: 2 asked for $0.0080, "
        "0 resolved x $0.0400, opening $0.0080"
    )
    assert throttle[1].startswith("  prune: optimistic - no verdicts yet")
    assert throttle[2].startswith("  discovery: optimistic - no verdicts yet")
    table = out[out.index("last 2 session(s), newest first:") + 2 :]
    assert [row.split()[0] for row in table] == [last.session, stored_sessions(repo)[0]["id"]]
    assert table[0].split()[-4:] == ["nothing-qualified", "defunded", "-", "-"]
    assert table[1].split()[-4:] == ["nothing-qualified", "worked", "-", "-"]

    data = json.loads(status_cli(repo.root, "--json"))
    assert data["last_session"]["id"] == last.session
    assert data["last_session"]["passes"]["alias"]["state"] == "defunded"
    assert data["throttle"]["alias"]["state"] == "defunded" and data["throttle"]["alias"]["next_probe_in"] == 2
    assert data["throttle"]["alias"]["why"].startswith("balance 0: 2 asked")
    assert data["throttle"]["alias"]["balance"] == 0
    assert [s["id"] for s in data["sessions"]][0] == last.session and len(data["sessions"]) == 2
    assert len(json.loads(status_cli(repo.root, "--json", "--sessions", "1"))["sessions"]) == 1

    assert judge_env.calls == calls
    assert (repo.root / ".knomit" / "judge.db").read_bytes() == db
    assert tree_digest(repo.root) == digest

    # the last one before the probe
    session(repo, judge_env)
    out = status_cli(repo.root).splitlines()
    assert any(line.startswith("  alias: defunded (next probe in 1 session) - candidates ") for line in out)
    assert any(
        line.startswith("  alias: defunded - ") and line.endswith("the next session probes one candidate")
        for line in out
    )


def test_status_of_a_corpus_never_reviewed_creates_no_db(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "")
    db = repo.root / ".knomit" / "judge.db"
    db.unlink()
    out = status_cli(repo.root).splitlines()
    assert out[0] == "no sessions yet"
    assert (
        "  alias: optimistic - no verdicts yet: a balance of $0.0500 (the opening); balance $0.0500 buys 12 reads "
        "at claude-sonnet-5-5" in out
    )
    assert not db.exists() and judge_env.calls == 0


def test_status_names_a_session_that_never_ended(tmp_path, judge_env):
    repo = motif_repo(tmp_path, "optimistic_cap = 1\n")
    session(repo, judge_env)
    store = Store.for_corpus(repo.root)
    try:
        # what a session killed mid-way leaves behind
        store.start_session("20990101T000000Z-dead")
    finally:
        store.close()
    out = status_cli(repo.root).splitlines()
    assert out[-1] == "1 session(s) started and did not end (running now, or killed)"
    assert json.loads(status_cli(repo.root, "--json"))["unfinished"] == 1
