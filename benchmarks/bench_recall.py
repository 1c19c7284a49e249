#!/usr/bin/env python3
"""bench_recall: how many planted alias pairs and duplicate facts the shortlist puts before the judge.

    .venv/bin/python benchmarks/bench_recall.py [--quick] [--n N] [--seeds 0,1,2,3,4] [--k 5,10]
                                                [--shape mechanisms|entities|motifs|both] [--entities-n 264]
                                                [--backends torch,onnx,onnx-int8] [--no-discovery]
    .venv/bin/python benchmarks/bench_recall.py --shape aekb [--k 5,10]   (the real entity vocabulary, with lines)

Entity vocabulary (gen_corpus.py --shape entities, 264 facts like the real knowledge base of issue 13):
per nominating signal and combined, recall at k, the rank of every true alias pair, and how many true
pairs are among the first 20 offers (what session 1 offers under the optimistic cap); a signal's own
list is ranked by its own strength, the combined list is the alias pass's. Also times string and
acronym nomination on 10k and 50k synthetic spellings.

Motif vocabulary (--shape motifs, issue 23): knomit's own motif shape, twice. The real sample
../shared/data/knomit-kb-sample.tar.gz, extracted to a temporary directory (skipped when ../shared is
absent), against our labels in benchmarks/data/knomit-kb-motif-labels.json; and gen_corpus.py --shape
motifs for seeds. For each: per signal and combined, recall at k, the rank of every true pair, the median
rank as a share of the candidates, true pairs among the first 20 offers; then 3 review sessions with the
default config and a perfect scripted judge (`same` for the pairs of a labelled group, the default
otherwise): groups unified and questions asked per unified group. The `words` signal only ranks pairs
other signals nominated, so its own list is empty.
With the recorded describe lines (benchmarks/data/knomit-kb-describe-replies.jsonl; describe-replies.md says
how a model wrote them), the sample is measured twice, without and with them: the lists, and the sessions
(the scripted judge's file then holds the lines too, so the session's describe step reads them).
Targets (issue 30, real sample, with lines): >= 75% of true pairs shortlisted, >= 60% of groups unified in 3
sessions at <= 15 questions per unified group.
Targets (issue 23, real sample): >= 85% of true pairs shortlisted, median true pair in the first 2% of
candidates, >= 80% of groups unified in 3 sessions at <= 15 questions per unified group.

Mechanism corpus: for each seed a corpus of N=1000 facts is generated (--quick: 2 seeds); the alias and
prune passes' own candidate lists are computed at each k, exactly as a session would (exact duplicates
are set aside first, as the exact pass retracts them before prune runs). Recall = planted pairs
shortlisted / planted. Look-alike traps shortlisted are shown too: those must reach the judge, which
is what tells them apart.
Targets (ours): mean recall >= 0.9 for both kinds at the shipped k = 5; on the entity vocabulary,
recall >= 0.9 at k = 5 and a true pair among the first 20 offers.
With several --backends (embedding backends, knomit_judge/encoders.py), the mechanism corpus is measured
with each; each must keep the recall of the first (torch), and the share of the first backend's candidate
pairs that each one also shortlists is shown. The entity vocabulary is measured with the first only.

Discovery group recall on real syntheses (synthesis_groups.py; skipped when ../shared/data is absent, or
with --no-discovery): of the 30 groups knomit's own judge distilled in aekb-history.bundle, how many one
of our discovery candidates holds (3 of its facts, or both of a pair), how many within the first 20
offers, and how many candidates that took. Targets (issue 23): >= 20 of 30, >= 10 in the first 20,
candidates <= 1.5x those of the old grouping (2,346 over the 30 states).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import synthesis_groups  # noqa: E402
from gen_corpus import generate, generate_entities, generate_motifs  # noqa: E402

from knomit_judge.config import Config, CorpusConfig  # noqa: E402
from knomit_judge.corpus import Corpus, load_corpus  # noqa: E402
from knomit_judge.embeddings import Embedder  # noqa: E402
from knomit_judge.init import init_corpus  # noqa: E402
from knomit_judge.layout import detect_knomit  # noqa: E402
from knomit_judge.nominate import SIGNALS, carrier_text, nominate  # noqa: E402
from knomit_judge.passes.alias import AliasPass  # noqa: E402
from knomit_judge.passes.base import Inputs
from knomit_judge.passes.prune import PrunePass, fact_text  # noqa: E402
from knomit_judge.session.review import ReviewOptions, review  # noqa: E402
from knomit_judge.store import Store  # noqa: E402

TARGET = 0.9
FIRST = 20  # the optimistic cap: what session 1 offers
# Discovery candidates over the 30 synthesis states with the grouping before issue 23 (5 nearest >= 0.6).
DISCOVERY_BEFORE = 2346


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
    ranks = (worst_rank(motifs, embedder.embed([carrier_text(m, corpus) for m in motifs]), aliases),
             worst_rank([f.path for f in facts], embedder.embed([fact_text(f) for f in facts]), dups))
    rows = []
    for k in ks:
        config = Config()
        config.shortlist.k = k
        ctx = Inputs(corpus=corpus, embedder=embedder, config=config)
        alias_c, prune_c = AliasPass().candidates(ctx), PrunePass().candidates(ctx)
        a, p = pairs(alias_c), pairs(prune_c)
        at = {frozenset((c.subject["a"], c.subject["b"])): i + 1 for i, c in enumerate(alias_c)}
        alias_ranks = sorted(at[x] for x in aliases if x in at)
        rows.append({"alias_ranks": alias_ranks, "alias_first": sum(r <= FIRST for r in alias_ranks),
                     "k": k, "pairs": (a, p), "alias_recall": len(a & aliases) / len(aliases), "dup_recall": len(p & dups) / len(dups),
                     "traps_shortlisted": len(a & traps) / len(traps), "alias_questions": len(alias_c),
                     "prune_questions": len(prune_c), "planted": (len(aliases), len(dups)),
                     "worst_rank": ranks})
    return rows


def signal_report(corpus, truth: dict, embedder: Embedder, k: int, lines: dict | None = None) -> dict:
    """Per signal and combined: recall at k, the rank of every true pair, true pairs among the first offers.

    A signal's own list is its nominations ranked by its own strength; the combined list is the
    alias pass's candidate list (every signal's nominations, ranked by the one score).
    """
    true = {frozenset(p) for p in truth["alias_pairs"]}
    traps = {frozenset(p) for p in truth["traps"]}
    noms = nominate(list(corpus.carriers), corpus, embedder, k, lines)
    lists = {s: sorted((n for n in noms if s in n.nominated_by), key=lambda n: -n.signals.get(s, 0.0)) for s in SIGNALS}
    lists["combined"] = noms
    out = {}
    for name, ranked in lists.items():
        rank = {frozenset((n.a, n.b)): i + 1 for i, n in enumerate(ranked)}
        ranks = sorted(rank[p] for p in true if p in rank)
        trap_ranks = sorted(rank[p] for p in traps if p in rank)
        median = (ranks + [None] * (len(true) - len(ranks)))[(len(true) - 1) // 2]  # a missed pair ranks last
        out[name] = {"recall": len(ranks) / len(true), "found": len(ranks), "true": len(true), "ranks": ranks,
                     "first": sum(r <= FIRST for r in ranks), "questions": len(ranked),
                     "median_share": None if median is None else round(median / len(ranked), 4),
                     "traps_first": sum(r <= FIRST for r in trap_ranks), "traps_listed": len(trap_ranks)}
    missed = [sorted(p) for p in true if p not in {frozenset((n.a, n.b)) for n in noms}]
    out["combined"]["missed"] = missed
    return out


def entities(seeds: list[int], n: int, ks: list[int], tmp: Path, embedder: Embedder) -> dict:
    """The entity vocabulary of real shape: per signal and combined, per seed and k."""
    print(f"\nentity vocabulary (gen_corpus.py --shape entities), N={n} facts, seeds {seeds}")
    print(f"  {'seed':>4} {'k':>3}  {'signal':<9} {'recall':>12}  {'in first 20':>11}  {'traps in first 20':>17}  "
          f"{'questions':>9}  ranks of the true pairs")
    rows = {k: {} for k in ks}
    for seed in seeds:
        root = tmp / f"entities{seed}"
        truth = generate_entities(n, seed, root, git=False)
        corpus = load_corpus(root)
        for k in ks:
            report = signal_report(corpus, truth, embedder, k)
            for name, r in report.items():
                rows[k].setdefault(name, []).append(r)
                print(f"  {seed:>4} {k:>3}  {name:<9} {r['found']:>3}/{r['true']:<3} {r['recall']:.2f}"
                      f"  {r['first']:>11}  {r['traps_first']:>17}  {r['questions']:>9}  {r['ranks']}", flush=True)
            if report["combined"]["missed"]:
                print(f"  {'':>8}  missed: {report['combined']['missed']}")
    summary = {}
    for k, by in rows.items():
        for name, rs in by.items():
            summary.setdefault(k, {})[name] = {
                "recall": round(sum(r["found"] for r in rs) / sum(r["true"] for r in rs), 3),
                "first": sum(r["first"] for r in rs), "true": sum(r["true"] for r in rs),
                "worst_rank": max((max(r["ranks"], default=0) for r in rs), default=0)}
    print(f"  sums over {len(seeds)} seeds:")
    for k, by in summary.items():
        for name, s in by.items():
            print(f"    k={k:<3} {name:<9} recall {s['recall']:.3f}   true pairs in the first {FIRST} offers "
                  f"{s['first']}/{s['true']}   worst rank {s['worst_rank']}")
    return summary


LABELS = ROOT / "benchmarks" / "data" / "knomit-kb-motif-labels.json"
# The recorded describe lines of the sample (benchmarks/data/describe-replies.md says how they were made)
DESCRIBED = ROOT / "benchmarks" / "data" / "knomit-kb-describe-replies.jsonl"


def recorded_lines(path: Path = DESCRIBED) -> dict | None:
    """spelling -> line from a scripted replies file's describe entries, or None when there is no file."""
    if not path.is_file():
        return None
    from knomit_judge.passes.registry import answered
    from knomit_judge.scripted import ScriptedBackend
    return dict(ScriptedBackend(path, answered()).lines)
