"""A vault reviewed in place (issue 50, the reading side): init covers every note and names what it leaves out,
every note is a fact (no front matter, titled by its file name, inline and nested #tags), a template is left out,
an alias merge rewrites tags in front matter and inline alike, and what is no note holds no decision back."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from click.testing import CliRunner
from helpers import git, scripted

from knomit_judge.cli import cli

VAULT = {
    ".obsidian/app.json": '{"attachmentFolderPath": "Attachments", "alwaysUpdateLinks": true}\n',
    ".obsidian/templates.json": '{"folder": "Templates"}\n',
    ".obsidian/workspace.json": '{"main": {"id": "a1"}, "lastOpenFiles": ["Daily/2026-01-05.md"]}\n',
    ".trash/Old idea.md": "An idea thrown away. #idea\n",
    "Templates/Daily.md": "---\ncreated: {{date}}\ntags: [daily]\n---\n# {{title}}\n\n## Log\n",
    "Templates/Meeting.md": "# Meeting on {{date:YYYY-MM-DD}}\n\n## Attendees\n",
    "Attachments/diagram.png": "\x89PNG not really\n",
    "Attachments/Diagram notes.md": "Notes the diagram plugin keeps beside its image.\n",
    "Inbox/Untitled.md": "---\ncreated: {{date:YYYY-MM-DD}}\n---\nA template someone left outside the folder.\n",
    "Daily/2026-01-05.md": "Went for a long run before work. #running #health\n\nSlept badly after the third coffee. #sleep\n",
    "Daily/2026-01-06.md": "A #workout in the rain, then stretching. #health/mobility #workout/legs\n",
    "Areas/Health/Caffeine.md": (
        "---\naliases: [coffee]\ntags: health\n---\nCaffeine blocks adenosine receptors, so "
        "sleep pressure is felt later than it builds. #sleep\n\n```sh\n#not-a-tag in code\n"
        "```\nSee `#also-not` and [[Sleep#Deep sleep]].\n"
    ),
    "Areas/Health/Sleep.md": (
        "---\ntags:\n  - sleep\n  - '#workout'\n---\n# Sleep\n\n## Deep sleep\n\nMost deep "
        "sleep comes early in the night; [[Caffeine|coffee]] late in the day takes it away.\n"
    ),
    "Areas/Health/Training.md": (
        "---\ntags: [exercise, running]\n---\nEasy runs build the base that hard sessions spend. #exercise\n"
    ),
    "Resources/Retries.md": (
        "---\ntitle: Retries multiply load on a struggling server\ntags: [exercise]\n---\n"
        "Every client that retries a timeout adds a request to the queue that caused it.\n"
    ),
    "README.md": "# My vault\n\nWhere I keep what I learn. [[Sleep]]\n",
}
NOTES = [
    "Areas/Health/Caffeine.md",
    "Areas/Health/Sleep.md",
    "Areas/Health/Training.md",
    "Daily/2026-01-05.md",
    "Daily/2026-01-06.md",
    "Inbox/Untitled.md",
    "README.md",
    "Resources/Retries.md",
]


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)], catch_exceptions=False)


def vault(tmp_path: Path) -> Path:
    """The vault as its owner keeps it: a git repository of everything, `.obsidian/` included."""
    root = tmp_path / "vault"
    for path, text in VAULT.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "my vault")
    return root


def initialised(tmp_path: Path) -> Path:
    root = vault(tmp_path)
    assert run("init", root).exit_code == 0
    return root


def test_init_covers_every_note_and_names_what_it_leaves_out(tmp_path):
    root = vault(tmp_path)
    out = CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert "detected a vault KB: .obsidian/ (Obsidian's settings), 11 Markdown file(s)" in lines
    assert (
        "will read 8 note(s); leaves out .obsidian/ (Obsidian's settings); .trash/ (notes Obsidian deleted); "
        "Templates/ (the templates folder, from .obsidian/templates.json; 2 Markdown file(s)); Attachments/ (the "
        "attachments folder, from .obsidian/app.json; 1 Markdown file(s)); 1 attachment(s) and other non-Markdown "
        "file(s) (only notes are read)"
    ) in lines
    assert (
        'wrote knomit-judge.toml with [corpus] paths = ["**/*.md"], motif_keys = ["tags"], retract = "delete", '
        'front_matter = "optional", exclude = ["Templates/**", "Attachments/**"], inline_tags = true'
    ) in lines
    corpus = tomllib.loads((root / "knomit-judge.toml").read_text(encoding="utf-8"))["corpus"]
    assert corpus == {
        "paths": ["**/*.md"],
        "motif_keys": ["tags"],
        "retract": "delete",
        "front_matter": "optional",
        "exclude": ["Templates/**", "Attachments/**"],
        "inline_tags": True,
        "max_fact_bytes": 1048576,
    }
    assert ".obsidian/workspace*.json" in (root / ".gitignore").read_text().splitlines()
    assert "added .knomit/judge.db*, .obsidian/workspace*.json to .gitignore" in lines
    assert any(
        line.startswith(
            ".obsidian/workspace.json is committed, so .gitignore does not keep it out: "
            "`git rm --cached .obsidian/workspace.json`"
        )
        for line in lines
    )
    assert not (root / "facts").exists()
    assert git(root, "status", "--porcelain") == ""

    # the session reads what init said it would: every note, the template outside the folder left out and counted
    dry = json.loads(run("review", root, "--dry-run", "--json", "--judge", scripted(tmp_path)).stdout)
    assert dry["corpus"] == {
        "state": "read",
        "paths": ["**/*.md"],
        "files": 8,
        "read": 7,
        "skipped": 0,
        "why": "",
        "templates": 1,
    }
    assert dry["problems"] == []
    text = run("review", root, "--dry-run", "--judge", scripted(tmp_path)).stdout
    assert "corpus: read 7 of 8 fact files, 0 skipped, 1 template left out" in text


def test_every_note_is_a_fact_with_its_inline_and_front_matter_tags(tmp_path):
    from knomit_judge.config import load_config
    from knomit_judge.corpus import load_corpus

    root = initialised(tmp_path)
    corpus = load_corpus(root, layout=load_config(root).corpus)
    assert sorted(corpus.facts) == [p for p in NOTES if p != "Inbox/Untitled.md"]
    assert corpus.templates == ["Inbox/Untitled.md"] and corpus.problems == []
    daily, caffeine = corpus.facts["Daily/2026-01-05.md"], corpus.facts["Areas/Health/Caffeine.md"]
    # no front matter, no heading: titled by its file name, its tags read from the body
    assert (daily.title, daily.motifs) == ("2026-01-05", ("running", "health", "sleep"))
    assert daily.body.startswith("Went for a long run")
    # `tags: health` as one string, an inline tag beside it; none from the code block or the inline code
    assert (caffeine.title, caffeine.motifs, caffeine.aliases) == ("Caffeine", ("health", "sleep"), ("coffee",))
    # a value written with its '#' is the tag without it; nested tags are spellings of their own
    assert corpus.facts["Areas/Health/Sleep.md"].motifs == ("sleep", "workout")
    assert corpus.facts["Daily/2026-01-06.md"].motifs == ("workout", "health/mobility", "workout/legs")
    assert corpus.carriers["workout"] == ["Areas/Health/Sleep.md", "Daily/2026-01-06.md"]


def test_an_alias_merge_rewrites_tags_in_front_matter_and_inline_keeping_every_other_byte(tmp_path):
    root = initialised(tmp_path)
    before = {p: (root / p).read_bytes() for p in NOTES}
    judge = scripted(
        tmp_path,
        {
            "pass": "alias",
            "a": "exercise",
            "b": "workout",
            "reply": {"same": True, "mechanism": "Both name physical training done for fitness."},
        },
    )
    out = run("review", root, "--pass", "alias", "--judge", judge, "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["passes"]["alias"]["applied"] == 1, result
    assert "alias: merge motif 'workout' into 'exercise'" in git(root, "log", "--format=%s").splitlines()
    sleep, daily = (root / "Areas/Health/Sleep.md").read_text(), (root / "Daily/2026-01-06.md").read_text()
    # in front matter the tag keeps its '#', and the block form is rewritten in place (the list on one line)
    assert sleep == VAULT["Areas/Health/Sleep.md"].replace(
        "tags:\n  - sleep\n  - '#workout'\n", "tags: [sleep, '#exercise']\n"
    )
    # inline: the tag rewritten where it stands; the nested `#workout/legs` is a spelling of its own, left as it is
    assert daily == VAULT["Daily/2026-01-06.md"].replace("A #workout in", "A #exercise in")
    # a rewrite of inline tags alone gives the note no front matter
    assert not daily.startswith("---")
    sha = git(root, "log", "-1", "--format=%H", "--grep", "^Knomit-Pass: alias$").strip()
    assert sorted(git(root, "show", "--name-only", "--format=", sha).split()) == [
        ".knomit/verdicts/alias.jsonl",
        "Areas/Health/Sleep.md",
        "Daily/2026-01-06.md",
    ]
    for path in set(NOTES) - {"Areas/Health/Sleep.md", "Daily/2026-01-06.md"}:
        assert (root / path).read_bytes() == before[path], path
    # the merged notes read back with the survivor's spelling
    from knomit_judge.config import load_config
    from knomit_judge.corpus import load_corpus

    corpus = load_corpus(root, layout=load_config(root).corpus)
    assert "workout" not in corpus.carriers and "workout/legs" in corpus.carriers
    assert corpus.carriers["exercise"] == [
        "Areas/Health/Sleep.md",
        "Areas/Health/Training.md",
        "Daily/2026-01-06.md",
        "Resources/Retries.md",
    ]


def test_obsidian_rewriting_its_workspace_holds_no_decision_back(tmp_path):
    root = initialised(tmp_path)
    # Obsidian is open: it rewrites its workspace; an attachment was replaced too. Neither is a note.
    (root / ".obsidian/workspace.json").write_text('{"main": {"id": "b2"}, "lastOpenFiles": ["README.md"]}\n')
    (root / "Attachments/diagram.png").write_bytes(b"\x89PNG a new drawing\n")
    judge = scripted(
        tmp_path,
        {
            "pass": "alias",
            "a": "exercise",
            "b": "workout",
            "reply": {"same": True, "mechanism": "Both name physical training done for fitness."},
        },
    )
    result = json.loads(run("review", root, "--pass", "alias", "--judge", judge, "--json").stdout)
    assert result["passes"]["alias"]["applied"] == 1, result
    assert any(
        n.startswith("2 uncommitted change(s) outside the facts (e.g. .obsidian/workspace.json): left as they are")
        for n in result["notes"]
    ), result["notes"]
    assert not any("applying nothing" in n for n in result["notes"])
    # the decision committed its own files only: the person's changes are still theirs, uncommitted
    assert sorted(git(root, "status", "--porcelain").splitlines()) == [
        " M .obsidian/workspace.json",
        " M Attachments/diagram.png",
    ]
    assert json.loads((root / ".obsidian/workspace.json").read_text())["main"]["id"] == "b2"


def test_a_dirty_note_still_holds_every_decision(tmp_path):
    root = initialised(tmp_path)
    (root / "README.md").write_text(VAULT["README.md"] + "A line being written.\n")
    judge = scripted(
        tmp_path,
        {
            "pass": "alias",
            "a": "exercise",
            "b": "workout",
            "reply": {"same": True, "mechanism": "Both name physical training done for fitness."},
        },
    )
    result = json.loads(run("review", root, "--pass", "alias", "--judge", judge, "--json").stdout)
    assert result["passes"]["alias"]["applied"] == 0
    assert any(
        "uncommitted change(s) to facts (e.g. README.md): judging and storing, applying nothing" in n
        for n in result["notes"]
    )
    assert (root / "Areas/Health/Sleep.md").read_text() == VAULT["Areas/Health/Sleep.md"]


def test_a_folder_of_wikilinked_notes_without_obsidian_is_a_vault(tmp_path):
    root = tmp_path / "notes"
    for i in range(4):
        (root / "Notes" / f"Note {i}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / "Notes" / f"Note {i}.md").write_text(f"Thoughts on {i}, see [[Note {(i + 1) % 4}]]. #topic\n")
    (root / "templates").mkdir()
    (root / "templates" / "New note.md").write_text("# {{title}}\n\nCreated {{date}}\n")
    out = CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert (
        "detected a vault KB: 4 of 5 sampled Markdown files link with [[wikilinks]], 5 Markdown file(s)" in out.stdout
    )
    assert (
        "will read 4 note(s); leaves out templates/ (the templates folder, by its name; 1 Markdown file(s))"
        in out.stdout
    )
    assert "found 4 fact file(s): committing them with the configuration" in out.stdout
    corpus = tomllib.loads((root / "knomit-judge.toml").read_text(encoding="utf-8"))["corpus"]
    assert (corpus["front_matter"], corpus["exclude"], corpus["inline_tags"]) == ("optional", ["templates/**"], True)
    assert git(root, "ls-files").splitlines() == [
        ".gitignore",
        "Notes/Note 0.md",
        "Notes/Note 1.md",
        "Notes/Note 2.md",
        "Notes/Note 3.md",
        "knomit-judge.toml",
    ]
