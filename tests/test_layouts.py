"""The corpora users already have, reviewed in place: a knomit KB and a folder of notes with tags."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import FIXTURE, INCIDENT, KEEP, LOSE, REPO_ID, git, knomit_kb, run, use_entities, write_config
from knomit_format import NotAKnomitFact, knomit_parse

from knomit_judge.cli import cli
from knomit_judge.config import ConfigError, parse_config
from knomit_judge.corpus import parse_fact
from knomit_judge.errors import BadFact
from knomit_judge.rewrite import absorbed, relinked_changes, rewrite

REPLIES = FIXTURE / "judge-replies.jsonl"
DECISION = "kb/decisions/accepted/5d2c8b7a.md"
UNTOUCHED = [
    "kb/conventions/testing/1f8e6a3b.md",
    "kb/gotchas/libraries/2e7f9a41.md",
    "kb/meta/ontology/6c1d0b93.md",
    "kb/drafts/notes.md",
    ".knomit/ontology.yaml",
    ".knomit/jobs/nightly-review.md",
]


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts[:1] and "judge.db" not in p.name
    }


def knomit_readable(root: Path) -> dict[str, str]:
    """Every file under kb/ with what knomit's reader says of it: 'ok' or the reason it refuses it."""
    out = {}
    for p in sorted((root / "kb").rglob("*.md")):
        try:
            knomit_parse(p.read_text(encoding="utf-8"))
            out[p.relative_to(root).as_posix()] = "ok"
        except NotAKnomitFact as e:
            out[p.relative_to(root).as_posix()] = str(e)
    return out


def test_init_detects_a_knomit_kb_and_writes_its_settings(tmp_path):
    root = knomit_kb(tmp_path)
    out = CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    assert out.exit_code == 0
    assert "detected a knomit KB: 8 Markdown file(s) under kb/, .knomit/ontology.yaml" in out.stdout
    # the motif keys its facts carry (issue 54): none of the sampled facts has `motifs:`, they have `entities:`
    assert 'with [corpus] paths = ["kb/**/*.md"], motif_keys = ["entities"], retract = "delete"' in out.stdout
    assert (
        "alias reviews the spellings under entities (of 8 sampled facts: `motifs:` in 0, `entities:` in 6); "
        "merged entity spellings are rewritten inside `entities`"
    ) in out.stdout
    # no hint to set what init already set
    assert "set [corpus] motif_keys" not in out.stdout
    toml = (root / "knomit-judge.toml").read_text(encoding="utf-8")
    config = parse_config(__import__("tomllib").loads(toml))
    assert (config.corpus.paths, config.corpus.motif_keys, config.corpus.retract) == (
        ["kb/**/*.md"],
        ["entities"],
        "delete",
    )
    assert (config.corpus.exclude, config.corpus.inline_tags, config.corpus.front_matter) == ([], False, "required")
    # not our layout: no facts/ made next to kb/
    assert not (root / "facts").exists()


def test_a_plain_corpus_is_not_taken_for_a_knomit_kb(tmp_path):
    root = tmp_path / "plain"
    (root / "kb").mkdir(parents=True)
    (root / "kb" / "readme.md").write_text("Just a readme, no front matter.\n")
    out = run("init", root)
    assert "detected" not in out.stdout
    assert 'paths = ["facts/**/*.md"]' in (root / "knomit-judge.toml").read_text()


