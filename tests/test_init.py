"""`init`: refuses a path inside another repository and a missing one; a plain folder gets its facts committed;
`review` on a subfolder names the top of the corpus."""

from __future__ import annotations

import json

from click.testing import CliRunner

from conftest import SMALL, fact_text, git

from knomit_judge.cli import cli
from knomit_judge.review import ReviewOptions, review


def invoke(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


def test_init_inside_another_repository_refuses_naming_its_top(corpus_repo):
    inner = corpus_repo.root / "facts"
    result = invoke("init", inner)
    assert result.exit_code == 2, result.output
    assert (f"knomit-judge: {inner} is inside the git repository {corpus_repo.root}: a corpus must be the top of "
            f"its own repository (to make {corpus_repo.root} the corpus: knomit-judge init {corpus_repo.root})"
            in result.stderr)
    assert not (inner / ".git").exists() and not (inner / "knomit-judge.toml").exists()
    assert corpus_repo.status() == ""
    # --create does not get round it: a new directory under a repository is inside it too
    assert invoke("init", "--create", inner / "new" / "dir").exit_code == 2
    assert not (inner / "new").exists()


def test_init_refuses_a_missing_directory_unless_create(tmp_path):
    typo = tmp_path / "corpsu"
    result = invoke("init", typo)
    assert result.exit_code == 2
    assert f"knomit-judge: {typo}: no such directory (check the path, or pass --create to make it)" in result.stderr
    assert not typo.exists()

    result = invoke("init", "--create", typo / "deeper")
    assert result.exit_code == 0, result.output
    assert "found no fact files" in result.stdout
    assert git(typo / "deeper", "log", "--format=%s").split("\n")[0] == "knomit-judge: init"


def test_init_of_a_plain_folder_commits_the_facts_it_found_and_a_review_applies(tmp_path):
    notes = tmp_path / "notes"
    for path, text in SMALL.items():
        (notes / path).parent.mkdir(parents=True, exist_ok=True)
        (notes / path).write_text(text, encoding="utf-8")
    (notes / "facts" / "draft.md").write_text(fact_text("A draft kept out of git"), encoding="utf-8")
    (notes / ".gitignore").write_text("facts/draft.md\n", encoding="utf-8")

    result = invoke("init", notes)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert f"initialised a git repository in {notes}" in lines
    found = lines.index("found 4 fact file(s): committing them with the configuration")
    assert lines[found + 1] == "committed the configuration and 4 fact file(s)"  # said before it was done
    tracked = git(notes, "ls-files").split()
    assert sorted(tracked) == sorted([*SMALL, "knomit-judge.toml", ".gitignore"])  # the ignored draft stays out
    assert git(notes, "status", "--porcelain") == ""

    out = json.loads(invoke("-q", "review", notes, "--pass", "alias", "--json", "--judge",
                            f"scripted:{_replies(tmp_path)}").stdout)
    assert out["passes"]["alias"]["applied"] == 1  # a clean tree: the decision is committed


def test_init_of_a_plain_folder_names_files_it_left_uncommitted(tmp_path):
    notes = tmp_path / "notes"
    (notes / "facts").mkdir(parents=True)
    (notes / "facts" / "a.md").write_text(fact_text("A fact"), encoding="utf-8")
    (notes / "todo.txt").write_text("later\n", encoding="utf-8")
    result = invoke("init", notes)
    assert result.exit_code == 0
    assert ("1 other file(s) are not committed (e.g. todo.txt): commit them or list them in .gitignore, "
            "or every decision waits for a clean work tree") in result.stdout
    assert git(notes, "ls-files").split() == [".gitignore", "facts/a.md", "knomit-judge.toml"]


def test_init_of_an_existing_repository_commits_only_its_own_files(corpus_repo):
    corpus_repo.write("facts/new.md", fact_text("Someone's work in progress"))
    (corpus_repo.root / "knomit-judge.toml").unlink()
    corpus_repo.commit("no config")
    corpus_repo.write("facts/wip.md", fact_text("Not committed by us"))
    result = invoke("init", corpus_repo.root)
    assert result.exit_code == 0, result.output
    assert "found" not in result.stdout
    assert git(corpus_repo.root, "show", "--name-only", "--format=", "HEAD").split() == ["knomit-judge.toml"]
    assert corpus_repo.status() == "?? facts/wip.md\n"


def test_review_on_a_subfolder_names_the_top_of_the_corpus(corpus_repo):
    result = invoke("review", corpus_repo.root / "facts" / "ops")
    assert result.exit_code == 2
    assert (f"knomit-judge: {corpus_repo.root / 'facts' / 'ops'} is inside the git repository {corpus_repo.root}: "
            f"run knomit-judge on {corpus_repo.root}, the top of the corpus") in result.stderr
    assert "git init" not in result.stderr  # the advice that nested a second repository
    assert review(corpus_repo.root, ReviewOptions(dry_run=True)).passes  # the named top works


def _replies(tmp_path):
    path = tmp_path / "replies.jsonl"
    path.write_text(json.dumps({"pass": "alias", "a": "penalty-blocks-own-recovery", "b": "self-locking-penalty",
                                "reply": {"same": True, "mechanism": "A penalty removes the signal to lift it."}})
                    + "\n", encoding="utf-8")
    return path
