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
