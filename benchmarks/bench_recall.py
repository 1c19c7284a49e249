#!/usr/bin/env python3
"""bench_recall: how many planted alias pairs and duplicate facts the shortlist puts before the judge.

    .venv/bin/python benchmarks/bench_recall.py [--quick] [--n N] [--seeds 0,1,2,3,4] [--k 5,10]
                                                [--backends torch,onnx,onnx-int8]

For each seed a corpus of N=1000 facts is generated (--quick: 2 seeds); the alias and prune passes'
own candidate lists are computed at each k, exactly as a session would (exact duplicates are set aside
first, as the exact pass retracts them before prune runs). Recall = planted pairs shortlisted / planted.
Look-alike traps shortlisted are shown too: those must reach the judge, which is what tells them apart.
Target (ours; the issue sets none): mean recall >= 0.9 for both kinds at the shipped k = 5.
With several --backends (embedding backends, knomit_judge/encoders.py), each must keep the recall of the
first (torch), and the share of the first backend's candidate pairs that each one also shortlists is shown.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from gen_corpus import generate  # noqa: E402

from knomit_judge.config import Config  # noqa: E402
from knomit_judge.corpus import Corpus, load_corpus  # noqa: E402
from knomit_judge.embeddings import Embedder  # noqa: E402
from knomit_judge.passes.alias import AliasPass, motif_text  # noqa: E402
from knomit_judge.passes.prune import PrunePass, fact_text  # noqa: E402
from knomit_judge.store import Store  # noqa: E402

TARGET = 0.9


def pairs(candidates, key=lambda s: (s["a"], s["b"])) -> set[frozenset]:
    return {frozenset(key(c.subject)) for c in candidates}


def worst_rank(names: list[str], vectors, planted: set[frozenset]) -> int:
    """The largest k any planted pair needs: per pair, the better of its two neighbour ranks (1 = nearest)."""
    at = {name: i for i, name in enumerate(names)}
    sims = vectors @ vectors.T
    worst = 0
    for pair in planted:
        a, b = (at[x] for x in pair)
        rank = lambda i, j: int((sims[i] > sims[i, j]).sum())  # noqa: E731  (self counts for the 1-based rank)
        worst = max(worst, min(rank(a, b), rank(b, a)))
    return worst


def measure(root: Path, truth: dict, embedder: Embedder, ks: list[int]) -> list[dict]:
    corpus = load_corpus(root)
    losers = {b for _, b in truth["exact_duplicates"]}  # what the exact pass retracts before prune runs
    corpus = Corpus(root, {p: f for p, f in corpus.facts.items() if p not in losers}, corpus.problems)
    aliases = {frozenset(p) for p in truth["alias_pairs"]}
    traps = {frozenset(p) for p in truth["traps"]}
    dups = {frozenset(p) for p in truth["duplicate_pairs"]}
    motifs = list(corpus.carriers)
    facts = corpus.active()
    ranks = (worst_rank(motifs, embedder.embed([motif_text(m, corpus) for m in motifs]), aliases),
             worst_rank([f.path for f in facts], embedder.embed([fact_text(f) for f in facts]), dups))
    rows = []
    for k in ks:
        config = Config()
        config.shortlist.k = k
        ctx = SimpleNamespace(corpus=corpus, embedder=embedder, config=config)
        alias_c, prune_c = AliasPass().candidates(ctx), PrunePass().candidates(ctx)
        a, p = pairs(alias_c), pairs(prune_c)
        rows.append({"k": k, "pairs": (a, p), "alias_recall": len(a & aliases) / len(aliases), "dup_recall": len(p & dups) / len(dups),
                     "traps_shortlisted": len(a & traps) / len(traps), "alias_questions": len(alias_c),
                     "prune_questions": len(prune_c), "planted": (len(aliases), len(dups)),
                     "worst_rank": ranks})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds instead of 5")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seeds", default=None, help="comma-separated (default 0,1,2,3,4)")
    ap.add_argument("--k", default="5,10")
    ap.add_argument("--backends", default="torch", help="embedding backends to compare, the first the reference")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in (args.seeds or ("0,1" if args.quick else "0,1,2,3,4")).split(",")]
    ks = [int(k) for k in args.k.split(",")]

    backends = args.backends.split(",")
    out, held = {}, True
    base_pairs: dict = {}
    for backend in backends:
        summary, ok, pairs_of = run(args, seeds, ks, backend)
        out[backend] = summary
        held &= ok
        if backend == backends[0]:
            base_pairs = pairs_of
            continue
        same = all(summary[k][key] >= out[backends[0]][k][key] for k in ks for key in ("alias_recall", "dup_recall"))
        share = lambda mine, ref: round(len(mine & ref) / max(1, len(ref)), 3)  # noqa: E731
        overlap = {f"seed {s} k={k}": [share(pairs_of[(s, k)][i], base_pairs[(s, k)][i]) for i in (0, 1)]
                   for s in seeds for k in ks}
        print(f"{backend}: share of {backends[0]}'s candidate pairs also shortlisted (alias, prune) per seed/k: "
              + ", ".join(f"{key} {v}" for key, v in overlap.items()))
        print(f"[{'PASS' if same else 'FAIL'}] {backend} keeps {backends[0]}'s recall at every k")
        held &= same
    print(json.dumps({"n": args.n, "seeds": seeds, "backends": out, "held": held}))
    return 0 if held else 1


def run(args, seeds, ks, backend):
    results: dict[int, list[dict]] = {k: [] for k in ks}
    pairs_of = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="knomit-bench-recall-") as tmp:
        store = Store(Path(tmp) / "embeddings.db")
        embedder = Embedder(store, backend=backend)
        embedder.encoder  # noqa: B018  load now, so a fallback to torch is known before anything is measured
        print(f"N={args.n}, seeds {seeds}, k {ks}, backend {embedder.backend}")
        print(f"  {'seed':>4} {'k':>3}  {'alias recall':>12}  {'dup recall':>10}  {'traps shortlisted':>17}  "
              f"{'alias qs':>8}  {'prune qs':>8}  planted (alias, dup)  worst rank (alias, dup)")
        for seed in seeds:
            root = Path(tmp) / f"seed{seed}"
            truth = generate(args.n, seed, root, git=False)
            for row in measure(root, truth, embedder, ks):
                results[row["k"]].append(row)
                pairs_of[(seed, row["k"])] = row.pop("pairs")
                print(f"  {seed:>4} {row['k']:>3}  {row['alias_recall']:>12.2f}  {row['dup_recall']:>10.2f}  "
                      f"{row['traps_shortlisted']:>17.2f}  {row['alias_questions']:>8}  {row['prune_questions']:>8}  "
                      f"{str(row['planted']):<20}  {row['worst_rank']}", flush=True)
        store.close()

    mean = lambda rows, key: sum(r[key] for r in rows) / len(rows)  # noqa: E731
    summary = {k: {key: round(mean(rows, key), 3) for key in ("alias_recall", "dup_recall", "traps_shortlisted")}
               for k, rows in results.items()}
    worst = tuple(max(r["worst_rank"][i] for r in results[ks[0]]) for i in (0, 1))
    print(f"\nworst neighbour rank of any planted pair (the k it needs): alias {worst[0]}, duplicate {worst[1]}")
    print(f"mean over {len(seeds)} seeds ({time.perf_counter() - start:.0f}s), backend {backend}:")
    for k, s in summary.items():
        print(f"  k={k:<3} alias recall {s['alias_recall']:.3f}   duplicate recall {s['dup_recall']:.3f}   "
              f"traps shortlisted {s['traps_shortlisted']:.3f}")
    held = 5 in summary and summary[5]["alias_recall"] >= TARGET and summary[5]["dup_recall"] >= TARGET
    print(f"[{'PASS' if held else 'FAIL'}] {backend}: mean recall at k=5 >= {TARGET} for alias and duplicate pairs")
    return summary, held, pairs_of


if __name__ == "__main__":
    sys.exit(main())
