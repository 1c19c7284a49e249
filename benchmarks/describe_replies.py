#!/usr/bin/env python3
"""describe_replies: a model's answers to describe_requests.py's requests, as scripted replies files.

    .venv/bin/python benchmarks/describe_replies.py DIR [--model NAME] [--date YYYY-MM-DD]

DIR holds requests/ (index.json: each request's name and spellings) and replies/<name>.json (the tool input
the model gave, one JSON object). Mechanical, no edit: each reply is read by the product's own parser
(session/lines.parse), only the spellings its request asked are kept, and each becomes one line
    {"pass": "describe", "spelling": S, "reply": {"mechanism": LINE}, "request": NAME}
of benchmarks/data/knomit-kb-describe-replies.jsonl (the sample's requests) or
benchmarks/data/aekb-describe-replies.jsonl (the aekb replay's). A spelling whose reply gave no line is
left out (the scripted judge then gives it none, and says so) and counted here. A request with no reply
file is counted too. Provenance goes to benchmarks/data/describe-replies.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from knomit_judge.errors import Unparsed  # noqa: E402
from knomit_judge.session.lines import parse, prompt  # noqa: E402

OUT = {"sample": "knomit-kb-describe-replies.jsonl", "aekb": "aekb-describe-replies.jsonl"}
# bench_living's usage model: characters / 4 in, plus the forced tool's overhead; the reply's characters / 4 + 30 out
TOOL_OVERHEAD, PRICE = 313, (3.0, 15.0)  # claude-sonnet-4-5, USD per million tokens in and out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--model", default="a Claude-class model in a helper session")
    ap.add_argument("--date", default="")
    args = ap.parse_args(argv)
    index = json.loads((args.dir / "requests" / "index.json").read_text(encoding="utf-8"))
    summary = []
    for label, requests in index.items():
        entries, missing, absent, unparsed = [], [], [], []
        usd = 0.0
        for r in requests:
            path = args.dir / "replies" / f"{r['request']}.json"
            if not path.exists():
                absent.append(r["request"])
                missing.extend(r["spellings"])
                continue
            raw = path.read_text(encoding="utf-8")
            chars = r["bytes"] + len(json.dumps([prompt().tool]))  # as bench_living counts: the tool schema too
            usd += ((chars // 4 + TOOL_OVERHEAD) * PRICE[0] + (len(raw) // 4 + 30) * PRICE[1]) / 1e6
            try:
                lines = parse(raw, r["spellings"])
            except Unparsed as e:
                unparsed.append(f"{r['request']}: {e.args[0]}")
                missing.extend(r["spellings"])
                continue
            for s in r["spellings"]:
                if s in lines:
                    entries.append({"pass": "describe", "spelling": s, "reply": {"mechanism": lines[s]},
                                    "request": r["request"]})
                else:
                    missing.append(s)
        out = ROOT / "benchmarks" / "data" / OUT[label]
        out.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")
        text = (f"{label}: {len(entries)} lines from {len(requests) - len(absent) - len(unparsed)} of "
                f"{len(requests)} requests -> {out.relative_to(ROOT)}; {len(missing)} spelling(s) without a line"
                + (f"; no reply: {', '.join(absent)}" if absent else "")
                + (f"; unparsed: {'; '.join(unparsed)}" if unparsed else "")
                + f"; at claude-sonnet-4-5 prices (prompt bytes / 4 + {TOOL_OVERHEAD} in, reply characters / 4 + 30 "
                f"out) about ${usd:.2f}, ${usd / max(1, sum(len(r['spellings']) for r in requests)) * 10_000:.0f} "
                "per 10k spellings at the same rate")
        print(text)
        summary.append(text)
    (ROOT / "benchmarks" / "data" / "describe-replies.md").write_text(PROVENANCE.format(
        prompt=prompt().id, model=args.model, date=args.date or "unknown",
        summary="\n".join(f"- {s}" for s in summary)),
        encoding="utf-8")
    return 0


PROVENANCE = """# Recorded describe lines

`knomit-kb-describe-replies.jsonl` and `aekb-describe-replies.jsonl` are scripted replies files
(`{{"pass": "describe", "spelling": S, "reply": {{"mechanism": LINE}}}}`) holding one line per spelling,
used by the benchmarks as the scripted judge's `describe` replies.

How they were produced:

- `benchmarks/describe_requests.py` rendered the exact requests the product sends (prompt `{prompt}`:
  system text, user message with the evidence, the forced tool `describe_reply` and its input schema)
  for every spelling of `../shared/data/knomit-kb-sample.tar.gz` (4 requests) and every motif and entity
  spelling the `bench_living.py` replay of `../shared/data/aekb-history.bundle` meets (12 requests).
- Each request was answered by {model}, one fresh context per request, shown only that request: never
  our labels, never another request or its answer (the measurement protocol the lead set and ran; the
  answers came back as `replies/<request>.json`, the tool input as given). Date: {date}.
- `benchmarks/describe_replies.py` turned the answers (the tool input, as given) into these files
  mechanically, through the product's own reply parser. No line was written or edited by hand.

{summary}
"""


if __name__ == "__main__":
    sys.exit(main())