def test_review_merges_entity_spellings_and_retracts_by_deletion_leaving_knomit_able_to_read_it(tmp_path):
    root = knomit_kb(tmp_path)
    before = files(root)
    readable_before = knomit_readable(root)
    assert readable_before["kb/drafts/notes.md"] == "missing opening frontmatter delimiter"
    assert sum(v == "ok" for v in readable_before.values()) == 7
    run("init", root)
    use_entities(root)

    out = run("review", root, "--judge", f"scripted:{REPLIES}", "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["corpus"] == {
        "state": "read",
        "paths": ["kb/**/*.md"],
        "files": 8,
        "read": 7,
        "skipped": 1,
        "why": "",
        "templates": 0,
    }
    assert result["problems"] == [
        {
            "path": "kb/drafts/notes.md",
            "line": 1,
            "reason": "no YAML front matter (the file must start with a '---' line and close it with another)",
        }
    ]
    assert result["passes"]["alias"]["applied"] == 1 and result["passes"]["prune"]["applied"] == 1
    subjects = git(root, "log", "--format=%s").splitlines()
    assert "alias: merge motif 'Postgres' into 'PostgreSQL'" in subjects
    assert f"prune: merge {LOSE} into {KEEP}" in subjects

    # The retired fact is gone, in the decision's own commit, whose message names survivor and verdict.
    assert not (root / LOSE).exists()
    sha = git(root, "log", "--format=%H", "--grep", "^Knomit-Pass: prune$").split()[0]
    changed = git(root, "show", "--name-status", "--format=", sha).split()
    assert dict(zip(changed[1::2], changed[::2])) == {
        ".knomit/verdicts/prune.jsonl": "A",
        KEEP: "M",
        LOSE: "D",
        INCIDENT: "M",
    }
    message = git(root, "show", "-s", "--format=%B", sha)
    assert f"{KEEP} survives" in message and "Knomit-Verdict: " in message and "Knomit-Rationale: Both state" in message

    # The survivor took in the other fact in knomit's types: a summed count, unioned lists, no title key.
    keep = knomit_parse((root / KEEP).read_text())
    assert keep["sources"] == 3
    assert keep["entities"] == ["PostgreSQL", "PgBouncer", "connection pool"]
    assert keep["refs"] == [
        "https://www.postgresql.org/docs/current/runtime-config-connection.html",
        f"{REPO_ID}kb/incidents/bugs/7c9d1e2f.md",
        "https://example.org/notes/pgbouncer-transaction-mode",
    ]
    text = (root / KEEP).read_text()
    assert "title:" not in text and text.count("# Idle transactions hold pooled connections") == 1
    assert text.split("---\n")[2].startswith("# Idle transactions")
    # The incident's kb:// ref to the retired fact now names the survivor, in the same form.
    assert knomit_parse((root / INCIDENT).read_text())["refs"][0] == f"{REPO_ID}{KEEP}"
    # The alias rewrote the spelling inside `entities`, where it came from.
    assert knomit_parse((root / DECISION).read_text())["entities"] == ["PostgreSQL", "Redis", "session store"]

    after = files(root)
    for path in UNTOUCHED:
        assert after[path] == before[path], path
    assert knomit_readable(root) == {p: v for p, v in readable_before.items() if p != LOSE}
    assert git(root, "status", "--porcelain") == ""

    status = run("status", root)
    assert "  corpus: read 7 of 8 fact files, 1 skipped" in status.stdout

    # revert gives the deleted fact back byte for byte (as it was when the decision was taken).
    vid = git(root, "show", "-s", "--format=%(trailers:key=Knomit-Verdict,valueonly)", sha).strip()
    assert run("revert", vid, root).exit_code == 0
    assert (root / LOSE).read_bytes() == git(root, "show", f"{sha}^:{LOSE}").encode()
    assert (root / KEEP).read_bytes() == git(root, "show", f"{sha}^:{KEEP}").encode()
    assert knomit_readable(root)[LOSE] == "ok"


def test_facts_moved_out_of_the_configured_paths_are_broken_not_nothing_qualified(tmp_path):
    root = knomit_kb(tmp_path)
    run("init", root)
    git(root, "mv", "kb", "notes")
    git(root, "commit", "-q", "-m", "moved")
    out = run("review", root, "--judge", f"scripted:{REPLIES}", "--json")
    assert out.exit_code == 1
    result = json.loads(out.stdout)
    assert result["corpus"]["state"] == "broken" and result["corpus"]["files"] == 0
    assert "paths kb/**/*.md matched no file" in result["corpus"]["why"]
    assert "8 in notes/" in result["corpus"]["why"]
    assert {name: p["state"] for name, p in result["passes"].items()} == {
        "exact": "broken",
        "alias": "broken",
        "prune": "broken",
        "discovery": "broken",
    }
    text = run("review", root, "--dry-run")
    assert text.exit_code == 1
    # the dry run's summary first, then the corpus line
    assert text.stdout.splitlines()[1].startswith("corpus: broken - paths kb/**/*.md matched no file")
    assert "nothing-qualified" not in text.stdout
    assert "  corpus: broken - paths kb/**/*.md matched no file" in run("status", root).stdout