SAMPLE = "knomit-kb-sample.tar.gz"
SESSIONS = 3


def extract_sample(root: Path) -> Path:
    """The knomit sample extracted to `root` (shared_data() must have found it); returns `root`."""
    import tarfile

    with tarfile.open(shared_data() / SAMPLE) as tar:
        tar.extractall(root, filter="data")
    return root


def shared_data() -> Path | None:
    """../shared/data beside the repository (or beside the worktrees' folder, or $KNOMIT_SHARED/data), or None."""
    for base in ([Path(os.environ["KNOMIT_SHARED"]).parent] if os.environ.get("KNOMIT_SHARED") else []) + \
            [ROOT.parent, ROOT.parent.parent]:
        if (base / "shared" / "data" / SAMPLE).is_file():
            return base / "shared" / "data"
    return None


def label_truth(path: Path = LABELS) -> dict:
    """Our labels as a truth dict: every pair inside a group is true; hard negatives are the traps."""
    labels = json.loads(path.read_text(encoding="utf-8"))
    groups = [g["spellings"] for g in labels["groups"]]
    pairs = [[a, b] for g in groups for i, a in enumerate(g) for b in g[i + 1:]]
    return {"alias_groups": groups, "alias_pairs": pairs, "traps": [[n["a"], n["b"]] for n in labels["negative"]],
            "maybe": [[m["a"], m["b"]] for m in labels["maybe"]]}


