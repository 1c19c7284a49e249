"""JSON Lines files people write (labels, label batches): parsed with line numbers, errors naming both."""

from __future__ import annotations

import json
from pathlib import Path


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
