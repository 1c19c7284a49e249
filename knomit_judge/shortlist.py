"""Shortlist: embeddings choose what the judge looks at (nearest neighbours); they never decide.

The neighbour search is exact and blockwise: the similarity matrix is computed
one square tile at a time, so memory is O(n*k + tile), never n*n. Each tile is
used twice (it holds both (i, j) and (j, i)), so only the upper triangle is
multiplied; each row's running k-th best is the bar a tile entry must reach to
be looked at, which keeps the selection work well below the multiplication.
Tiles run on one thread per core.

The float32 tiles only pick a few more than k candidates per row. Their order is
then settled by one canonical similarity (float64 products summed row by row, see
exact_sims): a BLAS product's last bits depend on the shapes multiplied, so without
it a search of a few changed rows (neighbours.py) could order a near-tie unlike a
full search. Ties break by each row's key, a digest of its vector, not by position,
so the order is the same whatever rows come and go between sessions.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

import numpy as np

from . import interrupts

# Floats per tile of the similarity product (16 MiB of float32): bounds memory, never N*N.
_BLOCK_FLOATS = 1 << 22
# Bound on |float32 tile product - canonical similarity| for unit vectors: 384 terms * 2**-24 is 2.3e-5.
EPS = 1e-4
# Candidates per row the float32 search keeps beyond k, so the canonical order rarely needs a whole row.
SPARE = 5
# Pairs whose canonical similarity is computed at a time (two float64 arrays of this many rows).
_PAIRS = 8192


class NeighbourMemory(Protocol):
    """Where neighbour lists persist between sessions (neighbours.Memory): a Searcher with one asks it."""

    def top_k(self, v: np.ndarray, keys: list[bytes], rank: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...


_Item = TypeVar("_Item")
# A search's key: the vectors' shape, the tile size and a digest of the vectors.
_Key = tuple[tuple[int, ...], int, bytes]


class Searcher:
    """The nearest-neighbour searches of one owner (a session's embedder, Embedder.searcher): where the lists
    persist between sessions (`memory`, a neighbours.Memory; None: searched in full every time), and the last
    result, reused when the same vectors are asked for again (prune and discovery both search the fact vectors
    in one round; a smaller k is a prefix of a larger one). What it answers depends on the vectors and k alone."""

    def __init__(self, memory: NeighbourMemory | None = None) -> None:
        self.memory = memory
        self._last: tuple[_Key, int, np.ndarray, np.ndarray] | None = None  # key, k, indices, similarities

    def top_k(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact k nearest neighbours of each row (cosine on normalised rows), self excluded.

        Returns (indices, similarities), each (n, min(k, n-1)), best first; ties break by the lower
        row key (row_keys). With a memory, the lists come from the db, updated where rows changed.
        """
        n = len(vectors)
        # the stored lists are kept for the k asked, whatever the corpus size
        asked, k = k, min(k, n - 1)
        if k <= 0:
            return np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0), dtype=np.float64)
        v = np.ascontiguousarray(vectors, dtype=np.float32)
        key = (v.shape, _BLOCK_FLOATS, hashlib.blake2b(v.data, digest_size=16).digest())
        if self._last is not None and self._last[0] == key and self._last[1] >= k:
            return self._last[2][:, :k].copy(), self._last[3][:, :k].copy()
        keys = row_keys(v)
        rank = key_rank(keys)
        if self.memory is not None:
            idx, sims = self.memory.top_k(v, keys, rank, asked)
        else:
            idx, sims = exact_top_k(v, rank, k)
        self._last = (key, k, idx, sims)
        return idx.copy(), sims.copy()


