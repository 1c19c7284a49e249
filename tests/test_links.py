"""A decision keeps every link: each form rewritten to the survivor and reverted, a decision that would break a link
refused, names resolved as Obsidian resolves them, and `knomit-judge links`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import git, make_repo, scripted

from knomit_judge.cli import cli
from knomit_judge.config import CorpusConfig
from knomit_judge.corpus import load_corpus
from knomit_judge.links import note_links, vault_of

LOSE = "notes/pg backups chat.md"
KEEP = "notes/Postgres backups.md"
CONFIG = '[corpus]\npaths = ["notes/**/*.md"]\nfront_matter = "optional"\nretract = "{retract}"\n'

VAULT = {
    LOSE: """---
aliases: [pg-backups]
tags: [backups]
---
# Postgres backups, from the chat

Nightly base backups with WAL archiving let us restore the database to any point in the last week.

## Restore drill

Restore to a scratch host every month and time it. ^drill
""",
    KEEP: """---
aliases:
  - pg backups
---
Nightly base backups and archived WAL allow a point-in-time restore of the database over the past seven days.

## Restore drill

Restore to a scratch host monthly and time how long it takes.
""",
    "notes/retry storms.md": """Every client that retries a timeout adds a request to the queue that caused it.
""",
    "notes/old.md": """---
status: retracted
---
An old note, retired before.
""",
    # outside the paths: notes of the repository that are no facts, relinked all the same
    "Runbook.md": """# Runbook

