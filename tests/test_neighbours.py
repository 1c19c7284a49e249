"""Stored neighbour lists, updated where rows changed, equal a full exact search after any edits."""

from __future__ import annotations

import numpy as np
import pytest

from knomit_judge import shortlist
from knomit_judge.neighbours import Memory
from knomit_judge.shortlist import Searcher, exact_top_k, key_rank, row_keys
from knomit_judge.store import Store


def unit_rows(rng, n: int, dim: int = 16) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def full(v: np.ndarray, k: int):
    return exact_top_k(v, key_rank(row_keys(v)), k)


def edit(rng, v: np.ndarray, pool: np.ndarray, share: float) -> np.ndarray:
    """Delete, change and insert about `share` of the rows each; inserts are often copies (exact ties)."""
    n = len(v)
    if not share:
        return v
    m = max(1, int(share * n))
    rows = list(v)
    for i in sorted(rng.choice(n, m, replace=False).tolist(), reverse=True):
        del rows[i]
    for i in rng.choice(len(rows), m, replace=False).tolist():
        rows[i] = pool[rng.integers(len(pool))]
    for _ in range(m):
        rows.insert(
            int(rng.integers(len(rows) + 1)),
            rows[rng.integers(len(rows))] if rng.random() < 0.4 else pool[rng.integers(len(pool))],
        )
    return np.array(rows, dtype=np.float32)


@pytest.fixture(params=[64, 1 << 22], ids=["tile8", "default"])
def block(request, monkeypatch):
    monkeypatch.setattr(shortlist, "_BLOCK_FLOATS", request.param)
    return request.param


@pytest.mark.parametrize("k", [1, 5])
def test_updated_lists_equal_a_full_search_over_random_edits(tmp_path, block, k):
    rng = np.random.default_rng(k)
    # few distinct directions in 4 dimensions: many exact ties and near-ties between neighbours
    pool = np.unique(rng.integers(-2, 3, size=(400, 4)), axis=0).astype(np.float32)
    pool = pool[np.linalg.norm(pool, axis=1) > 0]
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    v = pool[rng.integers(len(pool), size=150)]
    store = Store(tmp_path / "judge.db")
    kinds = []
    for session in range(12):
        memory = Memory(store)
        idx, sims = Searcher(memory).top_k(v, k)
        want_idx, want_sims = full(v, k)
        assert (idx == want_idx).all(), f"session {session}"
        assert (sims == want_sims).all(), f"session {session}"
        kinds.append(memory.last["kind"])
        # what is stored deeper than k is an exact prefix of a deeper full search, row by row
        (stored,) = store.neighbour_sets(2 * k)
        _, deep_idx, deep_sims = store.neighbour_set(stored["id"])
        want_deep, want_deep_sims = full(v, deep_idx.shape[1])
        for row in range(len(v)):
            m = int((deep_idx[row] >= 0).sum())
            assert m >= min(k, len(v) - 1)
            assert (deep_idx[row, :m] == want_deep[row, :m]).all() and (
                deep_sims[row, :m] == want_deep_sims[row, :m]
            ).all()
        v = edit(rng, v, pool, share=0.02 if session % 3 else 0.0)
    assert kinds[0] == "full"
    # each way of answering was really exercised
    assert "incremental" in kinds and "stored" in kinds
    store.close()


def test_updates_on_random_vectors_and_growing_from_tiny(tmp_path, block):
    rng = np.random.default_rng(5)
    pool = unit_rows(rng, 2000, dim=8)
    # fewer rows than k: lists widen as the corpus grows
    v = pool[:3]
    store = Store(tmp_path / "judge.db")
    for session in range(10):
        memory = Memory(store)
        idx, sims = Searcher(memory).top_k(v, 5)
        want_idx, want_sims = full(v, 5)
        assert idx.shape == want_idx.shape
        assert (idx == want_idx).all() and (sims == want_sims).all(), f"session {session}: {memory.last}"
        grown = pool[3 + 40 * session : 3 + 40 * (session + 1)]
        v = np.concatenate([edit(rng, v, pool, 0.05) if len(v) > 20 else v, grown])
    store.close()


def test_full_search_agrees_with_brute_force_in_the_canonical_order(block):
    rng = np.random.default_rng(9)
    # every row twice: each has an exact twin
    v = np.repeat(unit_rows(rng, 60), 2, axis=0)
    rng.shuffle(v)
    rank = key_rank(row_keys(v))
    idx, sims = exact_top_k(v, rank, 6)
    s = v.astype(np.float64) @ v.astype(np.float64).T
    np.fill_diagonal(s, -np.inf)
    for i in range(len(v)):
        order = np.lexsort((rank, -s[i]))[:6]
        assert set(idx[i].tolist()) == set(order.tolist()) or np.allclose(s[i, idx[i]], s[i, order], atol=1e-12)
        np.testing.assert_allclose(sims[i], s[i, order], atol=1e-12)
        assert sims[i, 0] == pytest.approx(1.0, abs=1e-6)  # the twin comes first
        twins = np.flatnonzero((v == v[i]).all(axis=1))
        assert idx[i, 0] in twins


def test_lists_are_kept_per_vector_set_and_rebuilt_when_emptied(tmp_path):
    rng = np.random.default_rng(2)
    a, b = unit_rows(rng, 300), unit_rows(rng, 200)
    store = Store(tmp_path / "judge.db")
    searcher = Searcher(Memory(store))
    searcher.top_k(a, 5)
    searcher.top_k(b, 5)
    assert store.db["neighbour_sets"].count == 2
    memory = Memory(store)
    searcher = Searcher(memory)
    ia, _ = searcher.top_k(a, 5)
    assert memory.last["kind"] == "stored"
    ib, _ = searcher.top_k(b, 5)
    assert memory.last["kind"] == "stored"
    assert (ia == full(a, 5)[0]).all() and (ib == full(b, 5)[0]).all()
    store.db.execute("DELETE FROM neighbour_sets")
    memory = Memory(store)
    Searcher(memory).top_k(a, 5)
    assert memory.last["kind"] == "full"
    store.close()


def test_sessions_keep_the_lists_and_rebuild_recomputes_them(corpus_repo, tmp_path):
    from helpers import scripted

    from knomit_judge import ReviewOptions, review
    from knomit_judge.rebuild import rebuild

    def sets():
        store = Store.for_corpus(corpus_repo.root)
        try:
            return {(r["id"], r["digest"]) for r in store.neighbour_sets(10)}
        finally:
            store.close()

    review(corpus_repo.root, ReviewOptions(judge=scripted(tmp_path)))
    first = sets()
    # the session stored its searches (k = 5, kept 10 deep)
    assert first
    review(corpus_repo.root, ReviewOptions(judge=scripted(tmp_path)))
    # nothing changed: the same searches answered, none added
    assert sets() == first
    counts = rebuild(corpus_repo.root)
    assert counts["neighbour_sets"] >= 1
    # recomputed from nothing: the same vector sets
    assert {d for _, d in sets()} == {d for _, d in first}
