#!/usr/bin/env python3
"""bench_incremental: an unchanged corpus costs nothing; an edit costs only the questions it changed.

    .venv/bin/python benchmarks/bench_incremental.py [--quick] [--n N] [--seed S]

On a generated corpus (N=1000; --quick: 300), with the real SDK talking to the loopback Messages
server and a judge that answers from the generator's ground truth (same for planted alias pairs,
merge for planted duplicates, the default otherwise):
1. review until a session applies nothing (applied decisions change fingerprints, so they re-open
   the questions they touch);
2. review again: judge calls and embeddings computed must both be 0;
3. edit 1% of the facts and review: questions asked, judge calls and embeddings computed must each be
   at most the questions whose fingerprint changed (both orders of a question are asked: position swap).
The budget is off ([budget] enabled = false), so no question waits behind the throttle.
4. `rebuild --check` (knomit_judge/rebuild.py): the state the sessions kept equals a fresh rebuild.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from gen_corpus import generate  # noqa: E402
from messages_server import MessagesServer, text  # noqa: E402

from knomit_judge import ReviewOptions, load_config, load_corpus, review  # noqa: E402
from knomit_judge.embeddings import Embedder  # noqa: E402
from knomit_judge.init import init_corpus  # noqa: E402
from knomit_judge.passes.base import Inputs
from knomit_judge.passes.registry import all_passes  # noqa: E402
from knomit_judge.rebuild import check  # noqa: E402
from knomit_judge.store import Store  # noqa: E402

CONFIG = """
[judge]
backoff_s = 0.0
timeout_s = 60
max_cost_usd = 100000.0

[budget]
enabled = false
"""
DEFAULTS = {
    "alias": {"same": False, "mechanism": ""},
    "prune": {"decision": "distinct", "rationale": ""},
    "discovery": {"entails": False, "fact": None, "rationale": ""},
}
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def make_corpus(workdir: Path, n: int, seed: int) -> tuple[Path, dict, list[dict]]:
    """A generated corpus, initialised for knomit-judge, with the benchmark's config committed."""
    root = workdir / "corpus"
    truth = generate(n, seed, root, git=True)
    init_corpus(root)
    (root / "knomit-judge.toml").write_text(CONFIG, encoding="utf-8")
    git(root, "commit", "-q", "-am", "bench config")
    replies = [json.loads(line) for line in root.with_name("corpus.replies.jsonl").read_text().splitlines()]
    return root, truth, replies


class TruthJudge:
    """Answers each request from the ground truth, recognising the question by its quoted evidence."""

    def __init__(self, root: Path, replies: list[dict]):
        titles = {p: f.title for p, f in load_corpus(root).facts.items()}
        self.alias = {frozenset((r["a"], r["b"])): r["reply"] for r in replies if r["pass"] == "alias"}
        self.prune = {frozenset((titles[r["a"]], titles[r["b"]])): r["reply"] for r in replies if r["pass"] == "prune"}

    def __call__(self, request, n):
        prompt = request.prompt
        evidence = json.loads(prompt[prompt.index("<evidence>") + 10:prompt.index("</evidence>")])
        if "motif_a" in evidence:
            key = frozenset((evidence["motif_a"]["spelling"], evidence["motif_b"]["spelling"]))
            reply = self.alias.get(key, DEFAULTS["alias"])
        elif "fact_a" in evidence:
            reply = self.prune.get(frozenset((evidence["fact_a"]["title"], evidence["fact_b"]["title"])),
                                   DEFAULTS["prune"])
        else:
            reply = DEFAULTS["discovery"]
        return text(json.dumps(reply))


def shortlisted(root: Path) -> set[tuple[str, str]]:
    """Every question the passes shortlist now, as (pass, fingerprint), computed apart from any session."""
    store = Store.read_only(root)  # an in-memory copy: what this computes is not kept
    try:
        ctx = Inputs(corpus=load_corpus(root), embedder=Embedder(store), config=load_config(root))
        return {(p.name, c.fingerprint) for p in all_passes().values() for c in p.candidates(ctx)}
    finally:
        store.close()


def asked(root: Path, session: str) -> set[tuple[str, str]]:
    store = Store.for_corpus(root)
    try:
        return {(v.pass_name, v.fingerprint) for v in store.verdicts() if v.session == session and v.pass_name != "exact"}
    finally:
        store.close()


