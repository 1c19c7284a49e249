"""Alias nomination: several signals, one list, real aliases first (real model, real git repos)."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO, fact_text, git, make_repo

from knomit_judge.config import load_config
from knomit_judge.corpus import load_corpus
from knomit_judge.embeddings import Embedder
from knomit_judge.init import init_corpus
from knomit_judge.nominate import nominate, numbers_only, parse, score, string_similarity
from knomit_judge.passes.alias import AliasPass
from knomit_judge.review import ReviewOptions, review
from knomit_judge.store import Store

sys.path.insert(0, str(REPO / "benchmarks"))
from gen_corpus import generate_entities  # noqa: E402
from gen_vocabulary import HEADS, MODIFIERS  # noqa: E402

# One pair per variant class; each spelling sits on its own facts.
VARIANTS = {
    "case": ("Agent Card", "agent card"),
    "separator": ("fail open", "fail-open"),
    "camelCase": ("visibility timeout", "VisibilityTimeout"),
    "plural": ("orchestrator-worker", "orchestrator-workers"),
    "vendor prefix": ("AWS Step Functions", "Step Functions"),
    "vendor swap": ("amazon-sqs", "aws-sqs"),
    "Error suffix": ("ThrottlingException", "throttling"),
    "acronym": ("MCP", "Model Context Protocol"),
    "acronym plural": ("NHIs", "Non-Human Identity"),
}
TITLES = ["{} needs a review after the outage", "Why {} surprised the on-call team",
          "Notes on {} from the design review"]


def distractors(count: int) -> list[str]:
    """Plain two-word names sharing words with each other (retry budget / token budget): the crowd."""
    taken = {s for pair in VARIANTS.values() for s in pair}
    names = (f"{m} {h}" for m, h in itertools.product(MODIFIERS[::3], HEADS[::2]))
    return list(itertools.islice((n for n in names if n not in taken), count))


def variant_corpus(tmp_path: Path, extra: dict[str, str] | None = None):
    facts, n = {}, 0
    for a, b in VARIANTS.values():
        for spelling in (a, b):
            for t in TITLES[:2]:
                facts[f"facts/v{n:03d}.md"] = fact_text(t.format(spelling), [spelling])
                n += 1
    crowd = distractors(90)
    for i in range(0, len(crowd), 3):
        trio = crowd[i:i + 3]
        facts[f"facts/d{i:03d}.md"] = fact_text(TITLES[i % 3].format(trio[0]), trio)
    facts.update(extra or {})
    return make_repo(tmp_path / "corpus", facts)


def context(root: Path):
    store = Store(root.parent / "embeddings.db")
    return SimpleNamespace(corpus=load_corpus(root), embedder=Embedder(store), config=load_config(root)), store


def test_keys_fold_variants_and_tell_numbers_apart():
    same = [("visibility timeout", "VisibilityTimeout"), ("fail open", "fail_open"), ("Agent Card", "AGENT CARD"),
            ("policy", "policies"), ("cache", "caches"), ("LLM as a judge", "LLM-as-judge"), ("OAuth 2.0", "OAuth2")]
    for a, b in same:
        assert string_similarity(parse(a), parse(b)) == 1.0, (a, b)
    assert string_similarity(parse("AWS Step Functions"), parse("Step Functions")) == 0.9
    assert string_similarity(parse("amazon-sqs"), parse("aws-sqs")) == 0.9
    assert string_similarity(parse("RateLimitError"), parse("rate limit")) == 0.9
    assert 0 < string_similarity(parse("SQS visibility timeout"), parse("visibility timeout")) < 0.9
    assert string_similarity(parse("token budget"), parse("retry budget")) == 0.0
    assert string_similarity(parse("Model Context Protocol (MCP)"), parse("MCP")) == 0.9
    assert string_similarity(parse("Claude's memory"), parse("Claude memory")) == 1.0
    assert parse("A2A").short == "a2a" and "a2a" in parse("Agent-to-Agent").initials
    for a, b in [("asi07", "asi08"), ("gpt-5.5", "gpt-5.6"), ("p99.9", "p99.99"), ("govern-6.1", "govern-6.2")]:
        assert numbers_only(parse(a), parse(b)), (a, b)
    assert not numbers_only(parse("gpt-5"), parse("gpt-5-mini"))
    assert not numbers_only(parse("A2A"), parse("Agent2Agent"))


def test_the_score_ranks_shared_carriers_and_number_only_differences_low():
    strong = {"name": 0.9, "string": 0.0, "acronym": 0.0, "carriers": 1.0}
    assert score(strong, 0.0, False) == pytest.approx(0.95)
    assert score(strong, 1.0, False) == pytest.approx(0.475)
    assert score(strong, 1.0, True) == pytest.approx(0.2375)
    variant = {"name": 1.0, "string": 1.0, "acronym": 0.0, "carriers": 0.6}
    assert score(variant, 0.0, False) > score(strong, 1.0, False) > score(strong, 1.0, True) > 0


def test_each_variant_class_is_shortlisted(tmp_path):
    repo = variant_corpus(tmp_path)
    ctx, store = context(repo.root)
    try:
        assert len(ctx.corpus.carriers) == 2 * len(VARIANTS) + 90
        listed = {frozenset((c.subject["a"], c.subject["b"])): i for i, c in enumerate(AliasPass().candidates(ctx))}
        noms = {frozenset((n.a, n.b)): n for n in nominate(list(ctx.corpus.carriers), ctx.corpus, ctx.embedder, 5)}
    finally:
        store.close()
    for kind, pair in VARIANTS.items():
        assert frozenset(pair) in listed, f"{kind} {pair} not shortlisted"
        signal = "acronym" if kind.startswith("acronym") else "string"
        assert signal in noms[frozenset(pair)].nominated_by, (kind, noms[frozenset(pair)])
    # every class is offered before any plain name pair: the first offers are the variants
    ranks = sorted(listed[frozenset(p)] for p in VARIANTS.values())
    assert ranks == list(range(len(VARIANTS))), ranks


def test_a_co_occurring_facet_pair_ranks_below_a_disjoint_variant_pair(tmp_path):
    extra = {}
    for i in range(3):  # numbered facets and two facets of one subject, always on the same facts
        extra[f"facts/asi{i}.md"] = fact_text(f"Agentic security review {i}: goal hijack and tool misuse",
                                             ["asi07", "asi08"])
        extra[f"facts/gov{i}.md"] = fact_text(f"Governance control {i} covers inventory and ownership",
                                             ["inventory control", "ownership control"])
    extra["facts/gpt-a.md"] = fact_text("gpt-5.5 follows tool schemas closely", ["gpt-5.5"])
    extra["facts/gpt-b.md"] = fact_text("gpt-5.6 follows tool schemas closely", ["gpt-5.6"])
    repo = variant_corpus(tmp_path, extra)
    ctx, store = context(repo.root)
    try:
        candidates = AliasPass().candidates(ctx)
    finally:
        store.close()
    rank = {frozenset((c.subject["a"], c.subject["b"])): i for i, c in enumerate(candidates)}
    facet, siblings, version = (frozenset(p) for p in (("asi07", "asi08"), ("inventory control", "ownership control"),
                                                       ("gpt-5.5", "gpt-5.6")))
    variant = rank[frozenset(("fail open", "fail-open"))]
    for trap in (facet, siblings, version):
        assert trap in rank, f"{sorted(trap)} dropped: traps are ranked low, never dropped"
        assert rank[trap] > variant, (sorted(trap), rank[trap], variant)
    assert rank[facet] > max(rank[frozenset(p)] for p in VARIANTS.values())
    # the judge is told how many carriers the two spellings share
    by_pair = {frozenset((c.subject["a"], c.subject["b"])): c for c in candidates}
    assert all(order["shared_carriers"] == 3 for order in by_pair[facet].orders)
    assert all(order["shared_carriers"] == 0 for order in by_pair[frozenset(("fail open", "fail-open"))].orders)
    assert [c.score for c in candidates] == sorted((c.score for c in candidates), reverse=True)


def test_a_real_shaped_vocabulary_is_unified_within_three_sessions(tmp_path):
    root = tmp_path / "corpus"
    truth = generate_entities(36, 3, root)  # small: 7 alias groups (one per kind), 108 spellings
    judge = f"scripted:{root.parent / 'corpus.replies.jsonl'}"
    groups = truth["alias_groups"]
    assert {*truth["alias_kinds"]} >= {"case", "separator", "camel", "plural", "prefix", "acronym", "suffix"}
    init_corpus(root)  # config and .gitignore, committed
    assert git(root, "status", "--porcelain") == ""

    lines = []
    for session in range(3):
        result = review(root, ReviewOptions(passes=("alias",), judge=judge))
        alias = result.passes["alias"]
        lines.append(alias.line())
        if session == 0:
            assert alias.throttle == "optimistic" and alias.resolved > 0 and alias.applied > 0, lines
        if session == 1:
            assert alias.throttle == "funded", lines  # session 1's yeses keep the pass funded
    carriers = load_corpus(root).carriers
    for group in groups:
        alive = [s for s in group if carriers.get(s)]
        assert len(alive) == 1, (group, alive, lines)
    # traps were asked and refused; nothing was merged but on a `same` verdict for a planted pair
    store = Store.for_corpus(root)
    try:
        verdicts = {frozenset((v.subject["a"], v.subject["b"])): v for v in store.verdicts("alias")}
    finally:
        store.close()
    planted = {frozenset(p) for p in truth["alias_pairs"]}
    asked_traps = [t for t in truth["traps"] if frozenset(t) in verdicts]
    assert len(asked_traps) >= len(truth["traps"]) // 2, (len(asked_traps), len(truth["traps"]))
    for t in truth["traps"]:
        assert carriers.get(t[0]) and carriers.get(t[1]), t  # never merged
        if frozenset(t) in verdicts:
            assert verdicts[frozenset(t)].answer == "different"
    merges = git(root, "log", "--grep=^Knomit-Pass: alias$", "--format=%(trailers:key=Knomit-Verdict,valueonly)")
    by_id = {v.id: v for v in verdicts.values()}
    applied = [by_id[i] for i in merges.split()]
    assert len(applied) == sum(len(g) - 1 for g in groups)
    assert all(v.answer == "same" and frozenset((v.subject["a"], v.subject["b"])) in planted for v in applied)
    assert json.loads((root.parent / "corpus.truth.json").read_text())["shape"] == "entities"
