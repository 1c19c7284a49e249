"""Kept candidate lists: read back only when nothing they depend on changed, and then equal to a fresh computation."""

from __future__ import annotations

import random

from helpers import RANDOM_MOTIFS, RANDOM_TOPICS, fact_text, scripted

from knomit_judge import ReviewOptions, review
from knomit_judge.candidate_lists import CandidateLists
from knomit_judge.config import Config
from knomit_judge.corpus import load_corpus
from knomit_judge.embeddings import Embedder
from knomit_judge.neighbours import Memory
from knomit_judge.passes.base import Inputs
from knomit_judge.passes.exact import DuplicateGroups
from knomit_judge.passes.registry import all_passes
from knomit_judge.rebuild import rebuild
from knomit_judge.store import Store


def write_corpus(root, rng: random.Random, n: int) -> None:
    for i in range(n):
        write_fact(root, f"facts/f{i:03d}.md", rng, i)


def write_fact(root, path: str, rng: random.Random, i: int) -> None:
    topic = RANDOM_TOPICS[rng.randrange(len(RANDOM_TOPICS))]
    motifs = rng.sample(RANDOM_MOTIFS, rng.randint(1, 2))
    body = f"{topic.capitalize()}: observed in system {rng.randrange(6)}, case {i}."
    # exact duplicates of a neighbour, for the exact pass
    if rng.random() < 0.15:
        body = f"{topic.capitalize()}: observed in system 0, case 0."
        topic = RANDOM_TOPICS[0]
    full = root / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(fact_text(f"On {topic}", motifs, body=body), encoding="utf-8")


def edit(root, rng: random.Random, step: int) -> None:
    """Change, retract, delete and add a few facts."""
    paths = sorted(p.relative_to(root).as_posix() for p in (root / "facts").rglob("*.md"))
    changed = rng.sample(paths, 3)
    write_fact(root, changed[0], rng, 1000 + step)  # new text, new motifs
    text = (root / changed[1]).read_text(encoding="utf-8")
    text = (
        text.replace("status: retracted\n", "")
        if "status:" in text
        else text.replace("---\n", "---\nstatus: retracted\n", 1)
    )
    (root / changed[1]).write_text(text, encoding="utf-8")
    (root / changed[2]).unlink()
    write_fact(root, f"facts/new{step}.md", rng, 2000 + step)


def listed(candidates) -> list:
    return [(c.pass_name, c.subject, c.fingerprint, c.score, list(c.orders)) for c in candidates]


def every_list(lists: CandidateLists, ctx) -> tuple[dict, list[str]]:
    out, how = {}, []
    for p in [DuplicateGroups(), *all_passes().values()]:
        kept = lists.candidates(p, ctx)
        assert kept.fingerprints == [c.fingerprint for c in kept]
        out[p.name] = listed(kept)
        how.append(lists.last)
    return out, how


def fresh_lists(ctx) -> dict:
    """Every pass's list computed from nothing: vectors embedded again in an empty db, every search exact."""
    fresh = Inputs(corpus=ctx.corpus, embedder=Embedder(Store(None)), config=ctx.config)
    return {p.name: listed(p.candidates(fresh)) for p in [DuplicateGroups(), *all_passes().values()]}


def test_kept_lists_equal_a_fresh_computation_over_random_edits(tmp_path):
    rng = random.Random(7)
    root = tmp_path / "corpus"
    write_corpus(root, rng, 30)
    store = Store(tmp_path / "judge.db")
    config = Config()
    # some embedding groups too, not only motif ones
    config.discovery.group_similarity = 0.5
    lists = CandidateLists(store)
    for step in range(4):
        # the neighbour lists kept in the db, as a session keeps them
        ctx = Inputs(corpus=load_corpus(root), embedder=Embedder(store, memory=Memory(store)), config=config)
        got, how = every_list(lists, ctx)
        assert how == ["computed"] * 4, f"step {step}: the facts changed, so every list is computed"
        again, how = every_list(
            lists, Inputs(corpus=load_corpus(root), embedder=Embedder(store, memory=Memory(store)), config=config)
        )
        assert how == ["stored"] * 4, f"step {step}: nothing changed, so every list is read back"
        assert again == got
        assert got == fresh_lists(ctx), f"step {step}"
        assert all(got[name] for name in ("exact", "alias", "prune", "discovery")), "each pass has candidates"
        edit(root, rng, step)
    store.close()


def test_a_changed_setting_or_model_computes_the_list_again(tmp_path):
    root = tmp_path / "corpus"
    write_corpus(root, random.Random(3), 12)
    store = Store(tmp_path / "judge.db")
    lists, prune = CandidateLists(store), all_passes()["prune"]
    ctx = Inputs(corpus=load_corpus(root), embedder=Embedder(store), config=Config())
    lists.candidates(prune, ctx)
    lists.candidates(prune, ctx)
    assert lists.last == "stored"
    ctx.config.shortlist.k = 2
    short = lists.candidates(prune, ctx)
    assert lists.last == "computed" and listed(short) == listed(prune.candidates(ctx))
    # as if another model or backend made the vectors
    ctx.embedder.model_name += "+other"
    lists.candidates(prune, ctx)
    assert lists.last == "computed"
    store.close()


def test_sessions_read_lists_back_with_the_same_counts_and_rebuild_recomputes_them(corpus_repo, tmp_path):
    judge = scripted(tmp_path)
    first = review(corpus_repo.root, ReviewOptions(judge=judge))
    store = Store.for_corpus(corpus_repo.root)
    made = dict(store.db.execute("SELECT pass, made_at FROM candidate_lists").fetchall())
    store.close()
    assert set(made) == {"exact", "alias", "prune", "discovery"}
    second = review(corpus_repo.root, ReviewOptions(judge=judge))
    store = Store.for_corpus(corpus_repo.root)
    assert dict(store.db.execute("SELECT pass, made_at FROM candidate_lists").fetchall()) == made  # read, not made
    store.close()
    for name in ("alias", "prune", "discovery"):
        a, b = first.passes[name], second.passes[name]
        assert b.candidates == a.candidates and b.cached == a.candidates and b.judge_calls == 0, name
    counts = rebuild(corpus_repo.root)
    assert counts["candidate_lists"] == 4


def test_the_fast_fingerprints_equal_the_canonical_json_one():
    import hashlib
    import json

    from knomit_judge.corpus import content_id
    from knomit_judge.verdicts import encoded_side, fingerprint, fingerprint_encoded, pair_fingerprint

    # the definition: sides sorted by their JSON, written compactly, hashed
    def canonical(*sides):
        return hashlib.sha256(json.dumps(sorted(sides, key=json.dumps), separators=(",", ":")).encode()).hexdigest()[
            :24
        ]

    rng = random.Random(5)
    ids = [content_id(f"fact {i}") for i in range(40)]
    spellings = ["retry-storm", "retry storm", "Retry Storm", "naïve-cache", 'quote"d', "a", "ab", "ab c", "ab-c"]
    for _ in range(300):
        a, b = rng.sample(ids, 2)
        assert pair_fingerprint(a, b) == pair_fingerprint(b, a) == fingerprint(a, b) == canonical(a, b)
        sides = [[m, sorted(rng.sample(ids, rng.randint(0, 5)))] for m in rng.sample(spellings, 2)]
        want = canonical(*sides)
        assert fingerprint(*sides) == want
        assert (
            fingerprint_encoded(*map(encoded_side, sides))
            == fingerprint_encoded(*map(encoded_side, sides[::-1]))
            == want
        )
