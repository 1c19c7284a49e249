#!/usr/bin/env python3
"""describe_requests: the exact describe requests the product would send, one file per request, for a model to answer.

    .venv/bin/python benchmarks/describe_requests.py OUT_DIR [--only sample|aekb]

The lines the benchmarks use must come from a real model answering the product's own prompt
(prompts/describe.md), never written or edited by hand, and never with the labels shown. This renders
those requests, exactly as session/lines.py builds them (system text, user message, forced tool and
its input schema), for:

  sample  every spelling of ../shared/data/knomit-kb-sample.tar.gz, read with the layout bench_recall uses
  aekb    every motif and entity spelling the bench_living replay of ../shared/data/aekb-history.bundle meets
          on any day (`[corpus] motif_keys = ["motifs", "entities"]`), each with its carriers as of the last
          day it is carried

Each request goes to OUT_DIR/requests/<set>-NN.txt: at the top the JSON shape of the tool input the answer
must be, then the request. The answer to a request is its tool input, as one JSON object, in
OUT_DIR/replies/<set>-NN.json; describe_replies.py turns the answers into a scripted replies file.
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
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench_recall import _layout, extract_sample  # noqa: E402

from knomit_judge.config import Config, CorpusConfig  # noqa: E402
from knomit_judge.corpus import load_corpus  # noqa: E402
from knomit_judge.layout import detect_knomit  # noqa: E402
from knomit_judge.session.lines import batches, request, shown  # noqa: E402

SHAPE = {"lines": [{"spelling": "<the spelling exactly as listed>", "mechanism": "<one sentence>"}]}


def render(req, name: str) -> str:
    return "\n".join([
        f"# describe request {name}: {len(req.spellings)} spellings",
        "# Answer by calling the tool below once; its input, as one JSON object of this shape:",
        json.dumps(SHAPE, ensure_ascii=False),
        "# with one entry per spelling listed, in the order given.",
        "",
        "=== tool (forced: tool_choice = this tool) ===",
        json.dumps(req.tool, indent=2, ensure_ascii=False),
        "",
        "=== system ===",
        req.system,
        "",
        "=== user ===",
        req.user,
        "",
    ])


def write(out: Path, label: str, items: list, config: Config) -> list[dict]:
    rows = []
    for n, batch in enumerate(batches(items, config.describe.batch), 1):
        req = request(batch, config.describe.body_chars)
        name = f"{label}-{n:02d}"
        text = render(req, name)
        (out / "requests" / f"{name}.txt").write_text(text, encoding="utf-8")
        rows.append({"request": name, "spellings": list(req.spellings),
                     "bytes": len(req.system.encode()) + len(req.user.encode())})
    return rows


def sample_items(tmp: Path, config: Config) -> list:
    root = extract_sample(tmp / "sample")
    corpus = load_corpus(root, layout=_layout(root))
    return [shown(m, corpus, config.describe.carriers) for m in sorted(corpus.carriers)]


def aekb_items(tmp: Path, config: Config) -> list:
    from bench_living import BUNDLE, real_days

    days, _ = real_days(BUNDLE, tmp / "src", None)
    latest = {}
    for day in days:
        root = tmp / "day"
        shutil.rmtree(root, ignore_errors=True)
        for path, data in day.files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(data)
        found = detect_knomit(root)
        layout = CorpusConfig(paths=list(found.paths), motif_keys=["motifs", "entities"], retract=found.retract) \
            if found else CorpusConfig(motif_keys=["motifs", "entities"])
        corpus = load_corpus(root, layout=layout)
        for m in corpus.carriers:
            item = shown(m, corpus, config.describe.carriers)
            if item.facts:
                latest[m] = item  # its carriers as of the last day it is carried
    return [latest[m] for m in sorted(latest)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", choices=["sample", "aekb"])
    args = ap.parse_args(argv)
    config = Config()
    (args.out / "requests").mkdir(parents=True, exist_ok=True)
    index = {}
    with tempfile.TemporaryDirectory(prefix="knomit-describe-") as tmp:
        for label, items in (("sample", sample_items), ("aekb", aekb_items)):
            if args.only and args.only != label:
                continue
            rows = write(args.out, label, items(Path(tmp), config), config)
            index[label] = rows
            print(f"{label}: {sum(len(r['spellings']) for r in rows)} spellings in {len(rows)} requests, "
                  f"{sum(r['bytes'] for r in rows):,} bytes of prompt", flush=True)
    (args.out / "requests" / "index.json").write_text(json.dumps(index, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
