"""The corpus model: parsing, content ids, byte-preserving rewrites."""

import pytest

from knomit_judge.corpus import content_id, exact_key, load_corpus, parse_fact
from knomit_judge.errors import BadFact
from knomit_judge.rewrite import rewrite

TEXT = """---
title: A latch holds a breaker open
motifs: [latch, penalty-blocks-own-recovery]
owner:   "ops team"    # unknown key with odd spacing
review:
  due: 2027-01-01
  by: [ann, bo]
sources:
  - s1
---
Body text.
"""


def test_parse_reads_every_field_with_defaults():
    f = parse_fact("facts/x.md", TEXT)
    assert f.title == "A latch holds a breaker open"
    assert f.motifs == ("latch", "penalty-blocks-own-recovery")
    assert f.confidence == 0.5 and f.status == "active" and f.sources == ("s1",) and f.links == ()
    assert f.body == "Body text."


def test_rewrite_keeps_unknown_keys_byte_for_byte():
    new = rewrite(TEXT, {"motifs": ["latch"], "status": "retracted", "survivor": "facts/y z.md"})
    assert 'owner:   "ops team"    # unknown key with odd spacing\n' in new
    assert "review:\n  due: 2027-01-01\n  by: [ann, bo]\n" in new
    f = parse_fact("facts/x.md", new)
    assert f.motifs == ("latch",) and f.status == "retracted"
    assert new.endswith("---\nBody text.\n")


def test_content_id_changes_with_any_edit_but_not_line_endings():
    assert content_id(TEXT) == content_id(TEXT.replace("\n", "\r\n"))
    assert content_id(TEXT) != content_id(TEXT.replace("Body", "body"))


def test_exact_key_folds_whitespace_and_case_only():
    a = parse_fact("a.md", "---\ntitle: A  Latch\nconfidence: 0.9\n---\nSame   body.\n")
    b = parse_fact("b.md", "---\ntitle: a latch\nsources: [x]\n---\nsame body.\n")
    c = parse_fact("c.md", "---\ntitle: a latch\n---\nother body.\n")
    assert exact_key(a) == exact_key(b) != exact_key(c)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("no front matter\n", "no YAML front matter"),
        ("---\ntitle: x\nconfidence: 2\n---\n", "confidence"),
        ("---\ntitle: x\nmotifs: latch\n---\n", "list of strings"),
        ("---\ntitle: x\nmotifs: ['!!!']\n---\n", "no letters or digits"),
        ("---\ntitle: x\nstatus: gone\n---\n", "status"),
    ],
)
def test_bad_facts_are_refused_with_a_reason(text, reason):
    with pytest.raises(BadFact) as e:
        parse_fact("facts/bad.md", text)
    assert reason in str(e.value) and "facts/bad.md" in str(e.value)


def test_load_collects_problems_and_keeps_the_rest(tmp_path):
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "good.md").write_text(TEXT)
    (tmp_path / "facts" / "bad.md").write_text("---\ntitle: [\n---\n")
    corpus = load_corpus(tmp_path)
    assert list(corpus.facts) == ["facts/good.md"]
    assert [p.path for p in corpus.problems] == ["facts/bad.md"]
    assert corpus.carriers["latch"] == ["facts/good.md"]


def test_a_note_without_front_matter_is_read_where_the_layout_allows_it():
    note = "Caffeine blocks adenosine receptors.\n\nSee [[Sleep]].\n"
    # our facts/ layout and knomit's require it
    with pytest.raises(BadFact, match="no YAML front matter"):
        parse_fact("Areas/Health/Caffeine.md", note)
    fact = parse_fact("Areas/Health/Caffeine.md", note, front_matter="optional")
    assert (fact.title, fact.body, fact.status) == ("Caffeine", note.strip(), "active")
    headed = parse_fact("n/x.md", "# Caffeine and sleep\n\nA body.\n", front_matter="optional")
    assert (headed.title, headed.body) == ("Caffeine and sleep", "A body.")
    with pytest.raises(BadFact, match="front matter is not closed") as e:
        parse_fact("n/open.md", "---\ntags: [a]\nno closing line\n", front_matter="optional")
    assert e.value.line == 1
    # a retraction of such a note gives it front matter, and the note reads back the same otherwise
    retired = parse_fact("n/x.md", rewrite(headed.text, {"status": "retracted"}), front_matter="optional")
    assert (retired.title, retired.body, retired.status) == ("Caffeine and sleep", "A body.", "retracted")


