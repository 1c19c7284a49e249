"""git's local variables (GIT_DIR and its like, as `git bisect run` and hooks export them) never redirect the tool."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import duplicates_corpus, fact_text, git, make_repo, tree_digest

from knomit_judge.session.review import ReviewOptions, review


def elsewhere(tmp_path):
    """Another repository, and the variables that would point every git call at it."""
    other = make_repo(tmp_path / "other", {"facts/x.md": fact_text("Another repository's fact", ["other"])})
    env = {
        "GIT_DIR": str(other.root / ".git"),
        "GIT_WORK_TREE": str(other.root),
        "GIT_INDEX_FILE": str(other.root / ".git" / "index"),
    }
    # a scripted judge with no replies
    (tmp_path / "none.jsonl").write_text("", encoding="utf-8")
    return other, env


def assert_only_intended_commits(corpus, before: list[str]) -> None:
    log = corpus.log()
    added = log[: len(log) - len(before)]
    assert log[len(added) :] == before
    assert sum(s.startswith("exact:") for s in added) == 2 and any(s.startswith("journal:") for s in added), added
    # nothing staged or left behind
    assert corpus.status() == ""
    assert git(corpus.root, "config", "--get", "core.bare").strip() == "false"


def test_review_with_git_dir_elsewhere_touches_only_the_corpus(tmp_path):
    corpus = duplicates_corpus(tmp_path)
    other, env = elsewhere(tmp_path)
    before, other_bytes = corpus.log(), tree_digest(other.root)

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from knomit_judge.cli import main; main()",
            "review",
            str(corpus.root),
            "--pass",
            "prune",
            "--judge",
            f"scripted:{tmp_path / 'none.jsonl'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr

    # not one byte of the other repository changed
    assert tree_digest(other.root) == other_bytes
    assert_only_intended_commits(corpus, before)


def test_library_review_scrubs_git_dir_too(tmp_path, monkeypatch):
    corpus = duplicates_corpus(tmp_path)
    other, env = elsewhere(tmp_path)
    before, other_bytes = corpus.log(), tree_digest(other.root)
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    result = review(corpus.root, ReviewOptions(passes=("prune",), judge=f"scripted:{tmp_path / 'none.jsonl'}"))

    assert result.passes["exact"].applied == 2
    assert tree_digest(other.root) == other_bytes
    assert_only_intended_commits(corpus, before)
