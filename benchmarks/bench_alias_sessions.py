#!/usr/bin/env python3
"""bench_alias_sessions: alias groups unified in 3 sessions on an entity vocabulary of real shape.

    .venv/bin/python benchmarks/bench_alias_sessions.py [--n 264] [--seeds 0,1,2] [--sessions 3]

For each seed, gen_corpus.py --shape entities writes N facts (264, like the real knowledge base of
issue 13: about 800 spellings, 20 alias groups, numbered facets and version siblings on shared facts);
then `sessions` review sessions run the alias pass with the default budget and a scripted perfect
judge (`same` for every pair of a planted group, `different` for everything else). Printed per
session: the status line; at the end: groups unified, merges, and merges without a `same` verdict for
a planted pair (must be 0); then `rebuild --check` (knomit_judge/rebuild.py) compares the db the
sessions kept with a fresh rebuild, and names any difference (must be none).
Target (issue 13, on generated corpora): session 1 resolves something, the pass stays funded,
every group unified within 3 sessions, 0 wrong merges, the kept state equal to a fresh rebuild.
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

from gen_corpus import generate_entities  # noqa: E402

from knomit_judge.corpus import load_corpus  # noqa: E402
from knomit_judge.init import init_corpus  # noqa: E402
from knomit_judge.rebuild import check  # noqa: E402
from knomit_judge.session.review import ReviewOptions, review  # noqa: E402
from knomit_judge.store import Store  # noqa: E402


def run(seed: int, n: int, sessions: int, tmp: Path) -> dict:
    root = tmp / f"entities{seed}"
    truth = generate_entities(n, seed, root)
    init_corpus(root)
    judge = f"scripted:{tmp / f'entities{seed}.replies.jsonl'}"
    states = []
    for s in range(sessions):
        start = time.perf_counter()
        alias = review(root, ReviewOptions(passes=("alias",), judge=judge)).passes["alias"]
        states.append(alias.throttle)
        print(f"  seed {seed} session {s + 1} ({time.perf_counter() - start:.0f}s): {alias.line()}", flush=True)
    carriers = load_corpus(root).carriers
    groups = truth["alias_groups"]
    unified = sum(sum(bool(carriers.get(x)) for x in g) == 1 for g in groups)
    store = Store.for_corpus(root)
    verdicts = {v.id: v for v in store.verdicts("alias")}
    store.close()
    ids = subprocess.run(["git", "-C", str(root), "log", "--grep=^Knomit-Pass: alias$",
                          "--format=%(trailers:key=Knomit-Verdict,valueonly)"],
                         capture_output=True, text=True, check=True).stdout.split()
    planted = {frozenset(p) for p in truth["alias_pairs"]}
    wrong = [i for i in ids if verdicts[i].answer != "same"
             or frozenset((verdicts[i].subject["a"], verdicts[i].subject["b"])) not in planted]
    asked = {frozenset((v.subject["a"], v.subject["b"])) for v in verdicts.values()}
    traps_asked = sum(frozenset(t) in asked for t in truth["traps"])
    print(f"  seed {seed}: {unified}/{len(groups)} groups unified, {len(ids)} merges, {len(wrong)} without a "
          f"`same` verdict for a planted pair; {traps_asked}/{len(truth['traps'])} traps asked, all still two "
          f"spellings: {all(carriers.get(a) and carriers.get(b) for a, b in truth['traps'])}", flush=True)
    start = time.perf_counter()
    checked = check(root)
    for line in checked.text_lines():
        print(f"  seed {seed} rebuild --check ({time.perf_counter() - start:.0f}s): {line}", flush=True)
    return {"seed": seed, "groups": len(groups), "unified": unified, "merges": len(ids), "wrong": len(wrong),
            "states": states, "motifs": truth["motif_count"], "rebuild_check": checked.json()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=264)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--sessions", type=int, default=3)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="knomit-bench-alias-") as tmp:
        for seed in [int(s) for s in args.seeds.split(",")]:
            rows.append(run(seed, args.n, args.sessions, Path(tmp)))
    held = all(r["unified"] == r["groups"] and r["wrong"] == 0 and r["states"][1:2] in (["funded"], [])
               for r in rows)
    equal = all(r["rebuild_check"]["equal"] for r in rows)
    print(f"[{'PASS' if held else 'FAIL'}] every group unified within {args.sessions} sessions, funded after "
          "session 1, 0 merges without a `same` verdict")
    print(f"[{'PASS' if equal else 'FAIL'}] rebuild --check after the sessions: the kept state equals a fresh rebuild")
    held &= equal
    print(json.dumps({"n": args.n, "rows": rows, "held": held}))
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