Backups: [[pg backups chat]], [[pg backups chat|the chat]], [[pg backups chat#Restore drill]],
[[pg backups chat#Postgres backups, from the chat|from the chat]], [[pg backups chat#^drill]], ![[pg backups chat]],
![[pg backups chat#^drill]], [[notes/pg backups chat]], [[pg-backups]], [[PG BACKUPS CHAT]], [[retry storms]].

| step | see |
|---|---|
| 1 | [[pg backups chat\\|chat]] |
| 2 | [[pg backups chat#Only here]] |

Never [[Nowhere]], nor [[old]]. Code: `[[pg backups chat]]`.

```md
[[pg backups chat]] and [x](notes/pg%20backups%20chat.md)
```
""",
    "ops/daily/2026-01-05.md": """Checked [the chat](../../notes/pg%20backups%20chat.md), [the drill](../../notes/pg%20backups%20chat.md#restore%20drill "drill"),
[from the root](/notes/pg%20backups%20chat.md) and [angled](<../../notes/pg backups chat.md>); ![diagram](../../img/pic.png).
""",
    "props.md": """---
related: "[[pg backups chat]]"
up:
  - "[[pg backups chat#Restore drill]]"
  - "[[Runbook]]"
links: [notes/pg backups chat.md]
---
Properties only.
""",
    "img/pic.png": "not really a picture",
}

RELINKED = {
    "Runbook.md": """# Runbook

Backups: [[Postgres backups]], [[Postgres backups|the chat]], [[Postgres backups#Restore drill]],
[[Postgres backups|from the chat]], [[Postgres backups|pg backups chat > ^drill]], ![[Postgres backups]],
![[Postgres backups]], [[notes/Postgres backups]], [[pg-backups]], [[Postgres backups]], [[retry storms]].

| step | see |
|---|---|
| 1 | [[Postgres backups\\|chat]] |
| 2 | [[Postgres backups\\|pg backups chat > Only here]] |

Never [[Nowhere]], nor [[old]]. Code: `[[pg backups chat]]`.

```md
[[pg backups chat]] and [x](notes/pg%20backups%20chat.md)
```
""",
    "ops/daily/2026-01-05.md": """Checked [the chat](../../notes/Postgres%20backups.md), [the drill](../../notes/Postgres%20backups.md#restore%20drill "drill"),
[from the root](/notes/Postgres%20backups.md) and [angled](<../../notes/Postgres backups.md>); ![diagram](../../img/pic.png).
""",
    "props.md": """---
related: "[[Postgres backups]]"
up:
  - "[[Postgres backups#Restore drill]]"
  - "[[Runbook]]"
links: [notes/Postgres backups.md]
---
Properties only.
""",
    KEEP: """---
aliases:
  - pg backups
  - pg-backups
  - Postgres backups, from the chat
  - pg backups chat
---
Nightly base backups and archived WAL allow a point-in-time restore of the database over the past seven days.

## Restore drill

Restore to a scratch host monthly and time how long it takes.
""",
}


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)], catch_exceptions=False)


def vault_repo(tmp_path: Path, retract: str = "delete", extra: dict[str, str] | None = None):
    repo = make_repo(tmp_path / "vault", {**VAULT, **(extra or {})})
    repo.write("knomit-judge.toml", CONFIG.format(retract=retract))
    repo.commit("a vault")
    return repo


def retract_reply(tmp_path: Path) -> str:
    return scripted(
        tmp_path,
        {
            "pass": "prune",
            "a": LOSE,
            "b": KEEP,
            "reply": {"decision": "retract", "redundant": "A", "rationale": "The chat note restates the backups note."},
        },
    )


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] not in (".git", ".knomit")
    }


def prune_commit(root: Path) -> str | None:
    shas = git(root, "log", "--format=%H", "--grep", "^Knomit-Pass: prune$").split()
    return shas[0] if shas else None


@pytest.mark.parametrize("retract", ["delete", "status"])
def test_every_link_form_is_pointed_at_the_survivor_in_one_commit_and_revert_restores_it(tmp_path, retract):
    repo = vault_repo(tmp_path, retract)
    before = files(repo.root)
    out = run("review", repo.root, "--judge", retract_reply(tmp_path), "--json")
    assert out.exit_code == 0, out.output
    sha = prune_commit(repo.root)
    assert sha, json.loads(out.stdout)["passes"]["prune"]
    for path, text in RELINKED.items():
        assert (repo.root / path).read_text(encoding="utf-8") == text, path
    changed = git(repo.root, "show", "--name-status", "--no-renames", "--format=", sha).split("\n")
    changed = dict(reversed(line.split("\t", 1)) for line in changed if line)
    assert changed == {
        ".knomit/verdicts/prune.jsonl": "A",
        LOSE: "D" if retract == "delete" else "M",
        **{path: "M" for path in RELINKED},
    }
    # the retired note keeps its own text and names the survivor
    if retract == "status":
        assert (repo.root / LOSE).read_text(encoding="utf-8").endswith(VAULT[LOSE].split("---\n", 2)[2])
        assert f"survivor: {KEEP}" in (repo.root / LOSE).read_text(encoding="utf-8")
    message = git(repo.root, "show", "-s", "--format=%B", sha)
    assert (
        f"Relinked to {KEEP}:\n- Runbook.md: 11 link(s) to {LOSE}\n- ops/daily/2026-01-05.md: 4 link(s) to {LOSE}\n"
        f"- props.md: 3 link(s) to {LOSE}\n" in message
    )
    assert f"- from {LOSE}: aliases: + pg-backups, Postgres backups, from the chat, pg backups chat" in message
    # after it, nothing leads to the retired note; the links broken before (to nothing, to a retracted note) stay so
    check = json.loads(run("links", repo.root, "--json").stdout)
    assert {(b["note"], b["link"], b["why"]) for b in check["broken"]} == {
        ("Runbook.md", "[[Nowhere]]", "nothing"),
        ("Runbook.md", "[[old]]", "retracted"),
    }

    verdict = next(
        v["id"] for v in json.loads(run("verdicts", repo.root, "--json").stdout)["verdicts"] if v["commit_sha"] == sha
    )
    undone = run("revert", verdict, repo.root)
    assert undone.exit_code == 0, undone.output
    # every relinked note, the survivor and the retired note, byte for byte
    assert files(repo.root) == before
    assert repo.status() == ""


def test_a_decision_that_would_break_a_link_is_refused_and_applied_once_the_link_is_mended(tmp_path):
    board = {
        "nodes": [{"id": "n1", "type": "file", "file": LOSE, "x": 0, "y": 0, "width": 400, "height": 400}],
        "edges": [],
    }
    repo = vault_repo(tmp_path, extra={"Board.canvas": json.dumps(board, indent="\t")})
    before = files(repo.root)
    out = run("review", repo.root, "--judge", retract_reply(tmp_path), "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    reason = (
        f"it would break 1 link(s): {LOSE} in Board.canvas would no longer lead to {KEEP} (relink by hand, "
        "then the next session applies it)"
    )
    [problem] = [p for p in result["problems"] if p["path"] == "Board.canvas"]
    assert problem["line"] is None and problem["reason"].endswith(f"(prune) not applied: {reason}")
    assert any(n.endswith(f"not applied: Board.canvas: {reason}") for n in result["passes"]["prune"]["notes"])
    assert prune_commit(repo.root) is None
    # nothing applied: no note relinked, the retired note still there
    assert files(repo.root) == before
    stored = [
        v
        for v in json.loads(run("verdicts", repo.root, "--pass", "prune", "--json").stdout)["verdicts"]
        if v["answer"] == "retract"
    ]
    # the verdict is recorded, unapplied
    assert len(stored) == 1 and stored[0]["commit_sha"] is None

    # a person moves the card, as Obsidian would have
    board["nodes"][0]["file"] = KEEP
    repo.write("Board.canvas", json.dumps(board, indent="\t"))
    repo.commit("move the card")
    # a judge that would call the pair distinct: the decision applied is the stored verdict, not asked again
    again = run(
        "review",
        repo.root,
        "--judge",
        scripted(
            tmp_path,
            {"pass": "prune", "a": LOSE, "b": KEEP, "reply": {"decision": "distinct", "rationale": "different."}},
        ),
        "--json",
    )
    assert again.exit_code == 0, again.output
    sha = prune_commit(repo.root)
    assert sha and f"Knomit-Verdict: {stored[0]['id']}" in git(repo.root, "show", "-s", "--format=%B", sha)
    assert (repo.root / "Runbook.md").read_text(encoding="utf-8") == RELINKED["Runbook.md"]


def test_links_lists_links_to_nothing_and_to_retracted_notes(tmp_path):
    repo = vault_repo(tmp_path)
    out = run("links", repo.root, "--json")
    assert out.exit_code == 1
    report = json.loads(out.stdout)
    assert report["broken"] == [
        {
            "note": "Runbook.md",
            "line": 12,
            "link": "[[Nowhere]]",
            "kind": "wikilink",
            "target": "Nowhere",
            "why": "nothing",
            "to": None,
        },
        {
            "note": "Runbook.md",
            "line": 12,
            "link": "[[old]]",
            "kind": "wikilink",
            "target": "old",
            "why": "retracted",
            "to": "notes/old.md",
        },
    ]
    assert (report["nothing"], report["retracted"]) == (1, 1)
    # every note but the retracted one, and every link outside code: the fine ones are counted, not listed
    assert report["notes"] == 6
    # Runbook's, the daily note's, props' (3 in values, 1 in `links:`)
    assert report["links"] == 15 + 5 + 4
    text = run("links", repo.root)
    assert text.stdout.splitlines() == [
        "links: 24 in 6 note(s); 2 broken (1 to nothing, 1 to a retracted note)",
        "Runbook.md:12: [[Nowhere]] leads to no note or file",
        "Runbook.md:12: [[old]] leads to the retracted notes/old.md",
    ]

    repo.write("Runbook.md", VAULT["Runbook.md"].replace("Never [[Nowhere]], nor [[old]].", "Never."))
    repo.commit("mend")
    fine = run("links", repo.root, "--json")
    assert fine.exit_code == 0 and json.loads(fine.stdout)["broken"] == []


NAMES = {
    "a/x.md": "x in a",
    "b/x.md": "x in b",
    "deep/er/x.md": "x deep",
    "top.md": "top",
    "c/y z.md": "---\naliases: [why, shared]\n---\ny z",
    "d/w.md": "---\naliases: [shared]\n---\nw",
    "e/gone.md": "---\nstatus: retracted\naliases: [ghost]\n---\ngone",
    "img/pic.png": "png",
}


@pytest.mark.parametrize(
    "note, written, target",
    [
        # an ambiguous name: the one in the linking note's folder
        ("a/n.md", "[[x]]", "a/x.md"),
        # else the shortest path (then the first in path order)
        ("top2.md", "[[x]]", "a/x.md"),
        # case-insensitive; deep/er/x.md is not in deep/
        ("deep/n.md", "[[X]]", "a/x.md"),
        ("deep/er/n.md", "[[x]]", "deep/er/x.md"),
        # a path from the root
        ("top2.md", "[[b/x]]", "b/x.md"),
        ("top2.md", "[[er/x]]", "deep/er/x.md"),  # a path's suffix
        ("deep/n.md", "[[er/x]]", "deep/er/x.md"),  # from the note's folder
        ("top2.md", "[[x.md]]", "a/x.md"),
        ("top2.md", "[[y z#Part|text]]", "c/y z.md"),
        # an alias of one active note
        ("top2.md", "[[why]]", "c/y z.md"),
        # an alias two notes share leads to nothing
        ("top2.md", "[[shared]]", None),
        # an alias only a retracted note has
        ("top2.md", "[[ghost]]", None),
        # its file name still leads to it (broken: retracted)
        ("top2.md", "[[gone]]", "e/gone.md"),
        ("top2.md", "![[pic.png]]", "img/pic.png"),
        # a Markdown link: from its folder first
        ("c/n.md", "[t](y%20z.md)", "c/y z.md"),
        ("c/n.md", "[t](../top.md)", "top.md"),
        ("c/n.md", "[t](/a/x.md)", "a/x.md"),
        ("c/n.md", "[t](<y z.md>)", "c/y z.md"),
        # climbs out of the repository
        ("c/n.md", "[t](../../outside.md)", None),
        ("top2.md", "[[#Part]]", "top2.md"),  # the note itself
    ],
)
def test_names_resolve_as_obsidian_resolves_them(tmp_path, note, written, target):
    for path, text in {**NAMES, note: f"{written}\n"}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    corpus = load_corpus(tmp_path, layout=CorpusConfig(paths=["**/*.md"], front_matter="optional"))
    vault = vault_of(corpus)
    [link] = vault.links[note]
    assert vault.resolve(link)[0] == target


def test_links_inside_code_are_not_links_and_each_form_is_read():
    text = (
        '---\nrelated: "[[p]]"\nlinks: [facts/q.md]\n---\n[[a]] `[[b]]` ``x [[c]] y`` ![[d#h|t]] [m](e%20f.md#g)\n'
        "> ```\n> [[in a callout's code]]\n> ```\n~~~~\n[[tilde]]\n~~~~\n[u](https://x.org/[[z]]) [[t\\|d]]\n"
    )
    got = [(k.kind, k.target, k.subpath, k.display) for k in note_links("n.md", text)]
    assert got == [
        ("property", "p", "", None),
        ("path", "facts/q.md", "", None),
        ("wikilink", "a", "", None),
        ("embed", "d", "#h", "t"),
        ("markdown", "e f.md", "#g", "m"),
        ("wikilink", "t", "", "d"),
    ]


def test_the_survivor_takes_names_that_lead_nowhere_else_and_keeps_its_keys_shape(tmp_path):
    from knomit_judge.passes.prune import retire

    notes = {
        "n/lose.md": "---\nalias: old name\n---\n# Lose title\nbody one",
        "n/keep.md": "---\nalias: keep name\n---\nbody two",
        "n/Lose title.md": "another note whose file name is the retired note's title",
        "n/linker.md": "[[lose]]",
    }
    for path, text in notes.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    corpus = load_corpus(tmp_path, layout=CorpusConfig(paths=["n/**/*.md"], front_matter="optional"))
    carried: list[str] = []
    writes = retire(corpus, corpus.facts["n/lose.md"], corpus.facts["n/keep.md"], "v1", absorb=True, carried=carried)
    # `alias` (one name) becomes a list under the same key; the title is another note's name: not taken
    assert writes["n/keep.md"] == "---\nalias: [keep name, old name, lose]\n---\nbody two"
    assert writes["n/linker.md"] == "[[keep]]"
    assert carried[-1] == "- from n/lose.md: aliases: + old name, lose"


def test_a_link_by_name_from_outside_code_in_a_facts_corpus_and_a_kb_ref_are_relinked_as_before(tmp_path):
    """Our facts/ layout: `links:` paths relinked as before; no alias is written where no note has one."""
    from helpers import fact_text

    from knomit_judge.passes.prune import retire

    facts = {
        "facts/a.md": fact_text("A", links=["facts/b.md", "facts/c.md"]),
        "facts/b.md": fact_text("B"),
        "facts/c.md": fact_text("C"),
    }
    for path, text in facts.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    corpus = load_corpus(tmp_path)
    writes = retire(corpus, corpus.facts["facts/b.md"], corpus.facts["facts/c.md"], "v1", absorb=False)
    assert writes == {
        "facts/b.md": facts["facts/b.md"].replace(
            "---\nA claim", "status: retracted\nretracted_by: v1\nsurvivor: facts/c.md\n---\nA claim"
        ),
        "facts/a.md": facts["facts/a.md"].replace('links: ["facts/b.md", "facts/c.md"]', "links: [facts/c.md]"),
    }


def test_a_git_ignored_note_is_no_note_of_the_corpus_and_never_written(tmp_path):
    secret = "Private: [[pg backups chat]]\n"
    repo = vault_repo(tmp_path, extra={".gitignore": ".knomit/judge.db*\nprivate/\n", "private/mine.md": secret})
    assert "private" not in git(repo.root, "ls-files")
    out = run("review", repo.root, "--judge", retract_reply(tmp_path), "--json")
    assert out.exit_code == 0, out.output
    sha = prune_commit(repo.root)
    assert sha and "private/" not in git(repo.root, "show", "--name-only", "--format=", sha)
    assert (repo.root / "private/mine.md").read_text(encoding="utf-8") == secret
    assert "private/" not in run("links", repo.root).stdout


@pytest.mark.parametrize("uncommitted", ["edited", "untracked"])
def test_a_decision_waits_for_a_note_it_would_relink_that_someone_has_not_committed(tmp_path, uncommitted):
    """A note outside the facts holds no decision, but a commit of one being edited (or never added) would take in
    someone's unfinished work: the decision that would relink it waits, and applies once it is committed."""
    mine = "Drafting: [[pg backups chat]] and more.\n"
    repo = vault_repo(tmp_path, extra={"drafts/mine.md": "Drafting.\n"} if uncommitted == "edited" else None)
    # a tracked note edited, or a new one never added
    repo.write("drafts/mine.md", mine)
    out = run("review", repo.root, "--judge", retract_reply(tmp_path), "--json")
    assert out.exit_code == 0, out.output
    assert prune_commit(repo.root) is None
    assert any(
        "waits: it would write drafts/mine.md, which has uncommitted changes" in n
        for n in json.loads(out.stdout)["passes"]["prune"]["notes"]
    )
    assert (repo.root / "drafts/mine.md").read_text(encoding="utf-8") == mine
    assert (repo.root / LOSE).exists()

    repo.commit("the draft")
    again = run("review", repo.root, "--judge", retract_reply(tmp_path), "--json")
    assert again.exit_code == 0, again.output
    sha = prune_commit(repo.root)
    assert sha and "drafts/mine.md" in git(repo.root, "show", "--name-only", "--format=", sha)
    assert (repo.root / "drafts/mine.md").read_text(encoding="utf-8") == "Drafting: [[Postgres backups]] and more.\n"