def perfect_replies(truth: dict, path: Path, described: Path | None = None) -> str:
    """A scripted judge that says `same` for every pair of a true group (and the default for anything else);
    with `described`, that file's describe lines too (the recorded lines, as the session's describe step reads them)."""
    with open(path, "w", encoding="utf-8") as f:
        if described is not None:
            f.write(described.read_text(encoding="utf-8"))
        for a, b in truth["alias_pairs"]:
            f.write(json.dumps({"pass": "alias", "a": a, "b": b,
                                "reply": {"same": True, "mechanism": f"'{a}' and '{b}' name one mechanism."}}) + "\n")
    return f"scripted:{path}"


def sessions(root: Path, truth: dict, judge: str, count: int = SESSIONS) -> dict:
    """`count` alias sessions with the default config: groups unified, questions asked, merges."""
    if not (root / ".git").exists():  # everything committed first: decisions are applied only on a clean tree
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false",
               "-C", str(root)]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "the sample"]):
            subprocess.run(git + args, check=True, stdout=subprocess.DEVNULL)
    init_corpus(root)
    asked, lines = 0, []
    for _ in range(count):
        result = review(root, ReviewOptions(passes=("alias",), judge=judge))
        alias = result.passes["alias"]
        asked += alias.judged
        lines.append(alias.line())
        if "describe" in result.passes:
            lines.append(result.passes["describe"].line())
    carriers = load_corpus(root, layout=_layout(root)).carriers
    groups = truth["alias_groups"]
    unified = sum(sum(bool(carriers.get(s)) for s in g) == 1 for g in groups)
    return {"groups": len(groups), "unified": unified, "questions": asked, "lines": lines,
            "per_unified": round(asked / unified, 1) if unified else None}


