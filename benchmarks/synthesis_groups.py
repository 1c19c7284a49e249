#!/usr/bin/env python3
"""Discovery group recall on real syntheses: do our candidates hold the groups knomit's own judge distilled?

    .venv/bin/python benchmarks/synthesis_groups.py [--bundle ../shared/data/aekb-history.bundle] [--first 20]
                                                    [--set discovery.KEY=VALUE]... [--json]

In the bundle's agent branch each `synthesize-review: distill <path>` commit writes a new fact whose `refs:`
name the facts it was distilled from (30 groups of 2 to 9 facts). For each, the KB as it stood just before
that commit is read (knomit layout, as `init` detects it), and the discovery pass's own candidate groups are
made with the default config (budget plays no part: every candidate is listed, best first, as a dry run
lists them). A group is covered when one candidate holds at least 3 of its facts, or both facts of a
2-fact group (2 of 2 is the whole group; 1 of 2 is a pair, which prune asks, not discovery). The covering
candidate's rank (1 = first offered) and the number of candidates are reported per group.

The bundle is read in place and extracted to a temporary directory; nothing of its text is kept.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from knomit_judge.config import Config  # noqa: E402
from knomit_judge.corpus import front_matter, link_target, load_corpus  # noqa: E402
from knomit_judge.embeddings import Embedder  # noqa: E402
from knomit_judge.layout import detect_knomit  # noqa: E402
from knomit_judge.passes.base import Inputs
from knomit_judge.passes.discovery import DiscoveryPass  # noqa: E402
from knomit_judge.store import Store  # noqa: E402

# ../shared/data beside the repo; from a worktree (../wt/NAME) the nearest ancestor that has it.
DATA = next((d / "shared" / "data" for d in ROOT.parents if (d / "shared" / "data").is_dir()), ROOT.parent / "shared" / "data")
BUNDLE = DATA / "aekb-history.bundle"
BRANCH = "origin/agent/mindev.local-8ef0cd32"
MARK = "synthesize-review: distill "
FIRST = 20  # the optimistic cap: what a first session offers


def git(repo: Path, *args: str, text=True):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=text).stdout


def syntheses(repo: Path) -> list[dict]:
    """Each distill commit on the agent branch, oldest first: its sha, the fact it wrote and the refs' paths."""
    out = []
    for line in git(repo, "log", "--reverse", "--format=%H %s", BRANCH).splitlines():
        sha, subject = line.split(" ", 1)
        if not subject.startswith(MARK):
            continue
        path = subject[len(MARK):].strip()
        meta = front_matter(git(repo, "show", f"{sha}:{path}"))
        refs = [t for r in meta.get("refs") or [] if (t := link_target(str(r)))]
        out.append({"sha": sha, "path": path, "group": list(dict.fromkeys(refs))})
    return out


def state_before(repo: Path, sha: str, dest: Path) -> Path:
    """The tree of sha's parent, written to dest (a git archive; no checkout of the clone is touched)."""
    data = git(repo, "archive", "--format=tar", f"{sha}^", "kb", text=False)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    (dest / ".knomit").mkdir(exist_ok=True)
    (dest / ".knomit" / "ontology.yaml").write_text("")  # the shape detect_knomit looks for; kb/ alone also does
    return dest


def covers(candidate: set[str], group: list[str]) -> bool:
    need = len(group) if len(group) < 3 else 3
    return len(candidate & set(group)) >= need


def measure(bundle: Path, config: Config, tmp: Path, embedder: Embedder, log=print) -> list[dict]:
    repo = tmp / "aekb"
    subprocess.run(["git", "clone", "-q", str(bundle), str(repo)], check=True)
    rows = []
    for n, syn in enumerate(syntheses(repo), 1):
        root = state_before(repo, syn["sha"], tmp / f"state{n}")
        layout = detect_knomit(root)
        corpus = load_corpus(root, layout=layout)
        ctx = Inputs(corpus=corpus, embedder=embedder, config=config)
        groups = DiscoveryPass().groups(ctx)
        present = [p for p in syn["group"] if p in corpus.facts and corpus.facts[p].active]
        rank = next((i for i, (members, _) in enumerate(groups, 1)
                     if covers({f.path for f in members}, present)), None)
        best = max((len({f.path for f in m} & set(present)) for m, _ in groups), default=0)
        rows.append({"n": n, "sha": syn["sha"][:7], "size": len(syn["group"]), "present": len(present),
                     "facts": len(corpus.active()), "candidates": len(groups), "rank": rank, "best_overlap": best})
        r = rows[-1]
        log(f"  {n:>2} {r['sha']} group {r['size']} ({r['present']} present)  facts {r['facts']:>3}  "
            f"candidates {r['candidates']:>4}  covering rank {r['rank'] or '-':>4}  best overlap {best}", flush=True)
    return rows


def summary(rows: list[dict], first: int = FIRST) -> dict:
    covered = [r for r in rows if r["rank"]]
    return {"groups": len(rows), "covered": len(covered), "covered_first": sum(r["rank"] <= first for r in covered),
            "candidates_total": sum(r["candidates"] for r in rows),
            "candidates_mean": round(sum(r["candidates"] for r in rows) / max(1, len(rows)), 1),
            "ranks": sorted(r["rank"] for r in covered)}


def report(bundle: Path, config: Config, first: int = FIRST, log=print) -> dict | None:
    """Measure and print; None (and a note) when the bundle is absent."""
    if not bundle.is_file():
        log(f"discovery group recall: skipped, {bundle} is absent")
        return None
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="knomit-synth-") as tmp:
        store = Store(Path(tmp) / "embeddings.db")
        log(f"\ndiscovery group recall on the real syntheses of {bundle.name}")
        rows = measure(bundle, config, Path(tmp), Embedder(store), log)
        store.close()
    s = summary(rows, first)
    log(f"  covered {s['covered']}/{s['groups']}, {s['covered_first']} within the first {first} candidates; "
        f"candidates per state: mean {s['candidates_mean']}, total {s['candidates_total']}; "
        f"covering ranks {s['ranks']}  ({time.perf_counter() - start:.0f}s)")
    return {**s, "rows": rows}


def configured(pairs: list[str]) -> Config:
    config = Config()
    for pair in pairs:
        key, _, value = pair.partition("=")
        section, _, name = key.partition(".")
        obj = getattr(config, section)
        setattr(obj, name, type(getattr(obj, name))(value))
    return config


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bundle", type=Path, default=BUNDLE)
    ap.add_argument("--first", type=int, default=FIRST)
    ap.add_argument("--set", action="append", default=[], help="a config value, e.g. discovery.group_similarity=0.5")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = report(args.bundle, configured(args.set), args.first, log=lambda *a, **k: print(*a, file=sys.stderr, **k))
    if args.json and out is not None:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
