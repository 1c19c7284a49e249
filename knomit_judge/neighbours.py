"""Neighbour lists as derived state: kept in the db, and updated next session only where vectors changed.

A stored search is each row's key (a digest of its vector, so the model and the text decide it) and
each row's nearest rows with their canonical similarities, DEPTH x k deep. Next session, against the
stored search that shares most rows with this one:

- rows whose key is new (a changed or new text) are searched against all rows;
- a kept row's list loses the rows that left; what remains is still its exact top-m, and only a
  row left with fewer than k is searched again;
- every kept row then takes in the new rows that reach its last known neighbour (one product of
  new rows x kept rows).

The result equals a full search (shortlist.exact_top_k): same canonical similarities, same tie-break
by key. Nothing changed: nothing is multiplied at all.
"""

from __future__ import annotations

import hashlib
import logging
import math
from typing import Any, TypedDict

import numpy as np

from . import shortlist
from .store import Store

log = logging.getLogger(__name__)

# lists are stored DEPTH x k deep, so a row that loses a neighbour still knows its next best
DEPTH = 2
# stored searches kept: alias, prune, discovery and a few more (~18 MB each at 100k rows)
KEEP = 6
# past this share of rows to search again, one full search is cheaper
FULL_SHARE = 0.3


class Searched(TypedDict, total=False):
    """How a search was answered: stored, incremental or full; its rows, what was searched and merged, its digest."""

    kind: str
    rows: int
    fresh: int
    short: int
    searched: int
    merged: int
    digest: str


class Memory:
    """The stored searches of one db; a shortlist.Searcher made with it asks it (Embedder(store, memory=..))."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # how the last search was answered
        self.last: Searched = {}

    def top_k(self, v: np.ndarray, keys: list[bytes], rank: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Each row's k nearest: the stored search of these very rows, else the closest one updated, else a full one."""
        depth = DEPTH * k
        width = min(k, len(keys) - 1)
        digest = hashlib.blake2b(b"".join(keys), digest_size=16).hexdigest()
        stored = self.store.neighbour_sets(depth)
        same = next((s for s in stored if s["digest"] == digest), None)
        if same is not None:
            _, idx, sims = self.store.neighbour_set(same["id"])
            self.store.touch_neighbour_set(same["id"])
            self.last = {"kind": "stored", "rows": len(keys), "searched": 0, "merged": 0, "digest": digest}
            return idx[:, :width].copy(), sims[:, :width].copy()
        base, old = self._closest(stored, keys)
        update = incremental(v, keys, rank, depth, old=old, need=k) if old is not None else None
        if update is not None:
            idx, sims, self.last = update
        else:
            idx, sims = shortlist.exact_top_k(v, rank, depth)
            self.last = {"kind": "full", "rows": len(keys), "searched": len(keys), "merged": 0}
        self.store.put_neighbour_set(base, depth, digest, (keys, idx, sims), KEEP)
        self.last["digest"] = digest
        log.debug("neighbour lists: %s", self.last)
        return idx[:, :width].copy(), sims[:, :width].copy()

    def _closest(
        self, stored: list[dict[str, Any]], keys: list[bytes]
    ) -> tuple[int | None, tuple[list[bytes], np.ndarray, np.ndarray] | None]:
        """The stored search sharing most rows with this one (fewest rows in or out), if any row is shared."""
        now = set(keys)
        best: int | None = None
        best_cost = math.inf
        best_set: list[bytes] = []
        for s in stored:
            old_keys = self.store.neighbour_keys(s["id"])
            shared = len(now.intersection(old_keys))
            cost = len(keys) + len(old_keys) - 2 * shared
            if shared and cost < best_cost:
                best, best_cost, best_set = s["id"], cost, old_keys
        if best is None:
            return None, None
        _, idx, sims = self.store.neighbour_set(best)
        return best, (best_set, idx, sims)


