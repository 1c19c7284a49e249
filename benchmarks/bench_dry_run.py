#!/usr/bin/env python3
"""bench_dry_run: two `review --dry-run` in a row on the real knomit sample; the second reads what the first derived.

    .venv/bin/python benchmarks/bench_dry_run.py [--json]

The sample (../shared/data/knomit-kb-sample.tar.gz, read in place) is extracted to a temporary directory,
committed and `knomit-judge init`ed, as a newcomer would. Each dry run is the installed command in its own
process, timed wall to wall (model load included). A dry run keeps derived state (embeddings, neighbour and
candidate lists) in the db and nothing else, so the second should take under a quarter of the first; the
check also confirms that the two plans are the same and that no verdict, session or throttle row, commit or
corpus byte was written. Exit 1 when any of that does not hold.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recall import extract_sample, shared_data  # noqa: E402

CLI = [sys.executable, "-c", "from knomit_judge.cli import main; main()"]
BOUGHT = ("verdicts", "replies", "sessions", "throttle")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args], cwd=root,
                          check=True, capture_output=True, text=True).stdout


def rows(root: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{root / '.knomit' / 'judge.db'}?mode=ro", uri=True)
    try:
        names = ("embeddings", "neighbour_sets", "candidate_lists", *BOUGHT)
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in names}
    finally:
        conn.close()


def dry_run(root: Path) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run([*CLI, "-q", "review", str(root), "--dry-run", "--json"], capture_output=True, text=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=1800)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"dry run failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, json.loads(done.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    data = shared_data()
    if data is None:
        print("../shared/data absent: nothing to measure", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="knomit-dry-run-") as tmp:
        root = extract_sample(Path(tmp) / "sample")
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "sample")
        subprocess.run([*CLI, "-q", "init", str(root)], check=True, capture_output=True)
        head, before = git(root, "rev-parse", "HEAD"), rows(root)
        first, plan1 = dry_run(root)
        after_first = rows(root)
        second, plan2 = dry_run(root)
        after = rows(root)
        out = {"facts": plan1["corpus"]["read"], "first_s": round(first, 2), "second_s": round(second, 2),
               "ratio": round(second / first, 3), "embedded": [plan1["embedded"], plan2["embedded"]],
               "questions": sum(len(v) for v in plan1["plan"].values()),
               "derived_rows": {t: after_first[t] for t in ("embeddings", "neighbour_sets", "candidate_lists")},
               "same_plan": plan1["plan"] == plan2["plan"],
               "bought_unchanged": all(before[t] == after[t] for t in BOUGHT),
               "git_unchanged": git(root, "rev-parse", "HEAD") == head and git(root, "status", "--porcelain") == ""}
    held = out["ratio"] < 0.25 and out["same_plan"] and out["bought_unchanged"] and out["git_unchanged"]
    if args.json:
        print(json.dumps({**out, "held": held}))
    else:
        print(f"knomit sample, {out['facts']} facts read: dry run 1 {out['first_s']} s (embedded {out['embedded'][0]}), "
              f"dry run 2 {out['second_s']} s (embedded {out['embedded'][1]}): ratio {out['ratio']} "
              f"({'< 0.25: held' if out['ratio'] < 0.25 else 'NOT below 0.25'})")
        print(f"derived rows kept by the first: {out['derived_rows']}; same plan: {out['same_plan']}; "
              f"verdicts/replies/sessions/throttle unchanged: {out['bought_unchanged']}; git unchanged: "
              f"{out['git_unchanged']}; {out['questions']} question(s) in the plan")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
