#!/usr/bin/env python3
"""bench_wall: does a session keep `concurrency` judge calls in flight? Wall time vs the ideal.

    .venv/bin/python benchmarks/bench_wall.py [--quick] [--questions Q] [--latency S] [--concurrency C]

200 prune questions (--quick: 40) on a generated corpus, through the real SDK to the loopback Messages
server, which answers every call after 0.5 s. position_swap = false and samples = 1, so one question is
one call; the optimistic budget cap is set to the question count, so exactly that many are offered.
Embeddings are computed beforehand (`rebuild`), so the session measured is judging, not embedding.
Ideal = calls x latency / concurrency. Target: measured session wall / ideal <= 1.2.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from gen_corpus import generate  # noqa: E402
from messages_server import Action, MessagesServer, text  # noqa: E402

from knomit_judge import ReviewOptions, rebuild, review  # noqa: E402
from knomit_judge.init import init_corpus  # noqa: E402

TARGET = 1.2
CONFIG = """
[judge]
backoff_s = 0.0
concurrency = {concurrency}
position_swap = false
samples = 1
timeout_s = 60
max_cost_usd = 100000.0

[budget]
optimistic_cap = {questions}
"""
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


class Latency:
    """Every call answered 'distinct' after a fixed delay; records how many were in flight at once."""

    def __init__(self, seconds: float):
        self.seconds, self.lock = seconds, threading.Lock()
        self.in_flight = self.peak = 0
        self.first = self.last = None
        self.reply = text(json.dumps({"decision": "distinct", "rationale": ""}))

    def __call__(self, request, n) -> Action:
        def run(req, stop):
            with self.lock:
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
                self.first = self.first or time.perf_counter()
            try:
                if stop.wait(self.seconds):
                    return None
                return self.reply.run(req, stop)
            finally:
                with self.lock:
                    self.in_flight -= 1
                    self.last = time.perf_counter()
        return Action("latency", run)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="40 questions instead of 200")
    ap.add_argument("--questions", type=int, default=None)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args(argv)
    questions = args.questions or (40 if args.quick else 200)

    with tempfile.TemporaryDirectory(prefix="knomit-bench-wall-") as tmp, MessagesServer() as server:
        root = Path(tmp) / "corpus"
        generate(max(100, questions // 2), 0, root, git=True)  # about 3.5 prune questions a fact at k = 5
        init_corpus(root)
        (root / "knomit-judge.toml").write_text(CONFIG.format(concurrency=args.concurrency, questions=questions))
        subprocess.run(["git", "-C", str(root), "commit", "-q", "-am", "bench config"], check=True,
                       env={**os.environ, **GIT_ENV})
        rebuild(root)  # embeddings in the cache, so the measured session only judges
        latency = Latency(args.latency)
        server.responder = latency
        os.environ.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-bench-FAKE")
        os.environ.pop("KNOMIT_JUDGE_MODEL", None)
        os.environ["KNOMIT_JUDGE_FIRST_READER"] = ""  # one reader: the figures are the judge model's

        start = time.perf_counter()
        result = review(root, ReviewOptions(passes=("prune",), judge="anthropic"))
        wall = time.perf_counter() - start

    prune = result.passes["prune"]
    calls = server.calls
    ideal = calls * args.latency / args.concurrency
    span = (latency.last - latency.first) if latency.first else 0.0
    ratio = wall / ideal if ideal else float("inf")
    print(f"questions offered {prune.offered}, judged {prune.judged}, unavailable {prune.unavailable}, "
          f"judge calls {calls}, peak in flight {latency.peak} (concurrency {args.concurrency}), embedded {result.embedded}")
    print(f"ideal {ideal:.1f}s = {calls} calls x {args.latency}s / {args.concurrency}")
    print(f"measured: session wall {wall:.1f}s (ratio {ratio:.3f}); first call to last reply {span:.1f}s "
          f"(ratio {span / ideal if ideal else 0:.3f})")
    checks = [(f"{calls} calls == {questions} questions", calls == questions == prune.judged),
              (f"session wall / ideal = {ratio:.3f} <= {TARGET}", ratio <= TARGET)]
    for label, ok in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {label}")
    held = all(ok for _, ok in checks)
    print("target held" if held else "target NOT held")
    print(json.dumps({"questions": questions, "calls": calls, "latency_s": args.latency, "concurrency": args.concurrency,
                      "ideal_s": round(ideal, 2), "wall_s": round(wall, 2), "judging_s": round(span, 2),
                      "ratio": round(ratio, 3), "peak_in_flight": latency.peak, "held": held}))
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
