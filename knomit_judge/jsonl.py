"""JSON as this package writes it (strict: no NaN or Infinity), and JSON Lines files people write (labels, label
batches): parsed with line numbers, errors naming both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def dumps(value: object, **options: Any) -> str:
    """`json.dumps` that writes strict JSON: a NaN or an infinity raises ValueError instead of writing `NaN`,
    which strict parsers (jq, JavaScript, Go) reject. Every number here comes from finite config values and
    counts (config.py checks each), so one would be a bug: it fails where it is made, not in a reader."""
    return json.dumps(value, allow_nan=False, **options)  # noqa: TID251 (the one place that may)


def read_jsonl(path: Path | str, error: type[Exception]) -> list[tuple[int, object]]:
    """(line number, parsed value) for every non-blank line; an unreadable file or a line that is
    not JSON raises `error` naming the path (and the line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise error(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text") from None
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        if raw.strip():
            try:
                out.append((n, json.loads(raw)))
            except json.JSONDecodeError as e:
                raise error(f"{path}:{n}: not JSON ({e.msg})") from None
    return out