def test_a_byte_order_mark_is_read_and_kept_by_a_rewrite():
    text = "\ufeff---\ntitle: Marked\naliases: pg-backups\n---\nBody.\n"
    fact = parse_fact("facts/bom.md", text)
    assert (fact.title, fact.body, fact.aliases) == ("Marked", "Body.", ("pg-backups",))
    out = rewrite(text, {"motifs": ["m"]})
    assert out == "\ufeff---\ntitle: Marked\naliases: pg-backups\nmotifs: [m]\n---\nBody.\n"
    bare = rewrite("\ufeffJust a note.\n", {"status": "retracted"})
    assert bare == "\ufeff---\nstatus: retracted\n---\nJust a note.\n"
    assert parse_fact("n/b.md", bare, front_matter="optional").status == "retracted"


def test_aliases_are_read_as_a_list_a_name_or_the_older_alias_key():
    many = parse_fact("n/a.md", "---\naliases: [pg-backups, Postgres backups]\nalias: pgb\n---\n# A\n")
    assert many.aliases == ("pg-backups", "Postgres backups", "pgb")
    assert parse_fact("n/b.md", "---\naliases: 2026\n---\n# B\n").aliases == ("2026",)
    with pytest.raises(BadFact, match="'aliases' must be a list of strings") as e:
        parse_fact("n/c.md", "---\ntitle: C\naliases: {a: b}\n---\n")
    assert e.value.line == 3


@pytest.mark.parametrize(
    "front, broken",
    [
        # PyYAML's problem mark is the next line: 4
        ("title: A\nthis line has no colon\nsources: 1\n", 3),
        # an unclosed list: where it opened, not where it gave up
        ("title: A\ntags: [a, b\nsources: 1\n", 3),
        # an unclosed quote: the mark is at the end of the front matter
        ('title: A\nx: "abc\nsources: 1\n', 3),
        ("title: A\nbad: a: b\nsources: 1\n", 3),
        ("title: A\n\tx: 1\nsources: 1\n", 3),
        # the parser's context is the mapping (line 2): not it
        ("title: A\ntags:\n  - a\n - b\nsources: 1\n", 5),
        ("title: A\ntags: [a] x\nsources: 1\n", 3),
        ("title: A\nx: *nope\nsources: 1\n", 3),
    ],
)
def test_a_yaml_error_names_the_broken_line(front, broken):
    # issue 54: "a YAML error is reported at line 4 when the broken line is 3"
    with pytest.raises(BadFact, match="bad YAML front matter") as e:
        parse_fact("f.md", f"---\n{front}---\nbody\n")
    assert e.value.line == broken, str(e.value)


def test_inline_tags_follow_obsidians_rules():
    from knomit_judge.notes import inline_tags, is_tag

    text = (
        "# A heading, not a tag\n## Nor this\n#real at the start, #nested/tag, #y1984 #3d_printing #2026-01-05 "
        "#émigré #日本語 #kebab-case.\nNo tag: #1984, foo#bar, https://x.org/#frag, [[Note#Heading]], [[#Local]], "
        "[t](x.md#anchor), #🚀, `#code` and ``a #b` c``.\n```python\n#comment\n```\n~~~\n#also-code\n~~~~\n"
        "After the fences: #after #real\n"
    )
    assert inline_tags(text) == [
        "real",
        "nested/tag",
        "y1984",
        "3d_printing",
        "2026-01-05",
        "émigré",
        "日本語",
        "kebab-case",
        "after",
    ]
    # an unmatched backtick is text; a code span ends at the next run of its length, never past a blank line
    assert inline_tags("a ` b #t\n\n``c ` #d`` #e `wrapped\n#in-span`, `no\n\n#out` x") == ["t", "e", "out"]
    import time

    start = time.perf_counter()
    # one pass over the backticks: no quadratic rescan
    assert len(inline_tags("a ` b #t " * 20000)) == 1
    assert time.perf_counter() - start < 2
    assert [is_tag(t) for t in ("running", "a/b", "Retry Storm", "1984", "x.y", "")] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]


def test_front_matter_tags_as_obsidian_writes_them():
    for tags, motifs in [
        ("[a, b]", ("a", "b")),
        ("a", ("a",)),
        ("a, b", ("a", "b")),
        ("'#a #b'", ("a", "b")),
        ("\n  - '#a'\n  - b", ("a", "b")),
        ("[]", ()),
    ]:
        fact = parse_fact("n.md", f"---\ntags: {tags}\n---\n# N\n", ("tags",))
        assert fact.motifs == motifs, tags
    # other keys keep their own rule: an entity may hold a space, and a string there is not a list of them
    assert parse_fact("n.md", "---\nentities: [connection pool]\n---\n# N\n", ("entities",)).motifs == (
        "connection pool",
    )
    with pytest.raises(BadFact, match="'entities' must be a list of strings"):
        parse_fact("n.md", "---\nentities: connection pool\n---\n# N\n", ("entities",))
    # inline tags only where the layout reads them
    assert parse_fact("n.md", "---\ntags: [a]\n---\n# N\n\nSee #b.\n", ("tags",)).motifs == ("a",)
    assert parse_fact("n.md", "---\ntags: [a]\n---\n# N\n\nSee #b and #a.\n", ("tags",), inline=True).motifs == (
        "a",
        "b",
    )