def test_no_fact_read_is_broken_and_names_the_skips(tmp_path):
    root = knomit_kb(tmp_path)
    run("init", root)
    for p in (root / "kb").rglob("*.md"):
        p.write_text("no front matter at all\n")
    git(root, "commit", "-q", "-am", "broken")
    out = run("review", root, "--json", "--judge", f"scripted:{REPLIES}")
    assert out.exit_code == 1
    corpus = json.loads(out.stdout)["corpus"]
    assert (corpus["state"], corpus["files"], corpus["read"], corpus["skipped"]) == ("broken", 8, 0, 8)
    assert corpus["why"].startswith("read 0 of 8 fact file(s) matched by kb/**/*.md, 8 skipped: kb/")
    assert ":1: no YAML front matter" in corpus["why"]


def test_a_user_edit_inside_dot_knomit_is_never_committed_and_holds_back_no_decision(tmp_path):
    # knomit's ontology is no fact and no decision writes it (issue 50): decisions go on, each committing only its
    # own files; the person's edit stays theirs, uncommitted and untouched.
    root = knomit_kb(tmp_path)
    run("init", root)
    use_entities(root)
    (root / ".knomit" / "ontology.yaml").write_text("id: edited by hand\n")
    out = run("review", root, "--judge", f"scripted:{REPLIES}", "--json")
    result = json.loads(out.stdout)
    assert any("1 uncommitted change(s) outside the facts (e.g. .knomit/ontology.yaml)" in n for n in result["notes"])
    assert result["passes"]["alias"]["applied"] == 1 and not (root / LOSE).exists()
    for sha in git(root, "log", "--format=%H").split():
        assert (
            ".knomit/ontology.yaml" not in git(root, "show", "--name-only", "--format=", sha).split()[1:]
            or sha == git(root, "rev-list", "--max-parents=0", "HEAD").strip()
        )
    assert git(root, "status", "--porcelain").split() == ["M", ".knomit/ontology.yaml"]
    assert (root / ".knomit" / "ontology.yaml").read_text() == "id: edited by hand\n"


def test_an_uncommitted_edit_to_a_fact_still_holds_every_decision(tmp_path):
    root = knomit_kb(tmp_path)
    run("init", root)
    (root / UNTOUCHED[0]).write_text((root / UNTOUCHED[0]).read_text() + "\nA line being written.\n")
    result = json.loads(run("review", root, "--judge", f"scripted:{REPLIES}", "--json").stdout)
    assert any(
        f"uncommitted change(s) to facts (e.g. {UNTOUCHED[0]}): judging and storing, applying nothing" in n
        for n in result["notes"]
    )
    assert result["passes"]["alias"]["applied"] == 0 and (root / LOSE).exists()


NOTES = {
    "notes/2026/retries.md": "---\ntags: [Retry Storm, load]\ndate: 2026-01-05\n---\n# Retries multiply load on a "
    "struggling server\n\nEvery client that retries a timeout adds a request to the queue "
    "that caused it.\n",
    "notes/2026/thundering.md": "---\ntags: [retry storms]\n---\n# Synchronised retries arrive as a wave\n\nClients "
    "that retry on the same schedule hit the server together after an outage.\n",
    "notes/cache.md": "---\ntitle: A cold cache sends every read to the database\ntags: [cache]\n---\nAfter a "
    "deploy the hit rate is zero for minutes.\n",
    "README.md": "# My notes\n\nNot a note.\n",
}