def _layout(root: Path):
    found = detect_knomit(root)
    return CorpusConfig(paths=list(found.paths), motif_keys=list(found.motif_keys), retract=found.retract) \
        if found else None


def print_report(label: str, report: dict) -> None:
    print(f"  {label}")
    print(f"    {'signal':<9} {'recall':>12}  {'in first 20':>11}  {'median/cands':>12}  {'questions':>9}  ranks of the true pairs")
    for name, r in report.items():
        share = "-" if r["median_share"] is None else f"{100 * r['median_share']:.1f}%"
        print(f"    {name:<9} {r['found']:>3}/{r['true']:<3} {r['recall']:.2f}  {r['first']:>11}  {share:>12}  "
              f"{r['questions']:>9}  {r['ranks']}", flush=True)


def motifs(seeds: list[int], ks: list[int], tmp: Path, embedder: Embedder, n: int = 60) -> dict:
    """The real knomit sample against our labels (when ../shared is here) and the generated motif shape."""
    out: dict = {}
    data = shared_data()
    if data is None:
        print("\nknomit sample: ../shared/data absent, skipped")
    else:
        root = extract_sample(tmp / "knomit-sample")
        truth = label_truth()
        lines = recorded_lines()
        corpus = load_corpus(root, layout=_layout(root))
        print(f"\nknomit sample ({data / SAMPLE}): {len(corpus.facts)} facts, {len(corpus.carriers)} spellings; "
              f"labels: {len(truth['alias_groups'])} groups, {len(truth['alias_pairs'])} true pairs, "
              f"{len(truth['traps'])} hard negatives")
        co = [(a, b) for f in corpus.facts.values() for i, a in enumerate(f.motifs) for b in f.motifs[i + 1:]]
        true = {frozenset(p) for p in truth["alias_pairs"]}
        print(f"  co-tagged pairs: {len(set(map(frozenset, co)))}, of them true: "
              f"{sum(frozenset(p) in true for p in set(map(frozenset, co)))}")
        if lines is None:
            print(f"  no recorded describe lines ({DESCRIBED.relative_to(ROOT)} absent): without lines only")
        else:
            print(f"  recorded describe lines: {len(lines)} of {len(corpus.carriers)} spellings "
                  f"({DESCRIBED.relative_to(ROOT)})")
        for tag, given in (("", None), ("_lines", lines)):
            if tag and given is None:
                continue
            for k in ks:
                report = signal_report(corpus, truth, embedder, k, given)
                print_report(f"k={k}, {'with lines' if tag else 'without lines'}", report)
                out.setdefault(f"sample{tag}", {})[k] = {
                    name: {x: r[x] for x in ("recall", "first", "median_share", "questions", "ranks")}
                    for name, r in report.items()}
            where = root if not tag else extract_sample(tmp / "knomit-sample-lines")
            replies = perfect_replies(truth, tmp / f"sample{tag}.replies.jsonl", DESCRIBED if tag else None)
            run = sessions(where, truth, replies)
            for line in run["lines"]:
                print(f"    {line}")
            print(f"  {SESSIONS} sessions, perfect judge, default config, {'with' if tag else 'without'} lines: "
                  f"{run['unified']}/{run['groups']} groups unified, {run['questions']} questions, "
                  f"{run['per_unified']} per unified group", flush=True)
            out[f"sample{tag}_sessions"] = {x: run[x] for x in ("groups", "unified", "questions", "per_unified")}
    for seed in seeds:
        root = tmp / f"motifs{seed}"
        truth = generate_motifs(n, seed, root)
        corpus = load_corpus(root)
        print(f"\ngenerated motif shape (gen_corpus.py --shape motifs), seed {seed}: {len(corpus.facts)} facts, "
              f"{len(corpus.carriers)} spellings, {len(truth['alias_pairs'])} true pairs")
        for k in ks:
            report = signal_report(corpus, truth, embedder, k)
            print_report(f"k={k}", report)
            out.setdefault(f"seed{seed}", {})[k] = {name: {x: r[x] for x in ("recall", "first", "median_share")}
                                                    for name, r in report.items()}
        run = sessions(root, truth, f"scripted:{root.with_name(root.name + '.replies.jsonl')}")
        print(f"  {SESSIONS} sessions, perfect judge: {run['unified']}/{run['groups']} groups unified, "
              f"{run['questions']} questions, {run['per_unified']} per unified group", flush=True)
        out[f"seed{seed}_sessions"] = {x: run[x] for x in ("groups", "unified", "questions", "per_unified")}
    return out


