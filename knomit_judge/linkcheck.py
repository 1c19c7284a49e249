"""`knomit-judge links`: the links of a corpus that lead to nothing, or to a retracted note."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import load_config
from .corpus import load_corpus
from .gitops import open_repo
from .links import vault_of


def check_links(root: Path | str) -> dict[str, Any]:
    """Every note of the corpus read for its links, each resolved as Obsidian resolves it (read-only)."""
    root = Path(root).resolve()
    open_repo(root)
    config = load_config(root)
    corpus = load_corpus(root, config.corpus.max_fact_bytes, layout=config.corpus)
    return vault_of(corpus).report()


def links_lines(report: dict[str, Any]) -> list[str]:
    """The link check as text: the count, then one line a broken link."""
    said = {"nothing": "leads to no note or file", "retracted": "leads to the retracted {to}"}
    head = (
        f"links: {report['links']} in {report['notes']} note(s); {len(report['broken'])} broken "
        f"({report['nothing']} to nothing, {report['retracted']} to a retracted note)"
    )
    return [
        head,
        *(
            f"{b['note']}:{b['line']}: {b['link']} " + said[b["why"]].format(to=b["to"])
            if b["line"]
            else f"{b['note']}: {b['link']} " + said[b["why"]].format(to=b["to"])
            for b in report["broken"]
        ),
    ]
