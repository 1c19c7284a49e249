"""Neighbour lists as derived state: kept in the db, and updated next session only where vectors changed.

A stored search is each row's key (a digest of its vector, so the model and the text decide it), k,
and each row's k best (neighbour, canonical similarity). Next session, against the stored search
that shares most rows with this one:

- rows whose key is new (a changed or new text) are searched against all rows;
- a kept row one of whose neighbours left is searched again too (its next best is not stored);
- every other kept row keeps its list, merged with the new rows that reach its k-th best
  (one product of new rows x kept rows).

The result equals a full search (shortlist.exact_top_k): same canonical similarities, same tie-break
by key. Nothing changed: nothing is multiplied at all.
"""

from __future__ import annotations

import hashlib
import logging
import math

import numpy as np

from . import shortlist

log = logging.getLogger(__name__)

KEEP = 8  # stored searches kept (alias, prune, discovery, and a few more for other vector sets)
FULL_SHARE = 0.3  # past this share of rows to search again, one full search is cheaper


class Memory:
    """The stored searches of one db; shortlist.top_k asks it while `shortlist.remembered` is active."""

    def __init__(self, store):
        self.store = store
        self.last: dict = {}  # how the last search was answered: stored / incremental / full, and its sizes

    def top_k(self, v: np.ndarray, keys: list[bytes], rank: np.ndarray, k: int):
        digest = hashlib.blake2b(b"".join(keys), digest_size=16).hexdigest()
        stored = self.store.neighbour_sets(k)
        same = next((s for s in stored if s["digest"] == digest), None)
        if same is not None:
            _, idx, sims = self.store.neighbour_set(same["id"])
            self.store.touch_neighbour_set(same["id"])
            self.last = {"kind": "stored", "rows": len(keys), "searched": 0, "merged": 0}
            return idx, sims
        base, old = self._closest(stored, keys)
        if old is not None:
            update = incremental(v, keys, rank, k, *old)
            if update is not None:
                idx, sims, self.last = update
                self.store.put_neighbour_set(base, k, digest, keys, idx, sims, KEEP)
                return idx, sims
        idx, sims = shortlist.exact_top_k(v, rank, k)
        self.last = {"kind": "full", "rows": len(keys), "searched": len(keys), "merged": 0}
        self.store.put_neighbour_set(base, k, digest, keys, idx, sims, KEEP)
        return idx, sims

    def _closest(self, stored: list[dict], keys: list[bytes]):
        """The stored search sharing most rows with this one (fewest rows in or out), if any row is shared."""
        now = set(keys)
        best, best_cost, best_set = None, math.inf, None
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


def incremental(v, keys, rank, k, old_keys, old_idx, old_sims):
    """Update a stored search to the rows `keys`; None when a full search is cheaper."""
    n = len(keys)
    width = min(k, n - 1)
    at = {key: i for i, key in enumerate(keys)}
    new_of_old = np.array([at.get(key, -1) for key in old_keys] + [-1], dtype=np.int64)  # [-1]: padding maps to -1
    kept = np.zeros(n, dtype=bool)
    kept[new_of_old[new_of_old >= 0]] = True
    fresh = np.flatnonzero(~kept)
    lists = new_of_old[np.where(old_idx >= 0, old_idx, len(old_keys))]  # old lists, in new row numbers
    lost_old = ((lists < 0) & (old_idx >= 0)).any(axis=1)  # a neighbour left: its next best is not stored
    old_rows = np.flatnonzero(new_of_old[:-1] >= 0)
    lost = new_of_old[old_rows[lost_old[old_rows]]]
    search = np.union1d(fresh, lost)
    if len(search) > FULL_SHARE * n:
        return None
    idx = np.full((n, width), -1, dtype=np.int64)
    sims = np.full((n, width), -np.inf, dtype=np.float64)
    # kept rows keep their lists ...
    keep = old_rows[~lost_old[old_rows]]
    w = min(width, old_idx.shape[1])
    idx[new_of_old[keep], :w] = lists[keep, :w]
    sims[new_of_old[keep], :w] = old_sims[keep, :w]
    merged = 0
    if len(fresh):
        # ... merged with the new rows that reach their k-th best (float32 product, EPS below the bar)
        rows = new_of_old[keep]
        merged = _merge_fresh(v, rank, rows, fresh, idx, sims)
    if len(search):
        found, found_sims = shortlist.exact_top_k(v, rank, width, rows=search)
        idx[search], sims[search] = found, found_sims
    return idx, sims, {"kind": "incremental", "rows": n, "fresh": len(fresh), "lost": len(lost),
                       "searched": len(search), "merged": merged}


def _merge_fresh(v, rank, rows, fresh, idx, sims) -> int:
    """Put each fresh row that reaches a kept row's list into it, in the canonical order."""
    width = idx.shape[1]
    side = max(1, shortlist._BLOCK_FLOATS // max(1, len(fresh)))
    hit_rows, hit_cols = [], []
    for lo in range(0, len(rows), side):
        block = rows[lo:lo + side]
        tile = v[block] @ v[fresh].T
        bar = sims[block, width - 1] - shortlist.EPS  # -inf where the list is not full
        r, c = np.nonzero(tile >= bar[:, None])
        hit_rows.append(block[r])
        hit_cols.append(fresh[c])
    if not hit_rows or not sum(map(len, hit_rows)):
        return 0
    r, c = np.concatenate(hit_rows), np.concatenate(hit_cols)
    if not len(r):
        return 0
    s = shortlist.exact_sims(v, r, c)
    touched = np.unique(r)
    rr = np.concatenate([np.repeat(touched, width), r])
    cc = np.concatenate([idx[touched].ravel(), c])
    ss = np.concatenate([sims[touched].ravel(), s])
    valid = cc >= 0
    rr, cc, ss = rr[valid], cc[valid], ss[valid]
    order = np.lexsort((rank[cc], -ss, rr))
    rr, cc, ss = rr[order], cc[order], ss[order]
    pos = np.arange(len(rr)) - np.searchsorted(rr, rr)  # position within its row's run
    take = pos < width
    idx[touched] = -1
    sims[touched] = -np.inf
    idx[rr[take], pos[take]] = cc[take]
    sims[rr[take], pos[take]] = ss[take]
    return len(r)
