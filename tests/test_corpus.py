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


@pytest.mark.parametrize("text, reason", [
    ("no front matter\n", "no YAML front matter"),
    ("---\ntitle: x\nconfidence: 2\n---\n", "confidence"),
    ("---\ntitle: x\nmotifs: latch\n---\n", "list of strings"),
    ("---\ntitle: x\nmotifs: ['!!!']\n---\n", "no letters or digits"),
    ("---\ntitle: x\nstatus: gone\n---\n", "status"),
])
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
    with pytest.raises(BadFact, match="no YAML front matter"):  # our facts/ layout and knomit's require it
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
