"""Shortlist: embeddings choose what the judge looks at (nearest neighbours); they never decide."""

from __future__ import annotations

import numpy as np

# Rows per block of the similarity product: bounds memory to ~block*N floats, never N*N.
_BLOCK_FLOATS = 1 << 24


def top_k(vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact k nearest neighbours of each row (cosine on normalised rows), self excluded.

    Returns (indices, similarities), each (n, min(k, n-1)), best first; ties break by lower index.
    """
    n = len(vectors)
    k = min(k, n - 1)
    if k <= 0:
        return np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0), dtype=np.float32)
    idx = np.empty((n, k), dtype=np.int64)
    sims = np.empty((n, k), dtype=np.float32)
    block = max(1, _BLOCK_FLOATS // max(n, 1))
    for start in range(0, n, block):
        stop = min(n, start + block)
        s = vectors[start:stop] @ vectors.T
        s[np.arange(stop - start), np.arange(start, stop)] = -np.inf
        part = np.argpartition(-s, k - 1, axis=1)[:, :k] if k < n else np.argsort(-s, axis=1)[:, :k]
        part_s = np.take_along_axis(s, part, axis=1)
        # order by similarity desc, then index asc, so results are deterministic within ties
        order = np.lexsort((part, -part_s), axis=1)
        idx[start:stop] = np.take_along_axis(part, order, axis=1)
        sims[start:stop] = np.take_along_axis(part_s, order, axis=1)
    return idx, sims


def neighbour_pairs(vectors: np.ndarray, k: int) -> list[tuple[int, int, float]]:
    """Unordered pairs (i < j) from each row's k nearest, best first."""
    idx, sims = top_k(vectors, k)
    best: dict[tuple[int, int], float] = {}
    for i in range(len(idx)):
        for j, s in zip(idx[i].tolist(), sims[i].tolist()):
            pair = (i, j) if i < j else (j, i)
            if s > best.get(pair, -2.0):
                best[pair] = s
    return sorted(((i, j, s) for (i, j), s in best.items()), key=lambda t: (-t[2], t[0], t[1]))


def mean_pairwise(vectors: np.ndarray) -> float:
    n = len(vectors)
    if n < 2:
        return 1.0
    s = vectors @ vectors.T
    return float((s.sum() - np.trace(s)) / (n * (n - 1)))
