#!/usr/bin/env python3
"""alias_ceiling: how far the best combination of our MiniLM-based signals gets on the labelled knomit sample.

    .venv/bin/python benchmarks/alias_ceiling.py [--cache embeddings.db] [--backend torch] [--model DIR] [--json]

Issue 23's alias targets ask, on the real sample ../shared/data/knomit-kb-sample.tar.gz (read in place,
extracted to a temporary directory) against our labels in benchmarks/data/knomit-kb-motif-labels.json:
>= 85% of true pairs shortlisted, the median true pair in the first 2% of the candidates. This asks
whether any ranking built from what all-MiniLM-L6-v2 gives us can reach that, whatever the nominate.py
score does today.

Every pair of spellings (not only the nominated ones) gets each signal's strength: the cosines of the
name, carriers, content (carrier mean) and gloss vectors, each also corrected for hubness (CSLS:
2cos - r_a - r_b, r = mean cosine of a spelling's 10 nearest), the rank-based form of each (the better
of b's rank among a's neighbours and a's among b's, as -log), the word alignment, the best cosine between
a sentence of one side's carriers and one of the other's, the best cosine of one's name with a sentence of
the other's carriers, and the share of carriers the two hold in common. A logistic regression over them
(numpy, L2, standardised) is evaluated leave-one-group-out: spellings are split into folds, one per
labelled group (the rest dealt round), and a pair is scored only by the models of the folds of its two
spellings, trained on pairs that touch neither. Each single signal's own ranking is shown beside it.

Figures per ranking, over all pairs: the rank of the median true pair (and its share of all pairs), true
pairs in the first 20 and the first 130 (about what session 1 offers), and how many true pairs sit in
the first M, for M the size of today's candidate list at k = 5 (so "85% shortlisted" and "median in the
first 2% of the candidates" read as: >= 85% of true pairs in the first M, median rank <= 2% of M).
Also recall at k = 5 as nomination counts it: the pair is in either spelling's 5 best partners.

With recorded describe lines (--lines, default benchmarks/data/knomit-kb-describe-replies.jsonl when present;
--no-lines leaves them out), the line signal (name + line, embedded together) is one more signal: its own
ranking (`line`, `line_csls`, `line_rank`) and "all signals + line". The other rankings are as without lines.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench_recall import DESCRIBED, _layout, extract_sample, label_truth, recorded_lines, shared_data  # noqa: E402

from knomit_judge.corpus import load_corpus  # noqa: E402
from knomit_judge.embeddings import Embedder  # noqa: E402
from knomit_judge.nominate import (  # noqa: E402
    CarrierContent,
    carrier_text,
    family_weight,
    gloss_vectors,
    line_text,
    name_text,
    nominate,
    parse,
    sentences,
    word_alignment,
    word_weights,
)
from knomit_judge.store import Store  # noqa: E402

K = 5
HUB = 10  # neighbours whose mean cosine is a spelling's hubness radius
FIRST, SESSION = 20, 130


def csls(m: np.ndarray) -> np.ndarray:
    m = m.copy()
    np.fill_diagonal(m, -np.inf)
    r = np.sort(m, axis=1)[:, -HUB:].mean(1)
    out = 2 * m - r[:, None] - r[None, :]
    np.fill_diagonal(out, 0)
    return out


def rank_strength(m: np.ndarray) -> np.ndarray:
    """-log of the better of the two neighbour ranks (1 = nearest): mutual nearness, whatever the cosine scale."""
    m = m.copy()
    np.fill_diagonal(m, -np.inf)
    rank = np.argsort(np.argsort(-m, axis=1, kind="stable"), axis=1) + 1
    return -np.log(np.minimum(rank, rank.T))


def features(corpus, embedder, lines: dict | None = None) -> tuple[list[str], dict[str, np.ndarray]]:
    """Every signal as an n x n matrix of pair strengths; with `lines`, the line signal (name + line) too."""
    motifs = sorted(corpus.carriers)
    n = len(motifs)
    name = embedder.embed([name_text(m) for m in motifs])
    carriers = embedder.embed([carrier_text(m, corpus) for m in motifs])
    content = CarrierContent(motifs, corpus, embedder)
    gloss = gloss_vectors(motifs, name, carriers, corpus, embedder)
    means = content.means()
    sims = {"name": name @ name.T, "carriers": carriers @ carriers.T, "content_mean": means @ means.T,
            "gloss": gloss @ gloss.T}
    if lines:
        have = [i for i, m in enumerate(motifs) if lines.get(m)]
        lv = np.zeros_like(name)
        lv[have] = embedder.embed([line_text(parse(motifs[i]), lines[motifs[i]]) for i in have])
        sims["line"] = lv @ lv.T
    out: dict[str, np.ndarray] = {}
    for s, m in sims.items():
        out[s] = m
        out[f"{s}_csls"] = csls(m)
        out[f"{s}_rank"] = rank_strength(m)
    out["content"] = np.array([[content.similarity(i, j) if i != j else 0 for j in range(n)] for i in range(n)])
    parsed = [parse(m) for m in motifs]
    weight, family = word_weights(parsed), family_weight(n)
    words = sorted({w for p in parsed for w in p.words})
    vector = dict(zip(words, embedder.embed(words)))
    out["words"] = np.zeros((n, n))
    for i, j in itertools.combinations(range(n), 2):
        aligned = word_alignment(parsed[i].words, parsed[j].words, weight, vector, family)
        out["words"][i, j] = out["words"][j, i] = aligned
    # sentence level: every active carrier's title and body sentences
    facts = [f for f in corpus.active() if any(f.path in corpus.carriers[m] for m in f.motifs if m in corpus.carriers)]
    row = {f.path: i for i, f in enumerate(facts)}
    texts, owner = [], []
    for i, f in enumerate(facts):
        for t in sentences(f):
            texts.append(t)
            owner.append(i)
    owner = np.array(owner)
    sv = embedder.embed(texts)
    by_fact = [np.where(owner == i)[0] for i in range(len(facts))]
    ss = sv @ sv.T
    fact_best = np.array([[ss[np.ix_(a, b)].max() for b in by_fact] for a in by_fact])
    ns = name @ sv.T
    name_fact = np.stack([ns[:, ids].max(1) for ids in by_fact], axis=1)  # spelling x fact: best sentence
    carried = [[row[p] for p in corpus.carriers[m] if p in row] for m in motifs]
    best = np.zeros((n, n))
    cross = np.zeros((n, n))
    shared = np.zeros((n, n))
    for i, j in itertools.combinations(range(n), 2):
        a, b = set(carried[i]), set(carried[j])
        both = a & b
        shared[i, j] = shared[j, i] = len(both) / max(1, min(len(a), len(b)))
        a, b = sorted(a - both), sorted(b - both)  # a shared carrier says the same thing on both sides
        if a and b:
            best[i, j] = best[j, i] = fact_best[np.ix_(a, b)].max()
            cross[i, j] = cross[j, i] = (name_fact[i, b].max() + name_fact[j, a].max()) / 2
    out["sentence_best"], out["name_to_sentence"], out["cotagged"] = best, cross, shared
    return motifs, out


L2 = 100.0  # of a small grid (1, 100, 1000; classes balanced or not), the best held-out median: a kind ceiling


def logistic(x: np.ndarray, y: np.ndarray, l2: float = L2, steps: int = 50) -> np.ndarray:
    """L2-regularised logistic regression by Newton steps (classes as they are: balancing them ranked worse)."""
    x = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(x.shape[1])
    sw = np.ones(len(y))
    reg = np.full(x.shape[1], l2)
    reg[-1] = 0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(x @ w, -30, 30)))
        grad = x.T @ (sw * (p - y)) + reg * w
        hess = (x * (sw * p * (1 - p))[:, None]).T @ x + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def leave_one_group_out(motifs, feats: dict, names: list[str], truth: dict, in_sample: bool = False) -> np.ndarray:
    """Each pair scored by the models of its spellings' folds, trained on pairs touching neither fold.

    in_sample: one model fit on every pair and scored on the same pairs (an optimistic bound, not a measure).
    """
    n = len(motifs)
    at = {m: i for i, m in enumerate(motifs)}
    fold = np.full(n, -1)
    groups = truth["alias_groups"]
    for g, group in enumerate(groups):
        for s in group:
            fold[at[s]] = g
    rest = [i for i in range(n) if fold[i] < 0]
    for x, i in enumerate(rest):
        fold[i] = x % len(groups)
    iu, ju = np.triu_indices(n, 1)
    x = np.stack([feats[f][iu, ju] for f in names], axis=1)
    x = (x - x.mean(0)) / (x.std(0) + 1e-12)
    y = np.zeros(len(iu))
    true = {frozenset((at[a], at[b])) for a, b in truth["alias_pairs"]}
    for p, (i, j) in enumerate(zip(iu, ju)):
        y[p] = frozenset((int(i), int(j))) in true
    if in_sample:
        return np.hstack([x, np.ones((len(x), 1))]) @ logistic(x, y)
    score = np.zeros(len(iu))
    seen = np.zeros(len(iu))
    for g in range(len(groups)):
        out = (fold[iu] == g) | (fold[ju] == g)
        w = logistic(x[~out], y[~out])
        score[out] += np.hstack([x[out], np.ones((out.sum(), 1))]) @ w
        seen[out] += 1
    return score / seen


def figures(motifs, score: np.ndarray, truth: dict, listed: int) -> dict:
    """Figures of one ranking of every pair (score as a vector over the upper triangle)."""
    n = len(motifs)
    at = {m: i for i, m in enumerate(motifs)}
    iu, ju = np.triu_indices(n, 1)
    order = np.argsort(-score, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(1, len(order) + 1)
    index = {(int(i), int(j)): p for p, (i, j) in enumerate(zip(iu, ju))}
    pairs = [tuple(sorted((at[a], at[b]))) for a, b in truth["alias_pairs"]]
    ranks = sorted(int(rank[index[p]]) for p in pairs)
    m = np.zeros((n, n))
    m[iu, ju] = score
    m = m + m.T
    np.fill_diagonal(m, -np.inf)
    near = np.argsort(-m, axis=1, kind="stable")[:, :K]
    nominated = {frozenset((i, int(j))) for i in range(n) for j in near[i]}
    median = ranks[(len(ranks) - 1) // 2]
    return {"median_rank": median, "median_share_of_listed": round(median / listed, 4),
            "first20": sum(r <= FIRST for r in ranks), "first130": sum(r <= SESSION for r in ranks),
            "in_first_listed": sum(r <= listed for r in ranks),
            "recall_at_5": sum(frozenset(p) in nominated for p in pairs),
            "true": len(ranks)}


def _ranks(motifs, score: np.ndarray, truth: dict) -> list[int]:
    """Each true pair's rank among all pairs (1 = first), in label order."""
    n = len(motifs)
    at = {m: i for i, m in enumerate(motifs)}
    rank = np.empty(len(score), dtype=np.int64)
    rank[np.argsort(-score, kind="stable")] = np.arange(1, len(score) + 1)
    index = {(int(i), int(j)): p for p, (i, j) in enumerate(zip(*np.triu_indices(n, 1)))}
    return [int(rank[index[tuple(sorted((at[a], at[b])))]]) for a, b in truth["alias_pairs"]]


