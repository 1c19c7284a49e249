#!/usr/bin/env python3
"""bench_scale: corpus loading, first embedding and the warm shortlist at N = 1k, 10k, 100k facts.

    .venv/bin/python benchmarks/bench_scale.py [--quick] [--sizes 1000,10000,100000] [--workdir DIR]

For each N (--quick: 1k and 10k), in fresh processes so each peak RSS is its own:
- prefill: parse the corpus (cold, then again through the file index), measure first-embed throughput
  on a sample of texts against an empty cache, then fill the real cache by encoding every text the
  passes embed (resumable: what is cached is not encoded again; 100k takes long on 2 cores);
- warm: a new process loads the corpus through the file index and builds the alias, prune and
  discovery candidate lists exactly as a session does, with every embedding cached (0 computed).
Corpora and caches are kept in --workdir (default /tmp/knomit-bench-scale), so a rerun is warm.
Targets at 100k: warm shortlist <= 60 s, peak RSS <= 2 GiB (both processes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHORTLIST_TARGET_S = 60.0
RSS_TARGET_MB = 2048.0
SAMPLE = 512  # texts encoded against an empty cache for the throughput figure


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def load(root: Path, store):
    from knomit_judge.corpus import load_corpus
    from knomit_judge.store import FileIndex
    index = FileIndex(store)
    start = time.perf_counter()
    corpus = load_corpus(root, index=index)
    seconds = time.perf_counter() - start
    index.save()
    return corpus, index, seconds


def texts_of(corpus) -> list[str]:
    """Every text the three passes embed: motif names and texts, then fact texts (discovery reuses prune's)."""
    from knomit_judge.nominate import name_text
    from knomit_judge.passes.alias import motif_text
    from knomit_judge.passes.discovery import proposed
    from knomit_judge.passes.prune import fact_text
    facts = [f for f in corpus.active() if not proposed(f)]
    return ([name_text(m) for m in corpus.carriers] + [motif_text(m, corpus) for m in corpus.carriers]
            + [fact_text(f) for f in facts])


def child_prefill(root: Path, db: Path) -> dict:
    from knomit_judge.embeddings import Embedder, load_model
    from knomit_judge.store import Store
    scratch = Store(None)  # an empty index: every file is parsed
    _, index, cold = load(root, scratch)
    parsed = index.parsed
    del index
    scratch.close()
    store = Store(db)
    corpus, _, _ = load(root, store)  # fills the benchmark's own index (once)
    _, index2, warm = load(root, store)
    texts = texts_of(corpus)
    start = time.perf_counter()
    load_model()
    model_s = time.perf_counter() - start
    empty = Store(None)  # an empty cache: every sampled text is really encoded
    sample = texts[:: max(1, len(texts) // SAMPLE)][:SAMPLE]
    sampler = Embedder(empty)
    start = time.perf_counter()
    sampler.embed(sample)
    sample_s = time.perf_counter() - start
    embedder = Embedder(store)
    start = time.perf_counter()
    embedder.embed(texts)
    fill_s = time.perf_counter() - start
    return {"facts": len(corpus.facts), "motifs": len(corpus.carriers), "texts": len(texts),
            "parse_cold_s": round(cold, 1), "parsed": parsed, "load_warm_s": round(warm, 1),
            "reused": index2.reused, "model_load_s": round(model_s, 1),
            "sample_texts_per_s": round(sampler.computed / sample_s, 1),
            "prefill_computed": embedder.computed, "prefill_s": round(fill_s, 1),
            "prefill_texts_per_s": round(embedder.computed / fill_s, 1) if embedder.computed else None,
            "rss_mb": round(peak_rss_mb())}


def child_warm(root: Path, db: Path) -> dict:
    from knomit_judge import shortlist
    from knomit_judge.config import Config
    from knomit_judge.embeddings import Embedder
    from knomit_judge.passes.alias import AliasPass
    from knomit_judge.passes.discovery import DiscoveryPass
    from knomit_judge.passes.prune import PrunePass, fact_text
    from knomit_judge.store import Store
    store = Store(db)
    corpus, index, load_s = load(root, store)
    embedder = Embedder(store)
    ctx = SimpleNamespace(corpus=corpus, embedder=embedder, config=Config())
    out = {"load_warm_s": round(load_s, 1), "reused": index.reused, "parsed": index.parsed}
    total = 0.0
    for p in (AliasPass(), PrunePass(), DiscoveryPass()):
        start = time.perf_counter()
        with shortlist.gc_paused():  # as review.run_round builds them
            out[f"{p.name}_candidates"] = len(p.candidates(ctx))
        out[f"{p.name}_s"] = round(time.perf_counter() - start, 1)
        total += time.perf_counter() - start
    out["shortlist_s"] = round(total, 1)
    # the parts: reading the cached fact vectors, and the exact neighbour search alone
    start = time.perf_counter()
    vectors = embedder.embed([fact_text(f) for f in corpus.active()])
    out["cache_read_s"] = round(time.perf_counter() - start, 1)
    shortlist._last = None  # not the remembered result: search again
    start = time.perf_counter()
    shortlist.top_k(vectors, ctx.config.shortlist.k)
    out["top_k_s"] = round(time.perf_counter() - start, 1)
    out["embedded"] = embedder.computed
    out["model_loaded"] = embedder.model_loaded
    out["rss_mb"] = round(peak_rss_mb())
    return out


def run_child(mode: str, root: Path, db: Path, log) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", mode, str(root), str(db)],
                          capture_output=True, text=True)
    if proc.returncode:
        log.write(proc.stderr)
        raise SystemExit(f"{mode} child failed for {root}:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1k and 10k only")
    ap.add_argument("--sizes", default=None, help="comma-separated N (default 1000,10000,100000)")
    ap.add_argument("--workdir", default="/tmp/knomit-bench-scale")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", nargs=3, metavar=("MODE", "ROOT", "DB"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        mode, root, db = args.child
        result = (child_prefill if mode == "prefill" else child_warm)(Path(root), Path(db))
        print(json.dumps(result))
        return 0

    sizes = [int(s) for s in (args.sizes or ("1000,10000" if args.quick else "1000,10000,100000")).split(",")]
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    from gen_corpus import generate
    rows = []
    for n in sizes:
        root, db = work / f"n{n}-s{args.seed}", work / f"n{n}-s{args.seed}.db"
        if not (root / "facts").is_dir():
            start = time.perf_counter()
            generate(n, args.seed, root, git=False)
            print(f"N={n}: generated in {time.perf_counter() - start:.0f}s", flush=True)
        prefill = run_child("prefill", root, db, sys.stderr)
        print(f"N={n}: prefill {json.dumps(prefill)}", flush=True)
        warm = run_child("warm", root, db, sys.stderr)
        print(f"N={n}: warm    {json.dumps(warm)}", flush=True)
        rows.append({"n": n, "prefill": prefill, "warm": warm})

    print(f"\n{'N':>7}  {'parse cold':>10}  {'load warm':>9}  {'embed texts/s':>13}  {'shortlist warm':>14}  "
          f"{'(alias/prune/disc)':>20}  {'top_k':>6}  {'embedded':>8}  {'RSS warm':>8}  {'RSS prefill':>11}")
    for r in rows:
        p, w = r["prefill"], r["warm"]
        rate = p["prefill_texts_per_s"] or p["sample_texts_per_s"]
        print(f"{r['n']:>7}  {p['parse_cold_s']:>9.1f}s  {w['load_warm_s']:>8.1f}s  {rate:>13.1f}  "
              f"{w['shortlist_s']:>13.1f}s  {w['alias_s']:>6.1f}/{w['prune_s']:.1f}/{w['discovery_s']:.1f}s"
              f"  {w['top_k_s']:>5.1f}s  {w['embedded']:>8}  {w['rss_mb']:>6.0f}MB  {p['rss_mb']:>9.0f}MB")
    checks = []
    for r in rows:
        w, p = r["warm"], r["prefill"]
        checks.append((f"N={r['n']}: warm session computed 0 embeddings, model not loaded",
                       w["embedded"] == 0 and not w["model_loaded"]))
        if r["n"] >= 100_000:
            checks.append((f"N={r['n']}: warm shortlist {w['shortlist_s']:.1f}s <= {SHORTLIST_TARGET_S:.0f}s",
                           w["shortlist_s"] <= SHORTLIST_TARGET_S))
            checks.append((f"N={r['n']}: peak RSS {max(w['rss_mb'], p['rss_mb']):.0f} MB <= {RSS_TARGET_MB:.0f} MB",
                           max(w["rss_mb"], p["rss_mb"]) <= RSS_TARGET_MB))
    for label, ok in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {label}")
    held = all(ok for _, ok in checks)
    print("target held" if held else "target NOT held")
    print(json.dumps({"rows": rows, "held": held}))
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
