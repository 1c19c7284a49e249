"""`init`: refuses a path inside another repository and a missing one; a plain folder gets its facts committed;
`review` on a subfolder names the top of the corpus."""

from __future__ import annotations

import json

from click.testing import CliRunner
from helpers import SMALL, fact_text, git

from knomit_judge.cli import cli
from knomit_judge.session.review import ReviewOptions, review


def invoke(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


def test_init_inside_another_repository_refuses_naming_its_top(corpus_repo):
    inner = corpus_repo.root / "facts"
    result = invoke("init", inner)
    assert result.exit_code == 2, result.output
    assert (
        f"knomit-judge: {inner} is inside the git repository {corpus_repo.root}: a corpus must be the top of "
        f"its own repository (to make {corpus_repo.root} the corpus: knomit-judge init {corpus_repo.root})"
        in result.stderr
    )
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
    # said before it was done
    assert lines[found + 1] == "committed the configuration and 4 fact file(s)"
    tracked = git(notes, "ls-files").split()
    # the ignored draft stays out
    assert sorted(tracked) == sorted([*SMALL, "knomit-judge.toml", ".gitignore"])
    assert git(notes, "status", "--porcelain") == ""

    out = json.loads(
        invoke("-q", "review", notes, "--pass", "alias", "--json", "--judge", f"scripted:{_replies(tmp_path)}").stdout
    )
    # a clean tree: the decision is committed
    assert out["passes"]["alias"]["applied"] == 1


def test_init_of_a_plain_folder_names_files_it_left_uncommitted(tmp_path):
    notes = tmp_path / "notes"
    (notes / "facts").mkdir(parents=True)
    (notes / "facts" / "a.md").write_text(fact_text("A fact"), encoding="utf-8")
    (notes / "todo.txt").write_text("later\n", encoding="utf-8")
    result = invoke("init", notes)
    assert result.exit_code == 0
    # a file that is no fact holds no decision back (issue 50): said, so nobody commits a vault's .obsidian/ to get
    # decisions applied
    assert (
        "1 other file(s) are not committed (e.g. todo.txt): git keeps them once you commit them or list them "
        "in .gitignore; no decision waits for them"
    ) in result.stdout
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
    assert (
        f"knomit-judge: {corpus_repo.root / 'facts' / 'ops'} is inside the git repository {corpus_repo.root}: "
        f"run knomit-judge on {corpus_repo.root}, the top of the corpus"
    ) in result.stderr
    # the advice that nested a second repository
    assert "git init" not in result.stderr
    assert review(corpus_repo.root, ReviewOptions(dry_run=True)).passes  # the named top works


def _replies(tmp_path):
    path = tmp_path / "replies.jsonl"
    path.write_text(
        json.dumps(
            {
                "pass": "alias",
                "a": "penalty-blocks-own-recovery",
                "b": "self-locking-penalty",
                "reply": {"same": True, "mechanism": "A penalty removes the signal to lift it."},
            }
        )
        + "\n",
        encoding="utf-8",
    )
    return path


def note(title: str, tags: list[str], body: str) -> str:
    """A note as a notes app writes it: front matter with `tags:`, no motifs key."""
    return f"---\ntitle: {json.dumps(title)}\ntags: {json.dumps(tags)}\n---\n{body}\n"


def test_init_detects_a_folder_of_notes_with_tags_and_a_dry_run_reads_them(tmp_path):
    root = tmp_path / "kb"
    (root / "notes" / "perf").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "notes" / "retries.md").write_text(
        note("Retries without jitter arrive in waves", ["retry", "load"], "Clients synchronise."), encoding="utf-8"
    )
    (root / "notes" / "perf" / "cache.md").write_text(
        note("Full-URL cache keys miss", ["cache"], "Tracking params."), encoding="utf-8"
    )
    # no front matter: not chosen
    (root / "docs" / "readme.md").write_text("# Not a note\n", encoding="utf-8")
    (root / "README.md").write_text("---\ntags: [x]\n---\nthe repository's own page\n", encoding="utf-8")

    result = invoke("init", root)
    assert result.exit_code == 0, result.output
    assert (
        "detected a notes KB: 2 Markdown file(s) under notes/, 2 of 2 sampled with front matter, "
        "`tags:` lists in 2 of them"
    ) in result.stdout
    assert 'with [corpus] paths = ["notes/**/*.md"], motif_keys = ["tags"], retract = "status"' in result.stdout
    assert "found 2 fact file(s): committing them with the configuration" in result.stdout
    config = __import__("tomllib").loads((root / "knomit-judge.toml").read_text(encoding="utf-8"))
    assert config["corpus"]["paths"] == ["notes/**/*.md"] and config["corpus"]["motif_keys"] == ["tags"]
    assert not (root / "facts").exists()

    dry = json.loads(
        invoke("-q", "review", root, "--dry-run", "--json", "--judge", f"scripted:{_replies(tmp_path)}").stdout
    )
    assert dry["corpus"]["state"] == "read" and dry["corpus"]["read"] == 2


def test_init_that_finds_no_notes_says_what_it_looked_for_and_the_closest_folder(tmp_path):
    root = tmp_path / "kb"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("# Plain Markdown, no front matter\n", encoding="utf-8")
    (root / "docs" / "b.md").write_text("# Another\n", encoding="utf-8")

    result = invoke("init", root)
    assert result.exit_code == 0, result.output
    assert (
        "looked for Markdown with front matter under any folder: found none; the closest folder of Markdown "
        "is docs/ (2 file(s), most without front matter); facts go under facts/, or set [corpus] paths" in result.stdout
    )
    assert "found no fact files" in result.stdout

    # the next dry run says broken before any figure: no "would ask 0 question(s) ... $0.0000" first
    dry = invoke("-q", "review", root, "--dry-run", "--judge", f"scripted:{_replies(tmp_path)}")
    first = dry.stdout.splitlines()[0]
    assert "broken" in first and "$" not in first and "would ask" not in first, dry.stdout
    assert "docs/" in dry.stdout


def test_init_keeps_our_own_facts_layout_over_a_larger_folder_of_notes(tmp_path):
    root = tmp_path / "kb"
    (root / "facts").mkdir(parents=True)
    (root / "notes").mkdir()
    (root / "facts" / "a.md").write_text(fact_text("A fact"), encoding="utf-8")
    for i in range(3):
        (root / "notes" / f"n{i}.md").write_text(note(f"Note {i}", ["t"], "Body."), encoding="utf-8")
    result = invoke("init", root)
    assert result.exit_code == 0, result.output
    assert "detected" not in result.stdout and "found 1 fact file(s)" in result.stdout
    assert 'paths = ["facts/**/*.md"]' in (root / "knomit-judge.toml").read_text(encoding="utf-8")