AEKB_LINES = ROOT / "benchmarks" / "data" / "aekb-describe-replies.jsonl"


def aekb_entities(tmp: Path, embedder: Embedder, ks: list[int]) -> dict | None:
    """The real entity vocabulary: the aekb replay's last day (motifs and entities), against the `same` pairs of
    benchmarks/data/aekb-entity-aliases.tsv whose both spellings are carried that day; without and with the
    recorded describe lines (benchmarks/data/aekb-describe-replies.jsonl)."""
    from bench_living import ALIASES, BUNDLE, read_alias_labels, real_days

    if not BUNDLE.exists():
        print("\naekb entities: ../shared/data absent, skipped")
        return None
    days, _ = real_days(BUNDLE, tmp / "aekb-src", None)
    root = tmp / "aekb-last"
    for path, data in days[-1].files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    found = detect_knomit(root)
    corpus = load_corpus(root, layout=CorpusConfig(paths=list(found.paths), motif_keys=["motifs", "entities"],
                                                   retract=found.retract))
    pairs = [[a, b] for a, b in read_alias_labels(ALIASES) if corpus.carriers.get(a) and corpus.carriers.get(b)]
    truth = {"alias_pairs": pairs, "traps": []}
    lines = recorded_lines(AEKB_LINES)
    print(f"\naekb entities, last day ({days[-1].label}): {len(corpus.facts)} facts, {len(corpus.carriers)} spellings, "
          f"{len(pairs)} labelled same pairs carried that day; recorded lines: "
          + ("none" if lines is None else f"{len(lines)}"))
    out = {}
    for tag, given in (("without lines", None), ("with lines", lines)):
        if tag == "with lines" and given is None:
            continue
        for k in ks:
            report = signal_report(corpus, truth, embedder, k, given)
            print_report(f"k={k}, {tag}", {n: r for n, r in report.items() if n in ("line", "combined")})
            out.setdefault(tag, {})[k] = {x: report["combined"][x] for x in ("recall", "found", "true", "first",
                                                                              "questions", "ranks", "missed")}
    return out


