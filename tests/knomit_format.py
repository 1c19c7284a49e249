"""A test-side port of knomit's own fact reader (ParseFact in knomit's internal/fact/format.go).

Written from its rules, not its code: the file starts with a `---` line and the front matter
closes with a `---` line; the front matter is a YAML mapping; `sources` is an int; `domain`,
`entities`, `refs` and `motifs` are lists of strings; `confidence` is a number; the first line
of the body (after trimming) is a `#` heading with a non-empty title. Keys it does not know are
ignored, as knomit ignores them: so a `status: retracted` fact is still a fact to knomit.
"""

from __future__ import annotations

import yaml

LIST_KEYS = ("domain", "entities", "refs", "motifs")


class NotAKnomitFact(ValueError):
    pass


def knomit_parse(text: str) -> dict:
    """The fact as knomit reads it (title, body and the known keys), or NotAKnomitFact saying why."""
    text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise NotAKnomitFact("missing opening frontmatter delimiter")
    rest = text[4:]
    end = rest.find("\n---\n")
    if end < 0:
        raise NotAKnomitFact("missing closing frontmatter delimiter")
    try:
        meta = yaml.safe_load(rest[:end])
    except yaml.YAMLError as e:
        raise NotAKnomitFact(f"yaml: {e}") from None
    meta = {} if meta is None else meta
    if not isinstance(meta, dict):
        raise NotAKnomitFact("front matter is not a mapping")
    sources = meta.get("sources")
    if sources is not None and (isinstance(sources, bool) or not isinstance(sources, int)):
        raise NotAKnomitFact(f"sources must be an int, got {sources!r}")
    confidence = meta.get("confidence")
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, (int, float))):
        raise NotAKnomitFact(f"confidence must be a number, got {confidence!r}")
    for key in LIST_KEYS:
        value = meta.get(key)
        if value is not None and (
            not isinstance(value, list)
            or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value)
        ):
            raise NotAKnomitFact(f"{key} must be a list of strings, got {value!r}")
    for key in ("type", "kind", "origin"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise NotAKnomitFact(f"{key} must be a string")
    body = rest[end + 5 :].strip()
    first, _, after = body.partition("\n")
    if not first.startswith("#"):
        raise NotAKnomitFact("no title heading found")
    title = first.lstrip("#").strip()
    if not title:
        raise NotAKnomitFact("empty title heading")
    return {
        "title": title,
        "body": after.strip(),
        "sources": sources or 0,
        **{key: [str(v) for v in meta.get(key) or []] for key in LIST_KEYS},
    }
