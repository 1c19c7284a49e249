"""The journal in git, rebuild from it, recovery from killed sessions and git failures, and the session lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner
from helpers import FAST, bought_digest, decision, git, write_config
from judges import PAIR, alias_yes
from processes import hook, kill_in_hook

from knomit_judge.cli import cli
from knomit_judge.errors import KnomitError
from knomit_judge.gitops import Lock, open_repo
from knomit_judge.recovery import recover_corpus
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store
from knomit_judge.verdicts import Journal

JOURNAL_COMMIT = "journal: verdicts of session"


# slow: knomit-judge subprocesses killed mid-commit and a lock held by another process
pytestmark = pytest.mark.slow


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def listed(root) -> dict[str, dict]:
    return {v["id"]: v for v in json.loads(run("verdicts", str(root), "--json").stdout)["verdicts"]}


def added_lines(root, sha: str, path: str) -> list[str]:
    diff = git(root, "show", "--format=", sha, "--", path)
    return [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]


def test_a_decision_commit_holds_its_verdict_and_the_noes_come_in_one_journal_commit(three):
    root = three.root
    for pass_name in ("alias", "prune", "discovery"):
        vid, sha = decision(three, pass_name)
        journal = f".knomit/verdicts/{pass_name}.jsonl"
        assert journal in git(root, "show", "--name-only", "--format=", sha).split()
        lines = added_lines(root, sha, journal)
        # its own line, and only it
        assert [json.loads(line)["id"] for line in lines] == [vid]
    journal_commits = [s for s in three.log() if s.startswith(JOURNAL_COMMIT)]
    assert len(journal_commits) == 1
    verdicts = listed(root)
    noes = [vid for vid, v in verdicts.items() if not v["commit_sha"]]
    assert len(noes) > 10
    sha = git(root, "log", f"--grep=^{JOURNAL_COMMIT}", "--format=%H").strip()
    committed = {
        json.loads(line)["id"]
        for p in ("alias", "prune", "discovery")
        for line in added_lines(root, sha, f".knomit/verdicts/{p}.jsonl")
    }
    assert committed == set(noes)
    assert three.status() == ""
    # one JSON object a line, every stored verdict journalled
    records = Journal(root).records()
    raw = [
        line
        for p in (root / ".knomit" / "verdicts").glob("*.jsonl")
        if p.name != "describe.jsonl"
        # describe.jsonl holds lines, not verdicts
        for line in p.read_bytes().splitlines()
    ]
    assert len(raw) == len(records) and {r["id"] for r in records} == set(verdicts)


def test_a_dry_run_writes_nothing_bought_not_even_in_git(three, judge_env):
    three.write("facts/ops/f4.md", three.read("facts/ops/f4.md") + "A new line makes new questions.\n")
    three.commit("edit")
    # .git, the journal and the db's bought rows
    before, calls = bought_digest(three.root), judge_env.calls
    result = review(three.root, ReviewOptions(dry_run=True))
    # there was something it would ask
    assert sum(r.offered for r in result.passes.values()) > 0
    # only derived caches (the edited fact's vector) may be kept
    assert bought_digest(three.root) == before
    assert judge_env.calls == calls and result.commits == []


def test_rebuild_from_the_journal_then_review_makes_no_judge_call(three, judge_env):
    before = listed(three.root)
    for f in (three.root / ".knomit").glob("judge.db*"):
        f.unlink()
    result = run("rebuild", str(three.root))
    assert result.exit_code == 0 and f"verdicts {len(before)}" in result.stdout
    # answers, applying commits and all
    assert listed(three.root) == before
    calls = judge_env.calls
    again = review(three.root)
    assert judge_env.calls == calls
    assert again.commits == []
    for name in ("alias", "prune", "discovery"):
        assert again.passes[name].state == "caught-up", again.text_lines()


def test_a_torn_journal_line_is_skipped_and_the_next_line_starts_fresh(three, judge_env):
    path = three.root / ".knomit" / "verdicts" / "alias.jsonl"
    count = len(Journal(three.root).records())
    with open(path, "ab") as f:
        # what a kill mid-append leaves
        f.write(b'{"type":"verdict","pass":"alias","finger')
    assert len(Journal(three.root).records()) == count
    Journal(three.root).append("alias", {"type": "revert", "verdict": "vnone", "reason": "x", "at": "now"})
    assert path.read_bytes().endswith(b'"finger\n{"type":"revert","verdict":"vnone","reason":"x","at":"now"}\n')
    assert len(Journal(three.root).records()) == count + 1
    for f in (three.root / ".knomit").glob("judge.db*"):
        f.unlink()
    recover_corpus(three.root)
    store = Store.for_corpus(three.root)
    try:
        assert store.db["verdicts"].count == count
    finally:
        store.close()


def test_a_session_killed_mid_commit_is_rolled_back_and_the_decision_applied_again_unasked(corpus_repo, judge_env):
    write_config(corpus_repo, FAST)
    judge_env.responder = alias_yes
    # the settings being edited: judged and stored, not applied
    corpus_repo.write("knomit-judge.toml", corpus_repo.read("knomit-judge.toml") + "# being edited\n")
    first = review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    assert first.passes["alias"].resolved == 1 and first.passes["alias"].applied == 0
    git(corpus_repo.root, "checkout", "--", "knomit-judge.toml")
    head, calls = git(corpus_repo.root, "rev-parse", "HEAD"), judge_env.calls

    kill_in_hook(corpus_repo.root, "pre-commit", "review", str(corpus_repo.root), "--pass", "alias")
    gitdir = corpus_repo.root / ".git"
    # killed with the change half-made
    assert (gitdir / "knomit-pending.json").exists()
    assert "facts/ops/f3.md" in corpus_repo.status()
    assert git(corpus_repo.root, "rev-parse", "HEAD") == head

    again = review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    assert any("killed while applying verdict" in n and "rolled back 1 file(s)" in n for n in again.notes), again.notes
    assert any("stale lock" in n for n in again.notes)
    # applied again, not asked again (the merge makes new questions)
    assert again.passes["alias"].applied == 1
    assert not [r for r in judge_env.requests[calls:] if all(f'"spelling": "{m}"' in r.prompt for m in PAIR)]
    # exactly one commit applies it
    vid, sha = decision(corpus_repo, "alias")
    assert vid in git(corpus_repo.root, "show", f"{sha}:.knomit/verdicts/alias.jsonl")
    assert "motifs: [penalty-blocks-own-recovery]" in corpus_repo.read("facts/ops/f3.md")
    assert corpus_repo.status() == ""
    assert not [p.name for p in gitdir.iterdir() if p.name.endswith(".lock") and p.name != "knomit-judge.lock"]
    assert not (gitdir / "knomit-pending.json").exists() and (gitdir / "knomit-judge.lock").read_text() == ""


def test_a_revert_killed_before_its_commit_is_undone_and_after_it_is_kept(three, judge_env):
    root = three.root
    vid, sha = decision(three, "prune")
    journal = root / ".knomit" / "verdicts" / "prune.jsonl"
    size, head = journal.stat().st_size, git(root, "rev-parse", "HEAD")

    kill_in_hook(root, "pre-commit", "revert", vid, str(root), "--reason", "first try")
    # restored files and a revert line, uncommitted
    assert journal.stat().st_size > size and three.status()
    notes = recover_corpus(root)
    assert any(f"killed while applying a revert of {vid}" in n for n in notes), notes
    assert journal.stat().st_size == size and three.status() == ""
    assert git(root, "rev-parse", "HEAD") == head and listed(root)[vid]["reverted"] is False

    kill_in_hook(root, "post-commit", "revert", vid, str(root), "--reason", "second try")
    # committed, then killed before it could tidy up
    assert git(root, "rev-parse", "HEAD") != head
    notes = recover_corpus(root)
    assert any(f"right after committing verdict {vid}" in n for n in notes), notes
    assert three.status() == ""
    store = Store.for_corpus(root)
    try:
        v = store.verdict(vid)
        assert v.reverted and v.revert_reason == "second try"
    finally:
        store.close()


def test_a_failing_commit_is_rolled_back_at_once_and_applied_by_the_next_session(corpus_repo, judge_env):
    write_config(corpus_repo, FAST)
    judge_env.responder = alias_yes
    head = git(corpus_repo.root, "rev-parse", "HEAD")
    hook(corpus_repo.root, "pre-commit", "echo 'hook says no' >&2; exit 1")
    with pytest.raises(KnomitError, match="rolled back: hook says no"):
        review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    assert git(corpus_repo.root, "rev-parse", "HEAD") == head
    assert all(line[3:].startswith(".knomit/") for line in corpus_repo.status().splitlines())  # verdicts kept
    (corpus_repo.root / ".git" / "hooks" / "pre-commit").unlink()
    calls = judge_env.calls
    again = review(corpus_repo.root, ReviewOptions(passes=("alias",)))
    assert again.passes["alias"].applied == 1
    assert not [r for r in judge_env.requests[calls:] if all(f'"spelling": "{m}"' in r.prompt for m in PAIR)]
    assert corpus_repo.status() == ""


def test_a_second_session_exits_3_naming_the_holder_and_a_dead_holder_is_taken_over(corpus_repo, judge_env):
    with Lock(open_repo(corpus_repo.root)):
        result = run("review", str(corpus_repo.root))
    assert result.exit_code == 3
    assert f"locked by another session: pid {os.getpid()} on " in result.stderr
    assert judge_env.calls == 0

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom knomit_judge.gitops import Lock, open_repo\n"
            "Lock(open_repo(sys.argv[1])).__enter__()\nprint('held', flush=True)\ntime.sleep(60)",
            str(corpus_repo.root),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    assert run("review", str(corpus_repo.root)).exit_code == 3  # alive: still refused
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    result = run("review", str(corpus_repo.root), "--json", "--pass", "alias")
    assert result.exit_code == 0, result.output
    assert f"taking over a stale lock: pid {holder.pid} on " in result.stderr
    assert any(f"took over a stale lock: pid {holder.pid}" in n for n in json.loads(result.stdout)["notes"])
    # a clean exit leaves no name behind: the next session takes over nothing
    result = run("review", str(corpus_repo.root), "--pass", "alias")
    assert result.exit_code == 0 and "stale lock" not in result.stderr