def lexical_speed(sizes=(10_000, 50_000)) -> None:
    """String and acronym nomination work through key buckets: time it on large synthetic vocabularies."""
    from itertools import product

    from gen_vocabulary import HEADS, MODIFIERS

    from knomit_judge.nominate import _lexical, parse

    words = [f"{a} {b} {c}" for a, b, c in product(MODIFIERS, MODIFIERS, HEADS) if a != b]
    forms = [lambda s: s, lambda s: s.replace(" ", "-"), lambda s: s.title().replace(" ", ""),
             lambda s: "AWS " + s.title(), lambda s: "".join(w[0] for w in s.split()).upper()]
    for n in sizes:
        vocab = list(dict.fromkeys(f(w) for w in words[: n // 3] for f in forms))[:n]
        start = time.perf_counter()
        string, acronym = _lexical([parse(m) for m in vocab], 5)
        took = time.perf_counter() - start
        print(f"  string + acronym nomination over {len(vocab):,} spellings: {took:.2f}s "
              f"({sum(map(len, string.values())) + sum(map(len, acronym.values())):,} nominations)", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds instead of 5")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seeds", default=None, help="comma-separated (default 0,1,2,3,4)")
    ap.add_argument("--k", default="5,10")
    ap.add_argument("--shape", choices=["mechanisms", "entities", "motifs", "both", "aekb"], default="both",
                    help="aekb: the real entity vocabulary of the aekb replay's last day, without and with lines")
    ap.add_argument("--entities-n", type=int, default=264, help="facts of the entity corpus (264, as the real one)")
    ap.add_argument("--backends", default="torch", help="embedding backends to compare, the first the reference")
    ap.add_argument("--discovery", action=argparse.BooleanOptionalAction, default=True,
                    help="discovery group recall on the real syntheses (skipped when ../shared/data is absent)")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in (args.seeds or ("0,1" if args.quick else "0,1,2,3,4")).split(",")]
    ks = [int(k) for k in args.k.split(",")]
    backends = args.backends.split(",")

    held, ent, disc = True, None, None
    if args.shape == "aekb":
        with tempfile.TemporaryDirectory(prefix="knomit-bench-recall-") as tmp:
            store = Store(Path(tmp) / "embeddings.db")
            result = aekb_entities(Path(tmp), Embedder(store, backend=backends[0]), ks)
            store.close()
        print(json.dumps({"aekb": result}))
        return 0
    if args.discovery:
        held, disc = discovery()
    if args.shape == "motifs":
        with tempfile.TemporaryDirectory(prefix="knomit-bench-recall-") as tmp:
            store = Store(Path(tmp) / "embeddings.db")
            result = motifs(seeds, ks, Path(tmp), Embedder(store, backend=backends[0]))
            store.close()
        print(json.dumps({"motifs": result, **({"discovery": disc} if disc else {})}))
        return 0 if held else 1
    if args.shape != "mechanisms":
        with tempfile.TemporaryDirectory(prefix="knomit-bench-recall-") as tmp:
            store = Store(Path(tmp) / "embeddings.db")
            lexical_speed()
            ent = entities(seeds, args.entities_n, ks, Path(tmp), Embedder(store, backend=backends[0]))
            store.close()
        comb = ent[ks[0]]["combined"]
        ok = comb["recall"] >= TARGET and comb["first"] > 0
        held &= ok
        print(f"[{'PASS' if ok else 'FAIL'}] entity recall at k={ks[0]} >= {TARGET} and a true pair "
              f"in the first {FIRST} offers")
        if args.shape == "entities":
            print(json.dumps({"entities": ent, "held": held, **({"discovery": disc} if disc else {})}))
            return 0 if held else 1

    out, base_pairs = {}, {}
    for backend in backends:
        summary, ok, pairs_of, worst = run(args, seeds, ks, backend)
        out[backend] = {"mean": summary, "worst_rank": worst}
        held &= ok
        if backend == backends[0]:
            base_pairs = pairs_of
            continue
        ref = out[backends[0]]["mean"]
        same = all(summary[k][key] >= ref[k][key] for k in ks for key in ("alias_recall", "dup_recall"))
        share = lambda mine, ref: round(len(mine & ref) / max(1, len(ref)), 3)  # noqa: E731
        overlap = {f"seed {s} k={k}": [share(pairs_of[(s, k)][i], base_pairs[(s, k)][i]) for i in (0, 1)]
                   for s in seeds for k in ks}
        print(f"{backend}: share of {backends[0]}'s candidate pairs also shortlisted (alias, prune) per seed/k: "
              + ", ".join(f"{key} {v}" for key, v in overlap.items()))
        print(f"[{'PASS' if same else 'FAIL'}] {backend} keeps {backends[0]}'s recall at every k")
        held &= same
    print(json.dumps({"n": args.n, "seeds": seeds, "backends": out, "held": held,
                      **({"entities": ent} if ent is not None else {}), **({"discovery": disc} if disc else {})}))
    return 0 if held else 1


def discovery() -> tuple[bool, dict | None]:
    """Discovery group recall on the real syntheses, against issue 23's targets; (True, None) when the data is absent."""
    out = synthesis_groups.report(synthesis_groups.BUNDLE, Config())
    if out is None:
        return True, None
    out.pop("rows")
    ratio = out["candidates_total"] / DISCOVERY_BEFORE
    held = out["covered"] >= 20 and out["covered_first"] >= 10 and ratio <= 1.5
    print(f"[{'PASS' if held else 'FAIL'}] discovery: {out['covered']}/{out['groups']} real synthesis groups covered "
          f"(>= 20), {out['covered_first']} in the first {FIRST} (>= 10), candidates {ratio:.2f}x before (<= 1.5x)")
    return held, {**out, "candidates_vs_before": round(ratio, 3)}


def run(args, seeds, ks, backend):
    """The mechanism corpus with one embedding backend: mean recall per k, and each seed's candidate pairs."""
    results: dict[int, list[dict]] = {k: [] for k in ks}
    pairs_of = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="knomit-bench-recall-") as tmp:
        store = Store(Path(tmp) / "embeddings.db")
        embedder = Embedder(store, backend=backend)
        embedder.encoder  # noqa: B018  load now, so a fallback to torch is known before anything is measured
        print(f"\nmechanism corpus, N={args.n}, seeds {seeds}, k {ks}, backend {embedder.backend}")
        print(f"  {'seed':>4} {'k':>3}  {'alias recall':>12}  {'dup recall':>10}  {'traps shortlisted':>17}  "
              f"{'alias qs':>8}  {'prune qs':>8}  planted (alias, dup)  worst rank (alias, dup)  "
              f"aliases in the first {FIRST} offers: their ranks")
        for seed in seeds:
            root = Path(tmp) / f"seed{seed}"
            truth = generate(args.n, seed, root, git=False)
            for row in measure(root, truth, embedder, ks):
                results[row["k"]].append(row)
                pairs_of[(seed, row["k"])] = row.pop("pairs")
                print(f"  {seed:>4} {row['k']:>3}  {row['alias_recall']:>12.2f}  {row['dup_recall']:>10.2f}  "
                      f"{row['traps_shortlisted']:>17.2f}  {row['alias_questions']:>8}  {row['prune_questions']:>8}  "
                      f"{str(row['planted']):<20}  {str(row['worst_rank']):<23}  "
                      f"{row['alias_first']}: {row['alias_ranks']}", flush=True)
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
    return summary, held, pairs_of, worst


if __name__ == "__main__":
    sys.exit(main())