class LocalModel:
    """An Embedder stand-in for --model: normalised vectors from a local sentence-transformers directory."""

    def __init__(self, path: Path):
        from sentence_transformers import SentenceTransformer  # only for --model: the shipped model needs none
        self.model, self.known = SentenceTransformer(str(path), device="cpu"), {}

    def embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            vectors = self.model.encode(missing, batch_size=16, normalize_embeddings=True, show_progress_bar=False)
            self.known.update(zip(missing, np.asarray(vectors, dtype=np.float32)))
        return np.array([self.known[t] for t in texts], dtype=np.float32).reshape(len(texts), -1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", help="embedding cache db to reuse (default: a temporary one)")
    ap.add_argument("--backend", default="torch", help="embedding backend (torch, as bench_recall's signal report)")
    ap.add_argument("--model", type=Path, help="another sentence-transformers model, as a local directory: is the "
                    "ceiling the model's? (its vectors are kept in memory only)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--lines", type=Path, default=DESCRIBED, help="recorded describe lines (a scripted replies file)")
    ap.add_argument("--no-lines", action="store_true", help="the signals without the line signal")
    args = ap.parse_args(argv)
    data = shared_data()
    if data is None:
        print("../shared/data absent: nothing to measure", file=sys.stderr)
        return 1
    truth = label_truth()
    with tempfile.TemporaryDirectory(prefix="knomit-alias-ceiling-") as tmp:
        root = extract_sample(Path(tmp) / "sample")
        corpus = load_corpus(root, layout=_layout(root))
        store = Store(Path(args.cache) if args.cache else Path(tmp) / "embeddings.db")
        try:
            embedder = LocalModel(args.model) if args.model else Embedder(store, backend=args.backend)
            start = time.perf_counter()
            lines = None if args.no_lines else recorded_lines(args.lines)
            motifs, feats = features(corpus, embedder, lines)
            listed = len(nominate(list(corpus.carriers), corpus, embedder, K))
            listed_lines = len(nominate(list(corpus.carriers), corpus, embedder, K, lines)) if lines else None
        finally:
            store.close()
    print(f"sample: {len(motifs)} spellings, {len(motifs) * (len(motifs) - 1) // 2:,} pairs, "
          f"{len(truth['alias_pairs'])} true pairs in {len(truth['alias_groups'])} groups; today's list at k={K}: "
          f"{listed} candidates (2% = rank {listed * 0.02:.0f}); features in {time.perf_counter() - start:.0f}s",
          file=sys.stderr)
    iu, ju = np.triu_indices(len(motifs), 1)
    rows = {name: figures(motifs, m[iu, ju], truth, listed) for name, m in feats.items()}
    before = [f for f in feats if not f.startswith("line")]  # the signals there were before lines
    sets = {"names only (LOGO logistic)": ["name", "name_csls", "name_rank", "words"],
            "no sentences (LOGO logistic)": [f for f in before if not f.startswith(("gloss", "sentence", "name_to"))],
            "all signals (LOGO logistic)": sorted(before)}
    if "line" in feats:
        sets["all signals + line (LOGO logistic)"] = sorted(feats)
        print(f"with lines ({len(lines)} spellings): today's list at k={K} becomes {listed_lines} candidates",
              file=sys.stderr)
    for label, names in sets.items():
        rows[label] = figures(motifs, leave_one_group_out(motifs, feats, names, truth), truth, listed)
    rows["all, fit on the test labels (bound)"] = figures(
        motifs, leave_one_group_out(motifs, feats, sorted(before), truth, in_sample=True), truth, listed)
    print(f"{'ranking of all pairs':<38} {'median rank':>11} {'/ list':>7} {'first 20':>8} {'first 130':>9} "
          f"{'in first ' + str(listed):>15} {'recall@5':>8}")
    for label, r in rows.items():
        print(f"{label:<38} {r['median_rank']:>11} {100 * r['median_share_of_listed']:>6.1f}% {r['first20']:>8} "
              f"{r['first130']:>9} {r['in_first_listed']:>11}/{r['true']:<3} {r['recall_at_5']:>5}/{r['true']}")
    # each true pair at the best rank any single signal gives it: no one ranking does better than this per pair
    ranks = {name: _ranks(motifs, feats[name][iu, ju], truth) for name in feats}
    oracle = sorted(min(ranks[name][x] for name in before) for x in range(len(truth["alias_pairs"])))
    print(f"{'each pair at its best single signal':<38} {oracle[(len(oracle) - 1) // 2]:>11} "
          f"{100 * oracle[(len(oracle) - 1) // 2] / listed:>6.1f}% {sum(r <= FIRST for r in oracle):>8} "
          f"{sum(r <= SESSION for r in oracle):>9} {sum(r <= listed for r in oracle):>11}/{len(oracle):<3}")
    reach = any(r["in_first_listed"] >= 0.85 * r["true"] and r["median_share_of_listed"] <= 0.02
                for label, r in rows.items() if "bound" not in label)
    print(f"targets (>= 85% in the first {listed}, median <= 2% of them): "
          f"{'reached' if reach else 'NOT reached'} by any held-out ranking above")
    if args.json:
        print(json.dumps({"listed": listed, "listed_with_lines": listed_lines, "rankings": rows, "reachable": reach}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