def session(root: Path, server: MessagesServer, label: str, rows: list[dict]) -> dict:
    calls_before = server.calls
    start = time.perf_counter()
    result = review(root, ReviewOptions(judge="anthropic"))
    row = {
        "session": label,
        "questions": sum(r.offered for name, r in result.passes.items() if name != "exact"),
        "judge_calls": server.calls - calls_before,
        "embedded": result.embedded,
        "parsed": result.parsed,
        "applied": sum(r.applied for r in result.passes.values()),
        "unavailable": sum(r.unavailable + r.unparsed for r in result.passes.values()),
        "wall_s": round(time.perf_counter() - start, 1),
        "id": result.session,
    }
    rows.append(row)
    print(f"  {label:<14} questions {row['questions']:>5}  calls {row['judge_calls']:>5}  embedded {row['embedded']:>5}"
          f"  parsed {row['parsed']:>5}  applied {row['applied']:>3}  failed {row['unavailable']}  {row['wall_s']:>6.1f}s",
          flush=True)
    return row


def edit_facts(root: Path, share: float, seed: int) -> list[str]:
    """Reword the body of `share` of the active facts (one sentence appended) and commit."""
    corpus = load_corpus(root)
    active = [f.path for f in corpus.active()]
    chosen = sorted(random.Random(seed).sample(active, max(1, round(share * len(corpus.facts)))))
    for path in chosen:
        full = root / path
        full.write_text(full.read_text(encoding="utf-8").rstrip("\n") + " The pattern was re-checked in 2026.\n",
                        encoding="utf-8")
    git(root, "commit", "-q", "-am", f"edit {len(chosen)} facts")
    return chosen


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="N=300 instead of 1000")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    n = args.n or (300 if args.quick else 1000)

    with tempfile.TemporaryDirectory(prefix="knomit-bench-incr-") as tmp, MessagesServer() as server:
        root, truth, replies = make_corpus(Path(tmp), n, args.seed)
        print(f"corpus: {n} facts, {len(truth['alias_pairs'])} planted alias pairs, "
              f"{len(truth['duplicate_pairs'])} duplicate pairs, {len(truth['exact_duplicates'])} exact duplicates")
        server.responder = TruthJudge(root, replies)
        os.environ.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-bench-FAKE")
        os.environ.pop("KNOMIT_JUDGE_MODEL", None)
        os.environ["KNOMIT_JUDGE_FIRST_READER"] = ""  # one reader: the figures are the judge model's
        rows: list[dict] = []

        print("1. review until a session applies nothing")
        for i in range(1, 11):
            if session(root, server, f"converge {i}", rows)["applied"] == 0:
                break
        print("2. review the unchanged corpus")
        before = shortlisted(root)
        unchanged = session(root, server, "unchanged", rows)
        print("3. edit 1% of the facts and review")
        edited = edit_facts(root, 0.01, args.seed)
        changed = shortlisted(root) - before
        after = session(root, server, "after edit", rows)
        exact = asked(root, after["id"]) == changed
        print("4. rebuild --check")
        start = time.perf_counter()
        checked = check(root)
        for line in checked.text_lines():
            print(f"  {line}")
        print(f"  ({time.perf_counter() - start:.1f}s)", flush=True)

    orders = 2  # position_swap = true, samples = 1: each pair question is asked in both orders
    checks = [
        ("unchanged run: judge calls == 0", unchanged["judge_calls"] == 0),
        ("unchanged run: embeddings computed == 0", unchanged["embedded"] == 0),
        (f"after edit: questions asked ({after['questions']}) <= questions whose fingerprint changed ({len(changed)})",
         after["questions"] <= len(changed)),
        (f"after edit: judge calls ({after['judge_calls']}) <= changed x {orders} orders ({len(changed) * orders})",
         after["judge_calls"] <= len(changed) * orders),
        (f"after edit: embeddings computed ({after['embedded']}) <= changed ({len(changed)})",
         after["embedded"] <= len(changed)),
        ("after edit: the questions asked are exactly those whose fingerprint changed", exact),
        ("rebuild --check: the state the sessions kept equals a fresh rebuild", checked.equal),
    ]
    print(f"\nedited {len(edited)} facts; {len(changed)} shortlisted questions changed fingerprint")
    for label, ok in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {label}")
    held = all(ok for _, ok in checks)
    print("target held" if held else "target NOT held")
    print(json.dumps({"n": n, "sessions": [{k: v for k, v in r.items() if k != "id"} for r in rows],
                      "edited": len(edited), "changed": len(changed), "rebuild_check": checked.json(),
                      "held": held}))
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
