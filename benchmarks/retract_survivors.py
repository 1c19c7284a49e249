#!/usr/bin/env python3
"""retract_survivors: on the replay's prune decisions, would the fixed rules and containment choose differently?

    .venv/bin/python benchmarks/retract_survivors.py [--json]

Issue 32. Before prune@2 a `retract` retired whichever fact the fixed survivor rules (confidence, sources,
carriers, age) did not keep; now it retires the fact the judge names as contained in the other. This counts,
over the prune decisions of bench_living.py's replay of ../shared/data/aekb-history.bundle, the pairs where
the two choices differ, without running the replay (no embedding, no judge, no review): the replay's prune
decisions are the five standing dedup pairs (its label judge says `merge` to those and `distinct` to every
other pair, and each is decided in the session both facts first exist), so each is read at that day's
writer state, the same state bench_living.real_days builds, committed day by day into a scratch repository
so the age rule sees the same order.

For each pair it prints the fixed rules' survivor and the rule that chose it, both body lengths, and how
much of each body's words the other holds (a containment proxy: the judge's own answer on which fact is
contained is not known here, as the replay's judge only ever says merge). A pair counts as `differ` when
the fixed rules keep the fact whose words the other holds more of (the contained side by the proxy), i.e.
a retract left to the fixed rules would have retired the container. The proxy says little when both bodies
share about half their words; read the pairs before trusting its count (docs/benchmarks.md has our reading).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_living import BUNDLE, git, real_days  # noqa: E402

from knomit_judge.config import CorpusConfig  # noqa: E402
from knomit_judge.corpus import load_corpus  # noqa: E402
from knomit_judge.survivors import fact_survivor, why_survives  # noqa: E402

LAYOUT = CorpusConfig(paths=["kb/**/*.md"], motif_keys=["motifs", "entities"], retract="delete")  # as bench_living


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def held(part: str, whole: str) -> float:
    """The share of `part`'s distinct words that `whole` has too."""
    w = words(part)
    return len(w & words(whole)) / len(w) if w else 1.0


def measure(work: Path) -> list[dict]:
    days, pairs = real_days(BUNDLE, work, None)
    repo = work / "writer"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    out, todo = [], dict(pairs)
    for day in days:
        for path in [p for p in git(repo, "ls-files").splitlines()]:
            if path.encode() and path not in day.files:
                (repo / path).unlink()
        for path, data in day.files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_bytes(data)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", day.label, env={"GIT_AUTHOR_DATE": day.stamp,
                                                                         "GIT_COMMITTER_DATE": day.stamp})
        corpus = None
        for key, (a, b) in list(todo.items()):
            if a not in day.files or b not in day.files:
                continue
            corpus = corpus or load_corpus(repo, layout=LAYOUT)
            fa, fb = corpus.facts.get(a), corpus.facts.get(b)
            if not (fa and fb and fa.active and fb.active):
                continue
            keep = fact_survivor([fa, fb], corpus)
            lose = fb if keep is fa else fa
            keep_in_lose, lose_in_keep = held(keep.body, lose.body), held(lose.body, keep.body)
            out.append({"pair": key, "day": day.label, "kept": keep.path, "retired": lose.path,
                        "rule": why_survives(keep, lose, corpus),
                        "kept_chars": len(keep.body), "retired_chars": len(lose.body),
                        "kept_words_in_retired": round(keep_in_lose, 3),
                        "retired_words_in_kept": round(lose_in_keep, 3),
                        "kept_shorter": len(keep.body) < len(lose.body),
                        "differ": keep_in_lose > lose_in_keep})
            del todo[key]
    for key in todo:
        out.append({"pair": key, "day": None, "differ": None, "note": "both facts never active on one day"})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not BUNDLE.exists():
        print(f"skipped: {BUNDLE} is absent")
        return 0
    with tempfile.TemporaryDirectory(prefix="retract-survivors-") as tmp:
        rows = measure(Path(tmp))
    decided = [r for r in rows if r["differ"] is not None]
    summary = {"decisions": len(decided), "differ": sum(r["differ"] for r in decided),
               "kept_shorter": sum(r["kept_shorter"] for r in decided)}
    if args.json:
        print(json.dumps({"pairs": rows, **summary}, indent=2))
        return 0
    for r in rows:
        if r["differ"] is None:
            print(f"{r['pair']}: {r['note']}")
            continue
        print(f"{r['pair']} ({r['day']}): fixed rules keep {r['kept']} ({r['rule']}); bodies {r['kept_chars']} "
              f"kept / {r['retired_chars']} retired chars; words held: kept's in retired "
              f"{r['kept_words_in_retired']:.3f}, retired's in kept {r['retired_words_in_kept']:.3f}; "
              f"differ: {'yes' if r['differ'] else 'no'}")
    print(f"prune decisions: {summary['decisions']}; fixed rules and containment (by the words proxy) differ on "
          f"{summary['differ']}; fixed rules keep the shorter body on {summary['kept_shorter']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