def incremental(
    v: np.ndarray,
    keys: list[bytes],
    rank: np.ndarray,
    depth: int,
    *,
    old: tuple[list[bytes], np.ndarray, np.ndarray],
    need: int,
) -> tuple[np.ndarray, np.ndarray, Searched] | None:
    """Update a stored search (lists up to `depth` deep) to the rows `keys`; None when a full search is cheaper.
    `old`: the stored search (its keys, lists and similarities).

    A stored list is the exact top-m of its row for some m <= depth. A neighbour that leaves shortens it
    (what remains is still exact); a row is searched again only when fewer than `need` remain.
    """
    old_keys, old_idx, old_sims = old
    n, n_old = len(keys), len(old_keys)
    width = min(depth, n - 1)
    at = {key: i for i, key in enumerate(keys)}
    # [-1]: padding maps to -1
    new_of_old = np.array([at.get(key, -1) for key in old_keys] + [-1], dtype=np.int64)
    kept = np.zeros(n, dtype=bool)
    kept[new_of_old[new_of_old >= 0]] = True
    fresh = np.flatnonzero(~kept)
    # the list held every other row: no bar to reach
    complete = (old_idx >= 0).sum(axis=1) == n_old - 1
    # old lists in new row numbers; -1: gone
    lists = new_of_old[np.where(old_idx >= 0, old_idx, n_old)]
    # close the gaps the leavers made, keeping the order
    order = np.argsort(lists < 0, axis=1, kind="stable")
    lists = np.take_along_axis(lists, order, axis=1)
    sims_old = np.where(lists >= 0, np.take_along_axis(old_sims, order, axis=1), -np.inf)
    count = (lists >= 0).sum(axis=1)
    old_rows = np.flatnonzero(new_of_old[:-1] >= 0)
    short = old_rows[(count[old_rows] < min(need, n - 1)) & ~complete[old_rows]]
    search = np.union1d(fresh, new_of_old[short])
    if len(search) > FULL_SHARE * n:
        return None
    keep = np.setdiff1d(old_rows, short)
    rows = new_of_old[keep]
    w = min(width, lists.shape[1])
    idx = np.full((n, width), -1, dtype=np.int64)
    sims = np.full((n, width), -np.inf, dtype=np.float64)
    idx[rows, :w] = lists[keep, :w]
    sims[rows, :w] = sims_old[keep, :w]
    merged = 0
    if len(fresh) and len(rows):
        merged = _merge_fresh(
            v, rank, rows, fresh, idx=idx, sims=sims, count=np.minimum(count[keep], w), complete=complete[keep]
        )
    if len(search):
        idx[search], sims[search] = shortlist.exact_top_k(v, rank, width, rows=search)
    return (
        idx,
        sims,
        {
            "kind": "incremental",
            "rows": n,
            "fresh": len(fresh),
            "short": len(short),
            "searched": len(search),
            "merged": merged,
        },
    )


def _merge_fresh(
    v: np.ndarray,
    rank: np.ndarray,
    rows: np.ndarray,
    fresh: np.ndarray,
    *,
    idx: np.ndarray,
    sims: np.ndarray,
    count: np.ndarray,
    complete: np.ndarray,
) -> int:
    """Put the fresh rows that reach a kept row's last known neighbour into its list, in the canonical order.

    Past that last neighbour nothing is known (rows outside the list may come next), so a merged list is
    cut after it, unless the list was complete (it held every other row).
    """
    width = idx.shape[1]
    last = np.where(count > 0, sims[rows, np.maximum(count - 1, 0)], -np.inf)
    bar = np.where(complete, -np.inf, last - shortlist.EPS)
    side = max(1, shortlist._BLOCK_FLOATS // max(1, len(fresh)))
    hit_rows, hit_cols = [], []
    for lo in range(0, len(rows), side):
        tile = v[rows[lo : lo + side]] @ v[fresh].T
        r, c = np.nonzero(tile >= bar[lo : lo + side, None])
        hit_rows.append(r + lo)  # positions in `rows`
        hit_cols.append(fresh[c])
    r, c = np.concatenate(hit_rows), np.concatenate(hit_cols)
    if not len(r):
        return 0
    s = shortlist.exact_sims(v, rows[r], c)
    touched = np.unique(r)
    cols = np.arange(width)
    rr = np.concatenate([np.repeat(touched, width), r])
    cc = np.concatenate([idx[rows[touched]].ravel(), c])
    ss = np.concatenate([sims[rows[touched]].ravel(), s])
    tail = np.concatenate([(cols[None, :] == (count[touched] - 1)[:, None]).ravel(), np.zeros(len(r), bool)])
    valid = cc >= 0
    rr, cc, ss, tail = rr[valid], cc[valid], ss[valid], tail[valid]
    order = np.lexsort((rank[cc], -ss, rr))
    rr, cc, ss, tail = rr[order], cc[order], ss[order], tail[order]
    # position within its row's run
    pos = np.arange(len(rr)) - np.searchsorted(rr, rr)
    # complete lists: no cut but the depth
    cut = np.full(len(rows), width, dtype=np.int64)
    ends = tail & ~complete[rr]
    cut[rr[ends]] = np.minimum(pos[ends] + 1, width)
    take = pos < cut[rr]
    target = rows[touched]
    idx[target] = -1
    sims[target] = -np.inf
    idx[rows[rr[take]], pos[take]] = cc[take]
    sims[rows[rr[take]], pos[take]] = ss[take]
    return len(r)