def top_k(vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Searcher.top_k of a searcher of its own: no memory, nothing reused."""
    return Searcher().top_k(vectors, k)


def row_keys(v: np.ndarray) -> list[bytes]:
    """A stable key per row: a digest of its vector (which the model and the text decide).

    Equal vectors get distinct keys by their order of appearance; being equal, which is which does not matter.
    """
    seen: dict[bytes, int] = {}
    keys = []
    for row in v:
        d = hashlib.blake2b(row.tobytes(), digest_size=16).digest()
        c = seen.get(d, 0)
        seen[d] = c + 1
        keys.append(d if not c else hashlib.blake2b(d + c.to_bytes(4, "little"), digest_size=16).digest())
    return keys


def key_rank(keys: list[bytes]) -> np.ndarray:
    """Each row's position among the sorted keys: the tie-break between equal similarities."""
    rank = np.empty(len(keys), dtype=np.int64)
    rank[sorted(range(len(keys)), key=keys.__getitem__)] = np.arange(len(keys))
    return rank


def exact_sims(v: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The canonical similarity of each (rows[i], cols[i]): float64 products, summed row by row.

    Every similarity that orders neighbours comes from here, whatever the batch, so equal pairs give
    equal bits (float32 products are exact in float64, and each row's sum runs in one fixed order).
    """
    out = np.empty(len(rows), dtype=np.float64)
    for s in range(0, len(rows), _PAIRS):
        a = v[rows[s : s + _PAIRS]].astype(np.float64)
        a *= v[cols[s : s + _PAIRS]]
        out[s : s + _PAIRS] = a.sum(axis=1)
    return out


def exact_top_k(
    v: np.ndarray, rank: np.ndarray, k: int, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The k best of each row in `rows` (default: all) against every row, in the canonical order."""
    n = len(v)
    k = min(k, n - 1)
    kk = min(k + SPARE, n - 1)
    if rows is None:
        rows = np.arange(n)
        cand, fsims = _search(v, kk)
    else:
        cand, fsims = _search_rows(v, rows, kk)
    return _settle(v, rank, rows, cand, fsims=fsims, k=k)


def _settle(
    v: np.ndarray, rank: np.ndarray, rows: np.ndarray, cand: np.ndarray, *, fsims: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Order each row's float32 candidates canonically; a row whose k-th could be an outsider is searched whole."""
    m, kk = cand.shape
    r = np.repeat(rows, kk)
    c = cand.ravel()
    s = exact_sims(v, r, c)
    order = np.lexsort((rank[c], -s, np.repeat(np.arange(m), kk)))
    idx = c[order].reshape(m, kk)[:, :k].copy()
    sims = s[order].reshape(m, kk)[:, :k].copy()
    if kk < len(v) - 1:
        # an outsider's float32 similarity is at most the kk-th kept one, so its canonical one at most that + EPS
        doubt = np.flatnonzero(fsims[:, -1] + EPS >= sims[:, -1])
        if len(doubt):
            idx[doubt], sims[doubt] = _reaching_rows(v, rank, rows[doubt], sims[doubt, -1], k)
    return idx, sims


def _reaching_rows(
    v: np.ndarray, rank: np.ndarray, rows: np.ndarray, kth: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose k-th could be an outsider: every row within EPS of that k-th, canonically ordered."""
    side = max(1, _BLOCK_FLOATS // len(v))
    hit_r, hit_c = [], []
    for lo in range(0, len(rows), side):
        tile = v[rows[lo : lo + side]] @ v.T
        tile[np.arange(len(tile)), rows[lo : lo + side]] = -np.inf
        r, c = np.nonzero(tile >= (kth[lo : lo + side] - EPS)[:, None])
        hit_r.append(r + lo)
        hit_c.append(c)
    r, c = np.concatenate(hit_r), np.concatenate(hit_c)
    s = exact_sims(v, rows[r], c)
    order = np.lexsort((rank[c], -s, r))
    r, c, s = r[order], c[order], s[order]
    pos = np.arange(len(r)) - np.searchsorted(r, r)
    take = pos < k
    idx = np.empty((len(rows), k), dtype=np.int64)
    sims = np.empty((len(rows), k), dtype=np.float64)
    idx[r[take], pos[take]] = c[take]
    sims[r[take], pos[take]] = s[take]
    return idx, sims


def _search(v: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Float32 k best of every row against every row (self excluded), tile by tile over the upper triangle."""
    n = len(v)
    side = max(1, math.isqrt(_BLOCK_FLOATS))
    best = _Best(n, k)
    blocks = [(lo, min(n, lo + side)) for lo in range(0, n, side)]

    def diagonal(block: tuple[int, int]) -> None:
        lo, hi = block
        tile = v[lo:hi] @ v[lo:hi].T
        np.fill_diagonal(tile, -np.inf)
        kk = min(k, hi - lo - 1)
        if kk > 0:
            bar = -np.partition(-tile, kk - 1, axis=1)[:, kk - 1]
            rows, cols = _reaching(tile, bar, axis=1)
            best.merge(rows + lo, cols + lo, tile[rows, cols])

    def off_diagonal(pair: tuple[tuple[int, int], tuple[int, int]]) -> None:
        (lo, hi), (clo, chi) = pair
        tile = v[lo:hi] @ v[clo:chi].T
        rows, cols = _reaching(tile, best.bar(lo, hi), axis=1)
        best.merge(rows + lo, cols + clo, tile[rows, cols])
        # the same tile read as (j, i)
        rows, cols = _reaching(tile, best.bar(clo, chi), axis=0)
        best.merge(cols + clo, rows + lo, tile[rows, cols])

    pairs = [(a, b) for i, a in enumerate(blocks) for b in blocks[i + 1 :]]
    # Diagonal tiles first: each row's best within its own block sets a bar every later tile must reach.
    with _workers(len(blocks)) as run:
        run(diagonal, blocks)
        run(off_diagonal, pairs)
    return best.idx, best.sims


def _search_rows(v: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Float32 k best of the given rows against every row (self excluded): a band of the full search."""
    n, m = len(v), len(rows)
    side = max(1, math.isqrt(_BLOCK_FLOATS))
    best = _Best(m, k)
    cols = [(lo, min(n, lo + side)) for lo in range(0, n, side)]

    def band(block: tuple[int, int]) -> None:
        lo, hi = block
        q = v[rows[lo:hi]]
        for j, (clo, chi) in enumerate(cols):
            tile = q @ v[clo:chi].T
            own = np.flatnonzero((rows[lo:hi] >= clo) & (rows[lo:hi] < chi))
            tile[own, rows[lo:hi][own] - clo] = -np.inf
            bar = best.bar(lo, hi)
            # nothing kept yet: the tile's own k-th best is the bar
            if j == 0 and chi - clo > k:
                bar = -np.partition(-tile, k - 1, axis=1)[:, k - 1]
            r, c = _reaching(tile, bar, axis=1)
            best.merge(r + lo, c + clo, tile[r, c])

    blocks = [(lo, min(m, lo + side)) for lo in range(0, m, side)]
    with _workers(len(blocks)) as run:
        run(band, blocks)
    return best.idx, best.sims


class _Run(Protocol):
    """Runs `fn` on each item, all done (and any error raised) when it returns."""

    def __call__(self, fn: Callable[[_Item], None], items: Sequence[_Item], /) -> None: ...


@contextlib.contextmanager
def _workers(blocks: int) -> Iterator[_Run]:
    """Run tiles on one thread per core, each with a single-threaded BLAS, when threadpoolctl is there.

    A multithreaded BLAS leaves the selection work (one core) waiting on the products; one tile per
    thread keeps every core busy on both. threadpoolctl comes with sentence-transformers (via
    scikit-learn); without it, or for a single tile, tiles run in order on this thread.
    """
    cores = os.cpu_count() or 1
    # a stop asked for skips the tiles not begun, and raises once those running end
    asked = interrupts.watcher()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if blocks < 2 or cores < 2 or threadpool_limits is None:

        def in_order(fn: Callable[[_Item], None], items: Sequence[_Item], /) -> None:
            for item in items:
                interrupts.check()
                fn(item)

        yield in_order
        return
    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(cores) as pool:

        def on_threads(fn: Callable[[_Item], None], items: Sequence[_Item], /) -> None:
            # waits, and raises what one raised
            list(pool.map(lambda item: None if asked() else fn(item), items))
            interrupts.check()

        yield on_threads


def _reaching(tile: np.ndarray, bar: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) positions in tile that reach the bar of their row (axis=1) or of their column (axis=0)."""
    # far faster than 2-d nonzero
    hits = np.flatnonzero(tile >= (bar[:, None] if axis == 1 else bar[None, :]))
    return np.divmod(hits, tile.shape[1])


class _Best:
    """Each row's k best (index, similarity) so far, ordered by similarity desc then index asc.

    Merges hold a lock; bars are read without it, which is safe: a bar only rises, so a stale
    one lets more candidates through to the merge, never fewer.
    """

    def __init__(self, n: int, k: int) -> None:
        self.k = k
        self.idx = np.full((n, k), -1, dtype=np.int64)
        self.sims = np.full((n, k), -np.inf, dtype=np.float32)
        self.lock = threading.Lock()

    def bar(self, lo: int, hi: int) -> np.ndarray:
        """What a new neighbour of rows lo..hi must reach: their current k-th best (>=, so ties are kept)."""
        return self.sims[lo:hi, self.k - 1].copy()

    def merge(self, rows: np.ndarray, cols: np.ndarray, sims: np.ndarray) -> None:
        """Take in candidate (row, col, similarity) triples, keeping each row's k best in order."""
        if not len(rows):
            return
        k = self.k
        with self.lock:
            touched = np.unique(rows)
            r = np.concatenate([np.repeat(touched, k), rows])
            c = np.concatenate([self.idx[touched].ravel(), cols])
            s = np.concatenate([self.sims[touched].ravel(), sims.astype(np.float32, copy=False)])
            order = np.lexsort((c, -s, r))
            r, c, s = r[order], c[order], s[order]
            # position within its row's run
            rank = np.arange(len(r)) - np.searchsorted(r, r)
            keep = rank < k
            self.idx[r[keep], rank[keep]] = c[keep]
            self.sims[r[keep], rank[keep]] = s[keep]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Build candidate lists without the cyclic garbage collector.

    At 100k facts a pass builds ~350k candidates of small dicts and lists, none of them in a cycle;
    the collector rescans the growing heap again and again meanwhile (3x the build time, measured).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def neighbour_pairs(
    vectors: np.ndarray, k: int, search: int = 0, searcher: Searcher | None = None
) -> list[tuple[int, int, float]]:
    """Unordered pairs (i < j) from each row's k nearest, best first (ties by i, then j).

    `search` > k searches that many and keeps the first k (the same k, the order being canonical): a later
    top_k of the same vectors up to `search` deep by the same `searcher` is then read from this search.
    """
    idx, sims = (searcher or Searcher()).top_k(vectors, max(k, search))
    idx, sims = idx[:, :k], sims[:, :k]
    if not idx.size:
        return []
    n = len(idx)
    rows = np.repeat(np.arange(n, dtype=np.int64), idx.shape[1])
    cols = idx.ravel()
    a, b = np.minimum(rows, cols), np.maximum(rows, cols)
    s = sims.ravel().astype(np.float64)
    # A pair found from both ends keeps its higher similarity (the two may differ in the last bit).
    order = np.lexsort((b, a, -s))
    a, b, s = a[order], b[order], s[order]
    _, first = np.unique(a * n + b, return_index=True)
    first.sort()
    return list(zip(a[first].tolist(), b[first].tolist(), s[first].tolist()))


def mean_pairwise(vectors: np.ndarray) -> float:
    """The mean similarity of distinct rows (1.0 for fewer than two)."""
    n = len(vectors)
    if n < 2:
        return 1.0
    s = vectors @ vectors.T
    return float((s.sum() - np.trace(s)) / (n * (n - 1)))
