"""The blockwise neighbour search is exact: it agrees with brute force, tiles or no tiles."""

from __future__ import annotations

import numpy as np
import pytest

from knomit_judge import shortlist
from knomit_judge.shortlist import Searcher, key_rank, neighbour_pairs, row_keys, top_k


def brute_top_k(v: np.ndarray, k: int, tiebreak: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The whole n x n matrix in float64, ordered by similarity desc then tiebreak (default: index) asc."""
    n = len(v)
    k = min(k, n - 1)
    s = v.astype(np.float64) @ v.astype(np.float64).T
    np.fill_diagonal(s, -np.inf)
    tiebreak = np.arange(n) if tiebreak is None else tiebreak
    order = np.lexsort((np.broadcast_to(tiebreak, (n, n)), -s), axis=1)[:, : max(k, 0)]
    return order, np.take_along_axis(s, order, axis=1)


def unit_rows(rng, n: int, dim: int = 16) -> np.ndarray:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(params=[4, 9, 64, 1 << 22], ids=["tile2", "tile3", "tile8", "default"])
def block(request, monkeypatch):
    """Force tiny tiles (side = sqrt of the floats), so every path of the tiling runs on small inputs."""
    monkeypatch.setattr(shortlist, "_BLOCK_FLOATS", request.param)
    return request.param


@pytest.mark.parametrize("n,k", [(2, 1), (5, 3), (37, 5), (120, 10), (61, 1)])
def test_top_k_equals_brute_force_on_random_vectors(block, n, k):
    v = unit_rows(np.random.default_rng(n * 100 + k), n)
    idx, sims = top_k(v, k)
    want_idx, want_sims = brute_top_k(v, k)
    assert idx.shape == sims.shape == (n, k)
    np.testing.assert_allclose(sims, want_sims, atol=1e-5)
    # indices agree wherever the reference has no near-tie around the position
    gaps = np.diff(want_sims, axis=1)
    clear = np.ones_like(idx, dtype=bool)
    clear[:, 1:] &= gaps < -1e-5
    clear[:, :-1] &= gaps < -1e-5
    assert (idx[clear] == want_idx[clear]).all()
    # the comparison above really covered the results
    assert clear.mean() > 0.9


def test_top_k_breaks_exact_ties_by_row_key(block):
    # small integer vectors: every dot product is exact, so ties are real ties in any tiling
    v = np.random.default_rng(7).integers(0, 3, size=(50, 4)).astype(np.float32)
    idx, sims = top_k(v, 6)
    want_idx, want_sims = brute_top_k(v, 6, key_rank(row_keys(v)))
    assert (sims == want_sims).all()
    assert (idx == want_idx).all()
    # there were ties to break
    assert (np.diff(sims, axis=1) == 0).any()


@pytest.mark.parametrize("n,k,width", [(0, 5, 0), (1, 5, 0), (2, 5, 1), (4, 10, 3), (6, 5, 5)])
def test_k_larger_than_the_corpus_and_tiny_inputs(block, n, k, width):
    v = unit_rows(np.random.default_rng(3), n)
    idx, sims = top_k(v, k)
    assert idx.shape == sims.shape == (n, width)
    if n > 1:
        # with k >= n-1 every row lists every other row once, itself never
        for i, row in enumerate(idx.tolist()):
            assert sorted(row) == [j for j in range(n) if j != i]
        np.testing.assert_allclose(sims, brute_top_k(v, k)[1], atol=1e-5)


def test_neighbour_pairs_dedups_and_ranks_best_first(block):
    v = unit_rows(np.random.default_rng(11), 40)
    k = 4
    pairs = neighbour_pairs(v, k)
    keys = [(i, j) for i, j, _ in pairs]
    assert all(i < j for i, j in keys)
    assert len(keys) == len(set(keys))
    idx, _ = brute_top_k(v, k)
    found = {(min(i, j), max(i, j)) for i in range(len(v)) for j in idx[i].tolist()}
    assert set(keys) == found
    # mutual neighbours existed, so dedup had work to do
    assert len(found) < len(v) * k
    scores = [s for _, _, s in pairs]
    assert scores == sorted(scores, reverse=True)
    for i, j, s in pairs:
        assert s == pytest.approx(float(v[i] @ v[j]), abs=1e-5)


def test_neighbour_pairs_of_tiny_inputs():
    assert neighbour_pairs(np.zeros((0, 8), np.float32), 5) == []
    assert neighbour_pairs(unit_rows(np.random.default_rng(0), 1), 5) == []
    pairs = neighbour_pairs(unit_rows(np.random.default_rng(0), 2), 5)
    assert [(i, j) for i, j, _ in pairs] == [(0, 1)]


def test_the_reused_result_is_never_stale(block):
    rng = np.random.default_rng(5)
    v = unit_rows(rng, 30)
    # what it searched last it reuses
    searcher = Searcher()
    first_idx, first_sims = searcher.top_k(v, 5)
    # the caller's copy: changing it must not change the next answer
    first_idx[:] = -7
    again, _ = searcher.top_k(v, 5)
    assert (again == brute_top_k(v, 5)[0]).all()
    # a smaller k is the prefix of the remembered larger one
    prefix, prefix_sims = searcher.top_k(v, 3)
    assert (prefix == brute_top_k(v, 3)[0]).all()
    np.testing.assert_allclose(prefix_sims, brute_top_k(v, 3)[1], atol=1e-5)
    w = v.copy()
    # one row changed: a different answer
    w[0] = -w[0]
    np.testing.assert_allclose(searcher.top_k(w, 5)[1], brute_top_k(w, 5)[1], atol=1e-5)
    # a larger k than remembered is computed
    assert (searcher.top_k(w, 8)[0] == brute_top_k(w, 8)[0]).all()