def test_a_folder_of_notes_with_tags(tmp_path):
    root = tmp_path / "notes-repo"
    for path, text in NOTES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root.parent, "init", "-q", "-b", "main", str(root))
    run("init", root)
    toml = (root / "knomit-judge.toml").read_text()
    toml = toml.replace('paths = ["facts/**/*.md"]', 'paths = ["notes/**/*.md"]').replace(
        'motif_keys = ["motifs"]', 'motif_keys = ["tags"]'
    )
    (root / "knomit-judge.toml").write_text(toml)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "notes")
    replies = tmp_path / "replies.jsonl"
    replies.write_text(
        json.dumps(
            {
                "pass": "alias",
                "a": "Retry Storm",
                "b": "retry storms",
                "reply": {"same": True, "mechanism": "Both name retries that pile onto an overloaded server."},
            }
        )
        + "\n"
    )
    out = run("review", root, "--pass", "alias", "--judge", f"scripted:{replies}", "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["corpus"]["read"] == 3 and result["passes"]["alias"]["applied"] == 1
    merged = [(root / p).read_text() for p in ("notes/2026/retries.md", "notes/2026/thundering.md")]
    # one spelling survives (fixed rules: equal carriers and confidence, then the smaller string)
    assert merged[0].startswith("---\ntags: [Retry Storm, load]\ndate: 2026-01-05\n---\n# Retries")
    assert merged[1].startswith("---\ntags: [Retry Storm]\n---\n# Synchronised")
    assert (root / "README.md").read_text() == NOTES["README.md"]


def test_title_from_the_heading_or_the_key_and_a_rewrite_never_adds_one():
    fact = parse_fact(
        "kb/a.md",
        "---\nsources: 2\nrefs: ['https://x.org/a', 'kb://0123456789ab/kb/b.md', "
        "'kb/c.md', 'src://abc/x.go@1']\nentities: [A b]\n---\n\n# The title\n\nThe body.\n",
        ("entities",),
    )
    assert (fact.title, fact.body, fact.motifs, fact.source_count) == ("The title", "The body.", ("A b",), 2)
    assert fact.links == ("kb/b.md", "kb/c.md")
    assert "https://x.org/a" in fact.sources
    keyed = parse_fact("f.md", "---\ntitle: From the key\n---\n# A heading in the body\n")
    assert (keyed.title, keyed.body) == ("From the key", "# A heading in the body")
    text = rewrite(fact.text, {"sources": 3})
    assert text == fact.text.replace("sources: 2", "sources: 3") and "title:" not in text
    # no key and no heading: titled by its file name, as Obsidian titles every note (issue 50)
    named = parse_fact("kb/Caffeine and sleep.md", "---\nsources: 1\n---\nJust prose.\n")
    assert (named.title, named.body) == ("Caffeine and sleep", "Just prose.")
    # the heading is there, just empty: said so, with its line
    for empty in ("# ", "#", "##  "):
        with pytest.raises(BadFact, match=r"the '# ' heading is empty") as e:
            parse_fact("kb/x.md", f"---\nsources: 1\n---\n\n{empty}\n\nJust prose.\n")
        assert e.value.line == 5 and "neither" not in str(e.value)


def test_a_merge_keeps_each_keys_type_and_relinking_keeps_the_ref_form():
    keep = parse_fact(
        "kb/k.md",
        "---\nsources: 2\nrefs: ['https://a.org', 'kb://0123456789ab/kb/l.md']\nentities: [X]\n---\n# K\n",
        ("entities",),
    )
    lose = parse_fact(
        "kb/l.md",
        "---\nsources: 4\nrefs: ['https://b.org', 'kb/k.md']\nentities: [Y, X]\ndomain: [ops]\n---\n# L\n",
        ("entities",),
    )
    assert absorbed(keep, lose, ("entities",)) == {
        "sources": 6,
        "refs": ["https://a.org", "https://b.org"],
        "entities": ["X", "Y"],
        "domain": ["ops"],
    }
    listed = parse_fact("f/k.md", "---\ntitle: K\nsources: [s1]\n---\nbody\n")
    other = parse_fact("f/l.md", "---\ntitle: L\nsources: [s2, s1]\nlinks: [f/k.md]\n---\nbody\n")
    assert absorbed(listed, other) == {"sources": ["s1", "s2"]}
    linker = parse_fact("kb/m.md", "---\nrefs: ['kb://0123456789ab/kb/l.md', 'kb/l.md', 'https://c.org']\n---\n# M\n")
    assert relinked_changes(linker, "kb/l.md", "kb/k.md") == {
        "refs": ["kb://0123456789ab/kb/k.md", "kb/k.md", "https://c.org"]
    }


@pytest.mark.parametrize(
    "corpus, message",
    [
        ({"retract": "remove"}, "corpus.retract: 'remove' is not one of 'status', 'delete'"),
        ({"paths": []}, "corpus.paths: expected a non-empty list"),
        ({"paths": ["../elsewhere/*.md"]}, "must be relative to the corpus root"),
        ({"motif_keys": "tags"}, "corpus.motif_keys: expected list"),
        ({"motif_keys": ["a b"]}, "is not a front-matter key name"),
        ({"exclude": ["../elsewhere/**"]}, "corpus.exclude: '../elsewhere/**' must be relative to the corpus root"),
        (
            {"exclude": ["Templates/"]},
            "corpus.exclude: 'Templates/' names a folder: write 'Templates/**' for every file",
        ),
        ({"exclude": "Templates/**"}, "corpus.exclude: expected list"),
        ({"exclude": [""]}, "corpus.exclude: expected a non-empty list of non-empty strings"),
        ({"inline_tags": "yes"}, "corpus.inline_tags: expected bool"),
    ],
)
def test_corpus_settings_are_checked(corpus, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config({"corpus": corpus})


def test_exclude_leaves_files_out_of_the_paths(tmp_path):
    from knomit_judge.corpus import load_corpus
    from knomit_judge.layout import fact_paths

    config = parse_config({"corpus": {"paths": ["**/*.md"], "exclude": ["Templates/**", "**/*.excalidraw.md"]}})
    assert parse_config({"corpus": {"exclude": []}}).corpus.exclude == []
    for path in ("a.md", "Templates/t.md", "Templates/deep/t.md", "x/Templates/t.md", "x/d.excalidraw.md"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("---\ntitle: T\n---\nbody\n")
    assert fact_paths(tmp_path, config.corpus.paths, config.corpus.exclude) == ["a.md", "x/Templates/t.md"]
    corpus = load_corpus(tmp_path, layout=config.corpus)
    assert sorted(corpus.facts) == ["a.md", "x/Templates/t.md"] and corpus.files == 2
    assert corpus.covers("a.md") and not corpus.covers("Templates/t.md")


def test_write_config_helper_still_works_with_the_new_keys(corpus_repo):
    write_config(corpus_repo, '[corpus]\npaths = ["facts/ops/*.md"]\nretract = "delete"\n')
    out = run("review", corpus_repo.root, "--dry-run", "--json", "--pass", "alias")
    assert json.loads(out.stdout)["corpus"]["files"] == 4


def test_keys_knomit_writes_and_this_tool_never_uses_do_not_stop_a_fact_being_read():
    text = (
        "---\nkind: pragmatic\ntype: heuristic\ndomain: [ops]\nconfidence: 0.9\nsources: 1\nevidence_weight: 2.5\n"
        "origin: authored\nexpires: 2026-13-45\ncontext: {task: t-17, verdict: agree}\nentities: ['No', '2.0']\n"
        "refs: []\n---\n# A title\n\nA body.\n"
    )
    fact = parse_fact("kb/x.md", text, ("entities",))
    assert (fact.title, fact.motifs, fact.source_count, fact.links) == ("A title", ("No", "2.0"), 1, ())
    # an impossible date in a key we do not use is text to us, never a crash
    assert rewrite(text, {"sources": 2}).count("expires: 2026-13-45\n") == 1


def test_a_proposed_fact_takes_the_shape_of_its_group(tmp_path):
    from knomit_judge.config import CorpusConfig
    from knomit_judge.corpus import Corpus
    from knomit_judge.passes.discovery import new_fact_path, proposal_text, proposed

    member = parse_fact(KEEP, (FIXTURE / KEEP).read_text(), ("entities",))
    corpus = Corpus(
        tmp_path, {KEEP: member}, [], CorpusConfig(paths=["kb/**/*.md"], motif_keys=["entities"], retract="delete")
    )
    path = new_fact_path(corpus, "pool-starvation.md")
    text = proposal_text(
        corpus,
        member,
        {"title": "Pool starvation hides behind an idle database", "body": "B.", "motifs": ["pool-starvation"]},
        confidence=0.4,
        verdict_id="v123",
        links=[KEEP],
    )
    assert path == "kb/discovered/pool-starvation.md"
    read = knomit_parse(text)
    assert (read["title"], read["sources"], read["entities"]) == (
        "Pool starvation hides behind an idle database",
        1,
        ["pool-starvation"],
    )
    assert read["refs"] == [KEEP, "knomit-judge:v123"] and "title:" not in text
    fact = corpus.parse(path, text)
    assert proposed(fact) and fact.links == (KEEP,)
    ours = parse_fact("facts/a.md", "---\ntitle: A\nsources: [s]\nlinks: []\n---\nbody\n")
    mine = proposal_text(
        Corpus(tmp_path, {}, []),
        ours,
        {"title": "T", "body": "B.", "motifs": ["m"]},
        confidence=0.4,
        verdict_id="v1",
        links=["facts/a.md"],
    )
    assert (
        mine
        == "---\ntitle: T\nmotifs: [m]\nconfidence: 0.4\nsources: ['knomit-judge:v1']\nlinks: [facts/a.md]\n---\nB.\n"
    )


@pytest.mark.parametrize(
    "path, globs, hit",
    [
        ("kb/a/b/c.md", ["kb/**/*.md"], True),
        ("kb/c.md", ["kb/**/*.md"], True),
        ("x/kb/c.md", ["kb/**/*.md"], False),
        ("notes/a.md", ["notes/*.md"], True),
        ("notes/deep/a.md", ["notes/*.md"], False),
        ("a.md", ["**/*.md"], True),
        ("facts/[draft].md", ["facts/[[]draft].md"], True),
        ("facts/a.txt", ["facts/**/*.md", "facts/*.txt"], True),
    ],
)
def test_fact_path_globs(path, globs, hit):
    from knomit_judge.layout import matches

    assert matches(path, globs) is hit


def test_the_inbox_reads_the_kb_with_its_layout(tmp_path):
    # The inbox must read facts where [corpus] paths says, or a person labels with no evidence in front of them.
    root = knomit_kb(tmp_path)
    run("init", root)
    use_entities(root)
    assert run("review", root, "--judge", f"scripted:{REPLIES}").exit_code == 0
    items = json.loads(run("inbox", root, "--json").stdout)["items"]
    alias = [i for i in items if i["pass"] == "alias" and i["kind"] == "sample"]
    assert alias, items
    evidence = alias[0]["evidence"]
    keep = alias[0]["subject"]["a"] if evidence[alias[0]["subject"]["a"]] else alias[0]["subject"]["b"]
    assert keep == "PostgreSQL"
    titles = {knomit_parse((root / p).read_text())["title"] for p in (KEEP, DECISION)}
    assert titles <= set(evidence["PostgreSQL"]) | set(evidence["carriers rewritten by the commit"])
    # titles, not paths (a carrier the prune decision deleted since is named by its path)
    assert [t for t in evidence["carriers rewritten by the commit"] if t.startswith("kb/")] == [LOSE]


def test_a_session_whose_motif_keys_no_fact_carries_says_so(tmp_path):
    # issue 54: `alias: nothing-qualified - candidates 0` alone, on a KB whose facts keep their spellings elsewhere
    root = knomit_kb(tmp_path)
    run("init", root)
    toml = (root / "knomit-judge.toml").read_text(encoding="utf-8")
    (root / "knomit-judge.toml").write_text(toml.replace('motif_keys = ["entities"]', 'motif_keys = ["motifs"]'))
    git(root, "commit", "-q", "-am", "motifs, as init used to write")
    dry = json.loads(run("review", root, "--dry-run", "--json", "--judge", f"scripted:{REPLIES}").stdout)
    alias = dry["passes"]["alias"]
    assert alias["state"] == "nothing-qualified"
    assert (
        'no fact carries a motif under [corpus] motif_keys = ["motifs"]; 6 of 7 sampled facts carry `entities:` '
        'lists: set motif_keys = ["entities"]'
    ) in alias["notes"]
    # with the keys the facts carry, nothing of the kind is said
    (root / "knomit-judge.toml").write_text(toml)
    git(root, "commit", "-q", "-am", "entities")
    dry = json.loads(run("review", root, "--dry-run", "--json", "--judge", f"scripted:{REPLIES}").stdout)
    assert not any("no fact carries" in n for n in dry["passes"]["alias"]["notes"])


def test_init_keeps_motifs_where_facts_carry_them_and_names_entities_only_where_they_are(tmp_path):
    root = knomit_kb(tmp_path)
    fact = root / UNTOUCHED[0]
    fact.write_text(fact.read_text().replace("---\n", "---\nmotifs: [test-isolation]\n", 1))
    git(root, "commit", "-q", "-am", "one fact with motifs")
    # not -q: what init says is the test
    out = CliRunner().invoke(cli, ["init", str(root)], catch_exceptions=False)
    assert 'motif_keys = ["motifs"]' in (root / "knomit-judge.toml").read_text()
    assert (
        "alias reviews the spellings under motifs (of 8 sampled facts: `motifs:` in 1, `entities:` in 6); to merge "
        'entity spellings as well (Postgres / PostgreSQL), set [corpus] motif_keys = ["motifs", "entities"]'
        in out.stdout.splitlines()
    )
