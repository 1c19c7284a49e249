#!/usr/bin/env python3
"""worth_prior: where the questions that resolve something sit by score, per pass: the prior of worth.py.

    nice -n 10 .venv/bin/python benchmarks/worth_prior.py [--json]

Every candidate of a pass is judged (budget.enabled = false) by a scripted judge that says yes exactly where our
labels do, so each verdict keeps its candidate's score and whether it is a true pair; the share of true pairs by
score is what a pass may expect before it has read anything. Two corpora:

- corpus-fixtures/calibration (45 facts, 43 labelled questions: 10 alias, 7 prune, 3 discovery true): every
  pass, the embeddings alone (no describe lines);
- knomit's own KB, the dogfood sample (../shared/data/knomit-kb-sample.tar.gz, skipped when absent), alias
  with the recorded describe lines (benchmarks/data/knomit-kb-describe-replies.jsonl) and our labels
  (benchmarks/data/knomit-kb-motif-labels.json: 19 groups).

Printed per pass and corpus: candidates, true ones, the lowest score of a true one, and the share true in score
bands; worth.py's PRIOR is set from these (docs/choices.md gives the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the judge model reads alone, as the figures of docs/choices.md were made (tests/conftest.py, once imported here, set it)
os.environ["KNOMIT_JUDGE_FIRST_READER"] = ""

from bench_living import apply_settings  # noqa: E402
from bench_recall import DESCRIBED, extract_sample, label_truth, perfect_replies, shared_data  # noqa: E402
from helpers import git  # noqa: E402

from knomit_judge.init import init_corpus  # noqa: E402
from knomit_judge.session.review import ReviewOptions, review  # noqa: E402
from knomit_judge.store import Store  # noqa: E402

CALIBRATION = ROOT / "corpus-fixtures" / "calibration"
UNTHROTTLED = ["budget.enabled = false"]
BANDS = (-1.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.01)


def committed(root: Path) -> None:
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "--no-verify", "-m", "corpus")


def set_config(root: Path, settings: list[str]) -> None:
    toml = root / "knomit-judge.toml"
    toml.write_text(apply_settings(toml.read_text(encoding="utf-8"), settings), encoding="utf-8")
    git(root, "commit", "-q", "--no-verify", "-am", "bench: unthrottled")


def truths(root: Path, passes: tuple[str, ...], judge: str) -> dict[str, list[tuple[float, bool]]]:
    """One unthrottled session of these passes: (score, yes) of every verdict, by pass."""
    review(root, ReviewOptions(passes=passes, judge=judge))
    with Store.read_only(root) as store:
        rows = store.db.execute("SELECT pass, score, is_yes FROM verdicts WHERE score IS NOT NULL AND model != "
                                "'mechanical'").fetchall()
    out: dict[str, list[tuple[float, bool]]] = {}
    for name, score, yes in rows:
        out.setdefault(name, []).append((float(score), bool(yes)))
    return out


def calibration(tmp: Path) -> dict[str, list[tuple[float, bool]]]:
    root = tmp / "calibration"
    shutil.copytree(CALIBRATION / "facts", root / "facts")
    committed(root)
    init_corpus(root)
    set_config(root, [*UNTHROTTLED, "describe.enabled = false", "judge.position_swap = false"])
    replies = tmp / "calibration-replies.jsonl"
    with open(replies, "w", encoding="utf-8") as f:  # yes exactly where the labels say yes
        for line in (CALIBRATION / "labels.jsonl").read_text(encoding="utf-8").splitlines():
            label = json.loads(line)
            if label["pass"] == "alias" and label["label"]:
                f.write(json.dumps({"pass": "alias", "a": label["a"], "b": label["b"],
                                    "reply": {"same": True, "mechanism": "One mechanism."}}) + "\n")
            elif label["pass"] == "prune" and label["label"] in ("merge", "retract"):
                reply = {"decision": label["label"], "rationale": "One claim."}
                if label["label"] == "retract":
                    reply["redundant"] = label["redundant"]
                f.write(json.dumps({"pass": "prune", "a": label["a"], "b": label["b"], "reply": reply}) + "\n")
            elif label["pass"] == "discovery" and label["label"]:
                f.write(json.dumps({"pass": "discovery", "contains": label["group"],
                                    "reply": {"entails": True, "fact": {"title": "A new fact", "body": "Entailed.",
                                                                        "motifs": ["entailed"]},
                                              "rationale": "Entailed."}}) + "\n")
    return truths(root, ("alias", "prune", "discovery"), f"scripted:{replies}")


def knomit_sample(tmp: Path) -> dict[str, list[tuple[float, bool]]] | None:
    if shared_data() is None:
        return None
    root = extract_sample(tmp / "sample")
    committed(root)
    init_corpus(root)
    set_config(root, UNTHROTTLED)
    judge = perfect_replies(label_truth(), tmp / "sample-replies.jsonl", DESCRIBED if DESCRIBED.is_file() else None)
    return truths(root, ("alias",), judge)


def bands(points: list[tuple[float, bool]]) -> list[dict]:
    out = []
    for lo, hi in zip(BANDS, BANDS[1:]):
        inside = [yes for s, yes in points if lo <= s < hi]
        if inside:
            out.append({"from": max(lo, 0.0) if lo > -1 else -1.0, "to": min(hi, 1.0), "candidates": len(inside),
                        "true": sum(inside), "share": round(sum(inside) / len(inside), 4)})
    return out


def summary(points: list[tuple[float, bool]]) -> dict:
    true = sorted(s for s, yes in points if yes)
    return {"candidates": len(points), "true": len(true), "lowest_true": round(true[0], 4) if true else None,
            "scores": [round(s, 4) for s in true], "bands": bands(points)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="worth-prior-") as tmp:
        figures = {"calibration": {n: summary(p) for n, p in calibration(Path(tmp)).items()}}
        if (sample := knomit_sample(Path(tmp))) is not None:
            figures["knomit-sample"] = {n: summary(p) for n, p in sample.items()}
    for corpus, passes in figures.items():
        for name, f in passes.items():
            print(f"{corpus} {name}: {f['candidates']} candidates, {f['true']} true, lowest true score "
                  f"{f['lowest_true']}; true scores {f['scores']}")
            for b in f["bands"]:
                print(f"  score {b['from']:.1f}-{b['to']:.1f}: {b['true']} of {b['candidates']} ({b['share']:.3f})")
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
