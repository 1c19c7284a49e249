"""The shared remote under faults (issue 39): a private branch, a kill mid-merge, a deleted remote branch, misleading
messages, untracked files, and the last session's sync in `status --json`.

Real git throughout: bare remotes and clones in tmp_path, hooks that sleep where a kill is wanted, the real SDK
against the loopback Messages server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import clone, git
from judges import respond

from knomit_judge.history import status
from knomit_judge.session.review import ReviewOptions, review

REPO = Path(__file__).resolve().parent.parent


# slow: review subprocesses killed at each step of a sync
pytestmark = pytest.mark.slow


def writer_edit(tmp_path: Path, remote: Path, path: str, old: str, new: str, name: str = "writer") -> str:
    """A writer on another machine edits one fact and pushes it to main."""
    where = tmp_path / name
    if not where.exists():
        git(tmp_path, "clone", "-q", str(remote), str(where))
    git(where, "pull", "-q", "--no-rebase", "origin", "main")
    full = where / path
    assert old in full.read_text()
    full.write_text(full.read_text().replace(old, new))
    git(where, "commit", "-q", "-am", f"{name}: edit {path}")
    git(where, "push", "-q", "origin", "HEAD:main")
    return git(where, "rev-parse", "HEAD").strip()


def local_edit(root: Path, path: str, old: str, new: str, msg: str) -> str:
    full = root / path
    full.write_text(full.read_text().replace(old, new))
    git(root, "commit", "-q", "-am", msg)
    return git(root, "rev-parse", "HEAD").strip()


# -- 1. a private branch is never published ---------------------------------------------------------


def test_a_session_on_another_branch_reviews_locally_and_pushes_nothing(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    git(reviewer, "checkout", "-q", "-b", "feature")
    private = local_edit(reviewer, "facts/ops/f4.md", "Queue", "Queue (private WIP, not for main)", "private WIP")
    pushed = writer_edit(tmp_path, path_remote, "facts/ops/f2.md", 'sources: ["s2"]', 'sources: ["s2", "s5"]')

    result = review(reviewer, ReviewOptions())

    assert result.sync.state == "skipped", result.sync.line()
    assert result.sync.line().startswith("sync origin/main: skipped - on branch feature, not main"), result.sync.line()
    assert git(path_remote, "rev-parse", "main").strip() == pushed  # nothing published
    assert subprocess.run(["git", "merge-base", "--is-ancestor", private, "main"], cwd=path_remote).returncode != 0
    # reviewed locally all the same
    assert result.passes["alias"].applied == 1
    assert subprocess.run(["git", "merge-base", "--is-ancestor", pushed, "HEAD"], cwd=reviewer).returncode != 0

    git(reviewer, "checkout", "-q", "--detach")  # a detached HEAD likewise
    detached = review(reviewer, ReviewOptions())
    assert detached.sync.state == "skipped" and "detached HEAD" in detached.sync.line(), detached.sync.line()
    assert git(path_remote, "rev-parse", "main").strip() == pushed

    # a branch tracking main syncs
    git(reviewer, "checkout", "-q", "-b", "work", "--track", "origin/main")
    tracking = review(reviewer, ReviewOptions())
    assert tracking.sync.state == "synced", tracking.sync.line()


# -- 2. a kill during the merge, and a person's merge -------------------------------------------------


def hook(root: Path, name: str, body: str) -> Path:
    """A hook in a clone (root/.git/hooks) or a bare repository (root/hooks)."""
    path = (root / ".git" if (root / ".git").exists() else root) / "hooks" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def cli_session(root: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "from knomit_judge.cli import main; main()", "-q", "review", "--json", str(root)],
        cwd=root,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def kill_when(proc: subprocess.Popen, flag: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not flag.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the session never reached the hook"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def test_a_session_killed_mid_merge_is_recovered_and_pushes(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    mine = local_edit(reviewer, "facts/ops/f4.md", "Queue", "Queue, locally edited,", "a local edit")
    theirs = writer_edit(tmp_path, path_remote, "facts/ops/f2.md", 'sources: ["s2"]', 'sources: ["s2", "s5"]')
    flag = tmp_path / "in-merge"
    sleeper = hook(reviewer, "prepare-commit-msg", f'[ -f .git/MERGE_HEAD ] && touch "{flag}" && sleep 120\nexit 0\n')

    kill_when(cli_session(reviewer), flag)
    assert (reviewer / ".git" / "MERGE_HEAD").exists()
    sleeper.unlink()

    result = review(reviewer, ReviewOptions())

    assert any("killed while merging" in n for n in result.notes), result.notes
    assert result.sync.state == "synced" and result.sync.unpushed == 0, result.sync.line()
    assert not (reviewer / ".git" / "MERGE_HEAD").exists()
    assert git(reviewer, "status", "--porcelain") == ""
    head = git(reviewer, "rev-parse", "HEAD").strip()
    assert git(path_remote, "rev-parse", "main").strip() == head
    for sha in (mine, theirs):
        git(path_remote, "merge-base", "--is-ancestor", sha, "main")
    assert result.passes["alias"].applied == 1


def test_a_persons_merge_is_left_alone_and_named(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    local_edit(reviewer, "facts/ops/f4.md", "Queue", "Queue, locally edited,", "a local edit")
    writer_edit(tmp_path, path_remote, "facts/ops/f2.md", 'sources: ["s2"]', 'sources: ["s2", "s5"]')
    git(reviewer, "fetch", "-q", "origin")
    git(reviewer, "merge", "-q", "--no-ff", "--no-commit", "origin/main")
    merging = (reviewer / ".git" / "MERGE_HEAD").read_text()
    before = git(path_remote, "rev-parse", "main")

    result = review(reviewer, ReviewOptions())

    assert result.sync.state == "skipped" and "did not start" in result.sync.line(), result.sync.line()
    assert (reviewer / ".git" / "MERGE_HEAD").read_text() == merging  # left alone
    assert not [p for p in git(reviewer, "diff", "--cached", "--name-only").split() if p.startswith(".knomit")]
    assert git(path_remote, "rev-parse", "main") == before
    assert result.passes["alias"].applied == 0 and any("did not start" in n for n in result.notes), result.notes

    # the person finishes it: the next session syncs and applies
    git(reviewer, "commit", "-q", "--no-edit")
    after = review(reviewer, ReviewOptions())
    assert after.sync.state == "synced" and after.sync.unpushed == 0, after.sync.line()
    assert after.passes["alias"].applied == 1


# -- 3. a deleted remote branch, a new empty remote ---------------------------------------------------


def test_a_remote_without_the_branch_gets_it_pushed(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    git(path_remote, "update-ref", "-d", "refs/heads/main")

    first = review(reviewer, ReviewOptions())

    assert first.sync.state == "synced" and first.sync.pushed >= 1 and first.sync.unpushed == 0, first.sync.line()
    assert git(path_remote, "rev-parse", "main").strip() == git(reviewer, "rev-parse", "HEAD").strip()

    empty = tmp_path / "new.git"
    git(tmp_path, "init", "-q", "--bare", str(empty))
    git(reviewer, "remote", "set-url", "origin", str(empty))
    second = review(reviewer, ReviewOptions())
    assert second.sync.state == "synced" and second.sync.pushed >= 1, second.sync.line()
    assert git(empty, "rev-parse", "main").strip() == git(reviewer, "rev-parse", "HEAD").strip()


# -- 5. messages that name the real cause -------------------------------------------------------------


def test_a_dirty_tree_is_named_once_not_a_moving_remote(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    writer_edit(tmp_path, path_remote, "facts/ops/f2.md", 'sources: ["s2"]', 'sources: ["s2", "s5"]')
    f4 = reviewer / "facts" / "ops" / "f4.md"
    f4.write_text(f4.read_text().replace("Queue", "Queue (an unsaved thought)"))  # a user's unstaged edit

    result = review(reviewer, ReviewOptions())

    line = result.sync.line()
    assert result.sync.state == "unpushed" and "rejected 3 times" not in line, line
    assert "uncommitted change" in result.sync.error and "facts/ops/f4.md" in result.sync.error, line
    assert len(result.sync.notes) == len(set(result.sync.notes)) <= 1, result.sync.notes


def test_a_remote_path_that_does_not_exist_is_named(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    git(reviewer, "remote", "set-url", "origin", str(tmp_path / "nowhere.git"))

    result = review(reviewer, ReviewOptions())

    assert result.sync.state == "unreachable"
    assert "does not appear to be a git repository" in result.sync.error, result.sync.error
    assert "nowhere.git" in result.sync.error and "and the repository exists" not in result.sync.error


def test_a_pre_receive_hooks_reason_is_kept(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    hook(path_remote, "pre-receive", 'echo "main is frozen for the audit" >&2\nexit 1\n')

    result = review(reviewer, ReviewOptions())

    assert result.sync.state == "unpushed", result.sync.line()
    assert "main is frozen for the audit" in result.sync.error and "pre-receive" in result.sync.error, result.sync.error


def test_a_rewritten_remote_is_noted(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    assert review(reviewer, ReviewOptions()).sync.state == "synced"
    writer = tmp_path / "writer"
    git(tmp_path, "clone", "-q", str(path_remote), str(writer))
    git(writer, "reset", "-q", "--hard", "HEAD~1")
    git(writer, "commit", "-q", "--allow-empty", "-m", "history rewritten")
    git(writer, "push", "-q", "--force", "origin", "HEAD:main")

    result = review(reviewer, ReviewOptions())

    assert any("rewritten (force-pushed)" in n for n in result.sync.notes), result.sync.line()
    assert result.sync.state == "synced", result.sync.line()


# -- 6. untracked files ---------------------------------------------------------------------------------


def test_an_untracked_file_outside_the_facts_does_not_block_decisions(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    (reviewer / "out.txt").write_text("review output, redirected\n")

    result = review(reviewer, ReviewOptions())

    assert result.passes["alias"].applied == 1 and not any("applying nothing" in n for n in result.notes)
    assert result.sync.state == "synced", result.sync.line()
    assert (reviewer / "out.txt").read_text() == "review output, redirected\n"
    assert git(reviewer, "status", "--porcelain") == "?? out.txt\n"  # never committed


def test_an_untracked_fact_blocks_applying(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    (reviewer / "facts" / "ops" / "draft.md").write_text((reviewer / "facts" / "ops" / "f4.md").read_text())

    result = review(reviewer, ReviewOptions())

    assert result.passes["alias"].applied == 0
    assert any("facts/ops/draft.md" in n and "applying nothing" in n for n in result.notes), result.notes
    assert "?? facts/ops/draft.md" in git(reviewer, "status", "--porcelain")


# -- 7. status --json: the last session's sync --------------------------------------------------------


def test_status_names_the_last_sessions_sync(tmp_path, path_remote, judge_env):
    judge_env.responder = respond
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    result = review(reviewer, ReviewOptions())

    sync = status(reviewer)["last_session"]["sync"]

    assert sync["state"] == "synced" and sync["overridden"] == [] and sync["pushed"] == result.sync.pushed, sync
    assert json.loads(json.dumps(sync)) == sync


def test_an_open_vaults_workspace_file_holds_neither_the_merge_nor_a_decision(tmp_path, path_remote, judge_env):
    """Obsidian rewrites .obsidian/workspace.json while it is open: a change to a file that is no fact and that the
    writers' commits do not touch is left as it is by the merge, and holds nothing back (issue 50)."""
    judge_env.responder = respond
    seed = tmp_path / "settings"
    git(tmp_path, "clone", "-q", str(path_remote), str(seed))
    (seed / ".obsidian").mkdir()
    (seed / ".obsidian" / "workspace.json").write_text('{"main": {}}\n')
    git(seed, "add", ".obsidian")
    git(seed, "commit", "-q", "-m", "the vault's settings")
    git(seed, "push", "-q", "origin", "HEAD:main")
    reviewer = clone(str(path_remote), tmp_path / "reviewer", "sync")
    opened = '{"main": {"active": "f1"}}\n'
    (reviewer / ".obsidian" / "workspace.json").write_text(opened)
    writer_edit(tmp_path, path_remote, "facts/ops/f2.md", 'sources: ["s2"]', 'sources: ["s2", "s5"]')

    result = review(reviewer, ReviewOptions())

    assert result.sync.state == "synced" and result.sync.merged >= 1 and result.sync.unpushed == 0, result.sync.line()
    assert result.passes["prune"].applied == 1 and result.passes["alias"].applied == 1
    assert (reviewer / ".obsidian" / "workspace.json").read_text() == opened
    assert git(reviewer, "status", "--porcelain").strip() == "M .obsidian/workspace.json"
    assert ".obsidian/" not in git(reviewer, "log", "--name-only", "--format=", "origin/main@{1}..HEAD")
    assert git(path_remote, "rev-parse", "main").strip() == git(reviewer, "rev-parse", "HEAD").strip()