@pytest.mark.parametrize(
    "text, template",
    [
        ("---\ncreated: {{date}}\n---\n# Daily\n", "{{date}}"),
        ("---\ntitle: x\n---\n# {{title}}\n", "{{title}}"),
        ("# Meeting\n\nOn {{date:YYYY-MM-DD}} at {{time}}\n", "{{date:YYYY-MM-DD}}"),
        ("## {{VALUE}}\n\nA QuickAdd capture.\n", "{{VALUE}}"),
        ("---\ncreated: <% tp.date.now() %>\n---\n# x\n", "<% tp."),
        ("---\ntitle: Jinja\n---\nIn code: `{{ title }}` and\n```\n{{ date }}\n```\n", None),
        ("---\ntitle: Handlebars\n---\nA value {{ user.name }} in prose is not Obsidian's.\n", None),
    ],
)
def test_a_template_is_left_out_not_read_and_not_a_problem(tmp_path, text, template):
    from knomit_judge.config import CorpusConfig
    from knomit_judge.errors import TemplateNote

    layout = CorpusConfig(paths=["**/*.md"], front_matter="optional")
    (tmp_path / "n.md").write_text(text, encoding="utf-8")
    corpus = load_corpus(tmp_path, layout=layout)
    if template is None:
        assert list(corpus.facts) == ["n.md"] and corpus.templates == []
        return
    with pytest.raises(TemplateNote) as e:
        parse_fact("n.md", text, front_matter="optional")
    assert template in e.value.reason
    assert corpus.facts == {} and corpus.problems == [] and corpus.templates == ["n.md"]


def test_renaming_a_tag_keeps_each_notes_other_bytes():
    from knomit_judge.rewrite import renamed_motif

    text = (
        "---\ntags: 'run, #sleep'\nother:   kept  # a comment\n---\n# Day\n\nA #run, not `#run`, not #run/legs "
        "nor #running.\n\n```\n#run\n```\n#run\n"
    )
    fact = parse_fact("d.md", text, ("tags",), inline=True)
    assert fact.motifs == ("run", "sleep", "run/legs", "running")
    out = renamed_motif(fact, "run", "exercise", ("tags",), inline=True)
    assert out == (
        "---\ntags: 'exercise, #sleep'\nother:   kept  # a comment\n---\n# Day\n\nA #exercise, not `#run`, "
        "not #run/legs nor #running.\n\n```\n#run\n```\n#exercise\n"
    )
    assert parse_fact("d.md", out, ("tags",), inline=True).motifs == ("exercise", "sleep", "run/legs", "running")
    # a string of tags keeps its separators and '#'s; a repeat the rename makes is dropped
    from knomit_judge.notes import renamed_tag_string

    assert renamed_tag_string("#a #b, c", "a", "c") == "#c #b"
    assert renamed_tag_string("a,b", "b", "x") == "a,x"


def test_a_merge_takes_in_a_string_of_tags_as_tags():
    from knomit_judge.rewrite import absorbed

    keep = parse_fact("a.md", "---\ntags: a, b\n---\n# A\n", ("tags",))
    assert absorbed(keep, parse_fact("b.md", "---\ntags: ['#a', c]\n---\n# B\n", ("tags",)), ("tags",)) == {
        "tags": ["a", "b", "c"]
    }  # never the one value "a, b"
    assert absorbed(keep, parse_fact("b.md", "---\ntags: ['#a']\n---\n# B\n", ("tags",)), ("tags",)) == {}


def test_a_first_line_tag_is_a_tag_where_tags_are_read_inline_and_a_title_to_knomits_rule():
    vault = parse_fact("Daily/2026-01-07.md", "#running in the rain\n", front_matter="optional", inline=True)
    assert (vault.title, vault.body, vault.motifs) == ("2026-01-07", "#running in the rain", ("running",))
    heading = parse_fact("Daily/x.md", "# Rain\n\n#running\n", front_matter="optional", inline=True)
    assert (heading.title, heading.motifs) == ("Rain", ("running",))
    knomit = parse_fact("kb/x.md", "---\nsources: 1\n---\n#Title without a space\n\nBody.\n")
    assert (knomit.title, knomit.body) == ("Title without a space", "Body.")
