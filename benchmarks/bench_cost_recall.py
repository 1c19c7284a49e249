#!/usr/bin/env python3
"""bench_cost_recall: what three default sessions unify on knomit's own KB, and what they cost (issue 42).

    nice -n 10 .venv/bin/python benchmarks/bench_cost_recall.py [--sessions 3] [--set "budget.KEY = VALUE"] [--json]

The dogfood sample (../shared/data/knomit-kb-sample.tar.gz; skipped when absent) is extracted to a temporary
directory, committed, and `knomit-judge init` writes its config (--set replaces a line init wrote, e.g.
"budget.opening_usd = 0.3"). Then `--sessions` default `knomit-judge review --json` sessions run through the real
CLI and the real SDK, against a loopback Messages API (tests/messages_server.py, bench_living.LabelJudge) that
answers from labels only: alias `same` for two spellings of one group of benchmarks/data/knomit-kb-motif-labels.json,
`different` otherwise; prune `distinct`; discovery no; describe requests with the recorded lines of
benchmarks/data/knomit-kb-describe-replies.jsonl. Usage is the prompt's characters / 4 plus the reply contract's
overhead, priced at list prices (the shipped defaults: claude-haiku-5-5 reads first, claude-sonnet-5-5 decides).

Printed: per session, calls and each pass's state and resolutions; in all: labelled groups unified (of 19), false
merges (an alias merge of two spellings the labels do not join, or any prune/discovery yes: the labels hold none),
cost at list prices by pass and model, and calls per session.
Targets (issue 42): >= 16 of 19 groups unified, <= $1.00 in all, 0 false merges.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench_living import LabelJudge, Spellings, apply_settings, as_run, cli, git, verdict_of  # noqa: E402
from bench_recall import _layout, extract_sample, label_truth, recorded_lines, shared_data  # noqa: E402
from messages_server import MessagesServer  # noqa: E402

from knomit_judge.corpus import load_corpus  # noqa: E402


def merges(root: Path) -> list[dict]:
    """Every decision commit's pass and verdict subject, from the commits' trailers and the journal."""
    out = []
    log = git(root, "log", "--format=%(trailers:key=Knomit-Pass,valueonly)%x1f"
                             "%(trailers:key=Knomit-Verdict,valueonly)%x1e")
    for entry in log.split("\x1e"):
        if "\x1f" not in entry:
            continue
        name, ids = (x.strip() for x in entry.split("\x1f", 1))
        for vid in ids.split():
            out.append({"pass": name, **verdict_of(root, vid)})
    return out


def run(sessions: int, settings: list[str], tmp: Path) -> dict:
    truth = label_truth()
    spellings = Spellings((g[0], s) for g in truth["alias_groups"] for s in g[1:])
    judge = LabelJudge(spellings, set(), lines=recorded_lines() or {})
    server = MessagesServer(judge).start()
    server.describer = judge.describe
    root = extract_sample(tmp / "sample")
    env = {**os.environ, "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-bench-dummy",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("KNOMIT_JUDGE_MODEL", None)
    rows = []
    try:
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "--no-verify", "-m", "the sample")
        r = cli("init", str(root), env=env)
        if r.returncode:
            raise SystemExit(f"knomit-judge init: {r.stderr}")
        if settings:
            toml = root / "knomit-judge.toml"
            toml.write_text(apply_settings(toml.read_text(), settings))
            git(root, "commit", "-q", "-am", "bench: settings")
        for n in range(sessions):
            before = server.calls + len(server.describe_requests)
            r = cli("review", str(root), "--json", env=env)
            if r.returncode not in (0, 1):
                raise SystemExit(f"knomit-judge review exited {r.returncode}: {r.stderr[-2000:]}")
            out = json.loads(r.stdout)
            calls = server.calls + len(server.describe_requests) - before
            passes = {k: v for k, v in out["passes"].items() if k != "describe"}
            rows.append({"session": n + 1, "calls": calls, "cost_usd": out.get("cost_usd"),
                         "states": {k: p.get("state") for k, p in passes.items()},
                         "resolved": {k: p.get("resolved", 0) for k, p in passes.items()}})
            print(f"  session {n + 1}: {calls} calls, ${out.get('cost_usd') or 0:.4f}; "
                  + "; ".join(f"{k} {p.get('state')} resolved {p.get('resolved', 0)}" for k, p in passes.items()),
                  flush=True)
        carriers = load_corpus(root, layout=_layout(root)).carriers
        groups = truth["alias_groups"]
        unified = sum(sum(bool(carriers.get(s)) for s in g) == 1 for g in groups)
        made = merges(root)
        false = [m for m in made if m["pass"] in ("prune", "discovery") and m.get("answer") not in (None, "exact")
                 or m["pass"] == "alias" and m.get("a") and not spellings.same(m["a"], m["b"])]
    finally:
        server.close()
    cost = as_run(judge.usage)
    by = defaultdict(int)
    for kind, model, _, _ in judge.usage:
        by[f"{kind} {model}"] += 1
    return {"settings": settings, "groups": len(groups), "unified": unified, "false_merges": len(false),
            "false": false, "alias_merges": sum(m["pass"] == "alias" for m in made),
            "usd": round(sum(cost.values()), 4), "usd_by_pass_model": cost, "calls_by_pass_model": dict(by),
            "calls_per_session": [r["calls"] for r in rows], "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="'SECTION.KEY = VALUE'",
                    help="replace the line init wrote for KEY; repeatable")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON object")
    args = ap.parse_args(argv)
    if shared_data() is None:
        print("skipped: ../shared/data/knomit-kb-sample.tar.gz not found")
        return 0
    with tempfile.TemporaryDirectory(prefix="knomit-cost-recall-") as tmp:
        f = run(args.sessions, args.set, Path(tmp))
    print(f"groups unified in {args.sessions} sessions: {f['unified']} of {f['groups']}; alias merges "
          f"{f['alias_merges']}, false merges {f['false_merges']}")
    print(f"cost at list prices: ${f['usd']:.2f} (" + ", ".join(f"{k} ${v:.3f}" for k, v in
                                                          f["usd_by_pass_model"].items()) + ")")
    print("calls by pass and model: " + ", ".join(f"{k} {v}" for k, v in sorted(f["calls_by_pass_model"].items())))
    print("calls per session: " + ", ".join(str(c) for c in f["calls_per_session"]))
    held = f["unified"] >= 16 and f["usd"] <= 1.0 and f["false_merges"] == 0
    print(f"[{'PASS' if held else 'FAIL'}] >= 16 of {f['groups']} groups, <= $1.00, 0 false merges")
    if args.json:
        print(json.dumps(f))
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
