"""Alias nomination: several signals, one list, real aliases first (real model, real git repos)."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO, fact_text, git, make_repo

from knomit_judge.config import load_config
from knomit_judge.corpus import load_corpus, parse_fact
from knomit_judge.embeddings import Embedder, text_hash
from knomit_judge.init import init_corpus
from knomit_judge.nominate import (
    COTAG,
    GLOSS_CARRIERS,
    MAX_SENTENCE,
    SENTENCES_PER_FACT,
    CarrierContent,
    _lexical,
    carrier_text,
    family_weight,
    gloss_vectors,
    name_text,
    nominate,
    numbers_only,
    parse,
    score,
    sentences,
    string_similarity,
    with_namespaces,
    word_alignment,
    word_weights,
)
from knomit_judge.passes.alias import AliasPass
from knomit_judge.passes.base import Inputs
from knomit_judge.session.review import ReviewOptions, review
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
TITLES = [
    "{} needs a review after the outage",
    "Why {} surprised the on-call team",
    "Notes on {} from the design review",
]


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
        trio = crowd[i : i + 3]
        facts[f"facts/d{i:03d}.md"] = fact_text(TITLES[i % 3].format(trio[0]), trio)
    facts.update(extra or {})
    return make_repo(tmp_path / "corpus", facts)


def context(root: Path):
    store = Store(root.parent / "embeddings.db")
    return Inputs(corpus=load_corpus(root), embedder=Embedder(store), config=load_config(root)), store


def test_keys_fold_variants_and_tell_numbers_apart():
    same = [
        ("visibility timeout", "VisibilityTimeout"),
        ("fail open", "fail_open"),
        ("Agent Card", "AGENT CARD"),
        ("policy", "policies"),
        ("cache", "caches"),
        ("LLM as a judge", "LLM-as-judge"),
        ("OAuth 2.0", "OAuth2"),
    ]
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


def test_a_word_written_short_meets_its_whole_form_through_the_buckets():
    for a, b in (
        ("capability eval", "capability evaluation"),
        ("eval awareness", "evaluation awareness"),
        ("asynchronous monitor", "asynchronous monitoring"),
    ):
        assert string_similarity(parse(a), parse(b)) == 0.85, (a, b)
    # one letter short of a stub, a different word, or two words apart: not a shortening
    for a, b in (
        ("eva awareness", "evaluation awareness"),
        ("synchronous monitor", "asynchronous monitor"),
        ("eval metric", "evaluation metrics dashboard"),
        ("eval drift", "evaluation awareness"),
    ):
        assert string_similarity(parse(a), parse(b)) < 0.85, (a, b)
    # nominated by the string buckets (no embedding needed), among look-alikes that only share a stub
    vocabulary = ["capability eval", "capability evaluation", "capability evolution", "capacity eval", "eval"]
    string, _ = _lexical([parse(m) for m in vocabulary], k=5)
    # each other's best (the bare "eval" is a trailing run)
    assert string[0][0] == 1 and string[1][0] == 0
    # evolution / capacity: no shortening
    assert 2 not in string[0] and not {0, 1} & set(string[3])


def test_a_capitalised_first_word_heading_many_spellings_is_a_namespace():
    vocabulary = [
        "Claude Opus 4.8",
        "Claude Code",
        "Claude Sonnet 5",
        "Opus 4.8",
        "Sonnet 5",
        "agent card",
        "agent skills",
        "agent memory",
        "skills",
    ]
    parsed = with_namespaces([parse(m) for m in vocabulary], vocabulary)
    assert string_similarity(parsed[0], parsed[3]) == 0.9 and string_similarity(parsed[2], parsed[4]) == 0.9
    assert string_similarity(parse("Claude Opus 4.8"), parse("Opus 4.8")) < 0.9  # learned, not listed
    string, _ = _lexical(parsed, k=5)
    # nominated through the core buckets
    assert string[0][0] == 3 and string[3][0] == 0
    # a lower-case head is a word of the domain (agent skills is not skills); two spellings make no family
    assert string_similarity(parsed[6], parsed[8]) < 0.9
    two = ["Gemini Pro", "Gemini Flash", "Pro"]
    assert string_similarity(*[with_namespaces([parse(m) for m in two], two)[i] for i in (0, 2)]) < 0.9


def test_the_score_ranks_shared_carriers_and_number_only_differences_low():
    strong = {"name": 0.9, "string": 0.0, "acronym": 0.0, "carriers": 1.0}
    assert score(strong, 0.0, False) == pytest.approx(0.95)
    assert score(strong, 1.0, False) == pytest.approx(0.95 * (1 - COTAG))
    assert score(strong, 1.0, True) == pytest.approx(0.95 * (1 - COTAG) / 2)
    # the semantic signals are one mean: a pair whose carriers say nothing alike ranks below one whose carriers agree
    agree = {**strong, "words": 0.5, "content": 0.8}
    assert score(agree, 0.0, False) > score({**agree, "content": 0.0}, 0.0, False)
    variant = {"name": 1.0, "string": 1.0, "acronym": 0.0, "carriers": 0.6}
    assert score(variant, 0.0, False) > score(strong, 1.0, False) > score(strong, 1.0, True) > 0


def test_a_line_counts_as_much_as_two_name_signals():
    # two spellings whose lines say one thing rank above two whose names look alike but whose lines differ
    base = {"string": 0.0, "acronym": 0.0, "carriers": 0.5, "words": 0.5, "content": 0.5, "gloss": 0.5}
    lines_agree = {**base, "name": 0.3, "line": 0.8}
    names_agree = {**base, "name": 0.8, "line": 0.3}
    assert score(lines_agree, 0.0, False) > score(names_agree, 0.0, False)
    # (0.3 + 0.5 + 0.5 + 0.5/4 + 0.5/4 + 2 x 0.8) / 5.5: the line at twice a name signal's weight
    assert score(lines_agree, 0.0, False) == pytest.approx(3.15 / 5.5)
    # a pair without lines is scored as before lines existed
    assert score(base | {"name": 0.3}, 0.0, False) == pytest.approx(1.55 / 3.5)


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
    # numbered facets and two facets of one subject, always on the same facts
    for i in range(3):
        extra[f"facts/asi{i}.md"] = fact_text(
            f"Agentic security review {i}: goal hijack and tool misuse", ["asi07", "asi08"]
        )
        extra[f"facts/gov{i}.md"] = fact_text(
            f"Governance control {i} covers inventory and ownership", ["inventory control", "ownership control"]
        )
    extra["facts/gpt-a.md"] = fact_text("gpt-5.5 follows tool schemas closely", ["gpt-5.5"])
    extra["facts/gpt-b.md"] = fact_text("gpt-5.6 follows tool schemas closely", ["gpt-5.6"])
    repo = variant_corpus(tmp_path, extra)
    ctx, store = context(repo.root)
    try:
        candidates = AliasPass().candidates(ctx)
    finally:
        store.close()
    rank = {frozenset((c.subject["a"], c.subject["b"])): i for i, c in enumerate(candidates)}
    facet, siblings, version = (
        frozenset(p) for p in (("asi07", "asi08"), ("inventory control", "ownership control"), ("gpt-5.5", "gpt-5.6"))
    )
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
    # small: 7 alias groups (one per kind), 108 spellings
    truth = generate_entities(36, 3, root)
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
            # session 0 spent its balance (the optimistic cap plus questions_per_resolution per yes)
            assert alias.throttle.startswith("defunded"), lines
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


# Paraphrases of one mechanism that share no word, each on one fact about a different subject, beside
# template look-alikes (fail-closed-X) whose carriers describe different things: issue 23's shape.
PARAPHRASE = ("ancestry-decides-order", "sequence-without-wallclock")
PARAPHRASE_FACTS = [
    (
        "The sync daemon orders two writes by walking parent commits, never by their timestamps",
        "Which write came first is answered by following the chain of parent commits back; wall-clock timestamps "
        "are displayed but never compared, because machines disagree about the time.",
    ),
    (
        "In the audit trail, which change came first is read from the parent chain, not from clocks",
        "Order between two changes is decided by walking parent commits; the timestamps the machines wrote are shown "
        "but never used to order anything, since their clocks drift.",
    ),
]
LOOKALIKES = {
    "fail-closed-registry": (
        "An unknown service is denied by the router",
        "A service missing from the registry gets a refusal instead of being routed to a default backend.",
    ),
    "fail-closed-on-parse": (
        "A config syntax error stops the start-up",
        "When the configuration file cannot be parsed, the server refuses to start rather than guessing defaults.",
    ),
    "fail-closed-network": (
        "The firewall drops all packets when its rules fail to load",
        "If the rule file is unreadable, every packet is dropped until an operator fixes it.",
    ),
}
CROWD = [
    ("lazy-import-hides-cost", "Heavy imports on first use make start-up look fast and the first call slow"),
    ("queue-head-blocking", "One slow message at the front of the queue holds every message behind it"),
    ("dns-cached-too-long", "A resolved address is kept for hours after the service moved"),
    ("orphaned-temp-files", "Temporary files are left behind whenever the writer is killed"),
    ("hot-path-allocation", "A new buffer per request makes the garbage collector dominate the profile"),
    ("test-order-dependence", "The suite passes only when its tests run in file order"),
    ("warm-cache-masks-regression", "Benchmarks on a warm cache hid a slower cold start"),
    ("feature-flag-debt", "Old toggles are never removed and both branches live forever"),
]


def motif_corpus(tmp_path: Path):
    facts = {}
    for i, (spelling, (title, body)) in enumerate(zip(PARAPHRASE, PARAPHRASE_FACTS)):
        facts[f"facts/p{i}.md"] = fact_text(title, [spelling], body=body)
    for i, (spelling, (title, body)) in enumerate(LOOKALIKES.items()):
        facts[f"facts/t{i}.md"] = fact_text(title, [spelling], body=body)
    for i, (spelling, title) in enumerate(CROWD):
        facts[f"facts/c{i}.md"] = fact_text(title, [spelling], body=title + ".")
    # two facets of one fact: both spellings on the same (only) carrier
    facts["facts/facet.md"] = fact_text(
        "The script brake counts runs per minute and drops the excess",
        ["runs-capped-per-window", "overflow-dropped-not-queued"],
    )
    return make_repo(tmp_path / "corpus", facts)


def test_carriers_that_say_the_same_thing_nominate_a_paraphrase_sharing_no_word(tmp_path):
    repo = motif_corpus(tmp_path)
    ctx, store = context(repo.root)
    try:
        noms = nominate(list(ctx.corpus.carriers), ctx.corpus, ctx.embedder, 2)
    finally:
        store.close()
    by_pair = {frozenset((n.a, n.b)): n for n in noms}
    pair = by_pair[frozenset(PARAPHRASE)]
    assert "content" in pair.nominated_by, pair
    looks = [by_pair[frozenset(p)] for p in itertools.combinations(LOOKALIKES, 2) if frozenset(p) in by_pair]
    assert looks, "the template look-alikes share words: some signal nominates them"
    # their carriers say different things, and the words they share are the family's: both weigh little
    assert all(pair.signals["content"] > n.signals["content"] for n in looks), (
        pair.signals,
        [n.signals for n in looks],
    )
    assert all(pair.score > n.score for n in looks), (pair.score, [(n.a, n.b, n.score) for n in looks])
    # a facet pair shares its only carrier: no content evidence at all (counting the shared fact would have
    # made content 1.0), so co-tagging lowers the rank through content
    facet = by_pair[frozenset(("runs-capped-per-window", "overflow-dropped-not-queued"))]
    assert facet.signals["content"] == 0.0 and facet.overlap == 1.0
    assert facet.score < score({**facet.signals, "content": 1.0}, facet.overlap, False)
    # one fact's titles on both sides look identical
    assert facet.signals["carriers"] > pair.signals["carriers"]


def test_words_a_template_family_shares_weigh_little(tmp_path):
    names = [*LOOKALIKES, *PARAPHRASE, *(s for s, _ in CROWD), "fail-closed-allowlist"]
    parsed = [parse(m) for m in names]
    weight = word_weights(parsed)
    assert weight["fail"] < weight["registry"] and weight["closed"] < weight["parse"]
    # a stop word carries nothing
    assert weight["on"] == 0.0
    store = Store(tmp_path / "embeddings.db")
    try:
        words = sorted({w for p in parsed for w in p.words})
        vector = dict(zip(words, Embedder(store).embed(words)))
    finally:
        store.close()
    family = family_weight(len(parsed))
    align = lambda a, b: word_alignment(parse(a).words, parse(b).words, weight, vector, family)  # noqa: E731
    template = align("fail-closed-registry", "fail-closed-network")
    # 'fail closed' is the family's part (4 spellings hold it): only registry and network are compared
    assert template == pytest.approx(float(vector["registry"] @ vector["network"]), abs=1e-5)
    # with every word weighed the same and kept, the shared 'fail closed' makes the look-alikes near-identical
    flat = word_alignment(
        parse("fail-closed-registry").words, parse("fail-closed-network").words, dict.fromkeys(weight, 1.0), vector
    )
    assert template < flat
    assert align(*PARAPHRASE) > template, (align(*PARAPHRASE), template)


def test_shared_carriers_are_left_out_of_content(tmp_path):
    facts = {
        "facts/a.md": fact_text("Writes are ordered by parent commits", ["x-order", "y-order", "z-order"]),
        "facts/b.md": fact_text("Writes are ordered by parent commits, never clocks", ["y-order"]),
        "facts/c.md": fact_text("A penguin colony on the ice shelf", ["z-order"]),
    }
    repo = make_repo(tmp_path / "corpus", facts)
    ctx, store = context(repo.root)
    try:
        motifs = ["x-order", "y-order", "z-order"]
        content = CarrierContent(motifs, ctx.corpus, ctx.embedder)
        # x's only carrier is shared with y: nothing of x is left to compare
        assert content.similarity(0, 1) == 0.0
        # y and z share a.md; what is left is b.md against c.md: unrelated, whatever a.md says
        vb, vc = ctx.embedder.embed(
            [f"{ctx.corpus.facts[p].title}\n{ctx.corpus.facts[p].body}" for p in ("facts/b.md", "facts/c.md")]
        )
        assert content.similarity(1, 2) == pytest.approx(max(0.0, float(vb @ vc)), abs=1e-5)
        assert content.similarity(1, 2) < 0.5
    finally:
        store.close()


def test_the_generated_motif_shape_is_knomits(tmp_path):
    """gen_corpus.py --shape motifs: single carriers, paraphrases sharing no word, look-alike families, facets."""
    from gen_corpus import generate_motifs

    truth = generate_motifs(60, 0, tmp_path / "corpus", git=False)
    corpus = load_corpus(tmp_path / "corpus")
    for group in truth["alias_groups"]:
        for a, b in itertools.combinations(group, 2):
            assert not set(parse(a).words) & set(parse(b).words), (a, b)
            assert not set(corpus.carriers[a]) & set(corpus.carriers[b]), (a, b)
    single = sum(len(c) == 1 for c in corpus.carriers.values())
    assert single == len(corpus.carriers)
    facets = [t for t in truth["traps"] if set(corpus.carriers[t[0]]) == set(corpus.carriers[t[1]])]
    families = [t for t in truth["traps"] if set(parse(t[0]).words) & set(parse(t[1]).words)]
    assert facets and len(families) >= 9


# Issue 23's gloss: each paraphrase's only carrier is about something else, and says the mechanism in one
# sentence among others; the whole-fact vectors see two different subjects.
GLOSSED = {
    "ancestry-decides-order": (
        "The sync daemon's retry queue",
        "Failed uploads are retried with exponential backoff up to five times. The queue is persisted to disk "
        "so a restart loses nothing. Which write came first is decided by walking parent commits, never by "
        "comparing timestamps. Operators can drain the queue with a single command.",
    ),
    "sequence-without-wallclock": (
        "Export format of the audit trail",
        "The audit trail exports to CSV with one row per change and a header line. Columns hold the author, "
        "the path and the size of the change. Order between two changes is read from the parent chain, "
        "because machine clocks drift. Large exports are split into files of ten thousand rows.",
    ),
}


def make_fact(title: str, body: str):
    return parse_fact("facts/a.md", fact_text(title, ["m"], body=body), ("motifs",))


def test_sentences_are_the_title_then_the_bodys_first_ones():
    body = (
        "## Why\n- The first claim is stated here. The second one follows it; it is short.\n"
        "ok.\n"
        + " ".join(f"Sentence number {i} says one more thing." for i in range(20))
        + "\n"
        + "A"
        + "x" * 2000
        + "."
    )
    fact = make_fact("The title", body)
    got = sentences(fact)
    assert got[:4] == [
        "The title",
        "The first claim is stated here.",
        "The second one follows it; it is short.",
        "Sentence number 0 says one more thing.",
    ]
    assert "ok." not in got and not any(s.startswith(("#", "-")) for s in got)
    assert len(got) == SENTENCES_PER_FACT
    long = make_fact("T", "A" + "x" * 2000 + ".")
    assert len(sentences(long)[1]) == MAX_SENTENCE


def glossed_nominations(root: Path, mechanism: bool = True) -> dict:
    """GLOSSED beside the crowd, nominated at k = 1; without `mechanism`, the sentence saying it is left out."""
    facts = {}
    for i, (spelling, (title, body)) in enumerate(GLOSSED.items()):
        if not mechanism:
            body = ". ".join(s for s in body.split(". ") if "parent" not in s)
        facts[f"facts/g{i}.md"] = fact_text(title, [spelling], body=body)
    for i, (spelling, title) in enumerate(CROWD):
        facts[f"facts/c{i}.md"] = fact_text(title, [spelling], body=title + ".")
    repo = make_repo(root, facts)
    ctx, store = context(repo.root)
    try:
        return {frozenset((n.a, n.b)): n for n in nominate(list(ctx.corpus.carriers), ctx.corpus, ctx.embedder, 1)}
    finally:
        store.close()


def test_the_gloss_finds_a_paraphrase_whose_carriers_are_about_other_things(tmp_path):
    noms = glossed_nominations(tmp_path / "corpus")
    pair = noms[frozenset(GLOSSED)]
    # each spelling's nearest gloss is the other's: the gloss alone nominates the pair at k = 1
    assert "gloss" in pair.nominated_by, pair
    # the sentences about the mechanism meet, where the names and the carriers as wholes (retry queue, CSV
    # export) do not
    assert pair.signals["gloss"] > max(pair.signals[s] for s in ("name", "carriers", "content")), pair.signals
    others = [n for p, n in noms.items() if p != frozenset(GLOSSED)]
    assert all(pair.signals["gloss"] > n.signals["gloss"] for n in others)
    assert pair.score > score({**pair.signals, "gloss": 0.0}, pair.overlap, False)  # it ranks, too
    # it is that one sentence in each carrier: without it the glosses drift apart
    without = glossed_nominations(tmp_path / "without", mechanism=False).get(frozenset(GLOSSED))
    assert without is None or without.signals["gloss"] < pair.signals["gloss"] - 0.1, (without, pair)


def test_a_gloss_depends_only_on_its_spelling_and_carriers_and_a_broad_spelling_keeps_its_titles(tmp_path):
    facts = {
        f"facts/g{i}.md": fact_text(title, [spelling], body=body)
        for i, (spelling, (title, body)) in enumerate(GLOSSED.items())
    }
    broad = [f"facts/b{i}.md" for i in range(GLOSS_CARRIERS + 1)]
    # one spelling on more carriers than are glossed from sentences
    for i, path in enumerate(broad):
        facts[path] = fact_text(
            f"Cache entry {i} outlives its source",
            ["stale-cache"],
            body=f"Entry {i} stays after the file changes. Nothing evicts entry {i} early.",
        )
    repo = make_repo(tmp_path / "corpus", facts)

    def glosses(corpus, embedder):
        motifs = sorted(corpus.carriers)
        names = embedder.embed([name_text(m) for m in motifs])
        titled = embedder.embed([carrier_text(m, corpus) for m in motifs])
        return motifs, titled, gloss_vectors(motifs, names, titled, corpus, embedder)

    ctx, store = context(repo.root)
    try:
        motifs, titled, before = glosses(ctx.corpus, ctx.embedder)
        at = motifs.index("stale-cache")
        # the broad spelling: its carriers text, no sentences
        assert np.array_equal(before[at], titled[at])
        body_sentences = [s for p in broad for s in sentences(ctx.corpus.facts[p])[1:]]
        assert not ctx.embedder.store.embeddings(ctx.embedder.model_name, [text_hash(s) for s in body_sentences])
        glossed = [s for m in GLOSSED for f in ctx.corpus.carrier_facts(m) for s in sentences(f)]
        assert len(ctx.embedder.store.embeddings(ctx.embedder.model_name, [text_hash(s) for s in glossed])) == len(
            set(glossed)
        )  # cached by text, like every embedding
        # a glossed spelling is not its carriers text
        for m in GLOSSED:
            assert not np.array_equal(before[motifs.index(m)], titled[motifs.index(m)])
    finally:
        store.close()
    # a new fact elsewhere (and a fresh cache, as a rebuild has) changes no existing gloss, bit for bit
    repo2 = make_repo(
        tmp_path / "corpus2",
        {
            **facts,
            "facts/new.md": fact_text(
                "Retries hide a failing disk", ["retry-masks-fault"], body="Each retry succeeds after a slow read."
            ),
        },
    )
    ctx2, store2 = context(repo2.root)
    try:
        motifs2, _, after = glosses(ctx2.corpus, ctx2.embedder)
    finally:
        store2.close()
    for m in motifs:
        assert np.array_equal(before[motifs.index(m)], after[motifs2.index(m)]), m
