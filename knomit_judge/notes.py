"""What a note's Markdown says beside its front matter: inline `#tags` (outside code), Obsidian's ways of writing
front-matter tags, and the placeholders that make a note a template rather than a fact."""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Iterator
from typing import Any

# Obsidian's tag (help.obsidian.md, Tags): `#` at the start of a line or after white space, then letters, digits,
# `_`, `-` and `/` (nesting) and other Unicode that is no punctuation, with at least one character that is not a
# digit (`#1984` is no tag, `#y1984` is). What stops one: white space and punctuation other than `_`, `-`, `/`.
_STOP = r"\s!-,.:-@\[-\^`{-~\u2000-\u206f\u2e00-\u2e7f\u3000-\u303f"
_TAG = re.compile(rf"(?<!\S)#([^{_STOP}]+)")
_TAG_TEXT = re.compile(rf"[^{_STOP}]+")
_NOT_DIGIT = re.compile(r"\D")
# a motif needs a letter or digit: an emoji-only `#🚀` is Obsidian's, not ours
_HAS_WORD = re.compile(r"\w")
# a fenced code block's opening line (in a quote or a list too)
_FENCE = re.compile(r"^[ \t>]*(`{3,}|~{3,})")
# an inline code span runs from one run of backticks to the next run of the same length
_TICKS = re.compile(r"`+")
_BLANK = re.compile(r"\n[ \t]*\n")  # ... within its paragraph
# [[target#heading]], [text](url#anchor): no tags inside
_LINK = re.compile(r"\[\[[^\[\]\n]*\]\]|\]\([^()\s]*\)")
# Front-matter keys Obsidian reads tags from: `tags` (and `tag`, deprecated since 1.4): a list, or one string of
# tags separated by commas or white space, each with or without its `#`.
OBSIDIAN_TAG_KEYS = ("tags", "tag")
_TAG_SEP = re.compile(r"([,\s]+)")

# Obsidian's Templates plugin: {{title}}, {{date}}, {{time}}, with an optional :format (its Daily notes and Unique
# note creator use them too); any {{name}} in front matter or a heading (QuickAdd's {{VALUE}}); Templater's <% tp.
_CORE_VARIABLE = re.compile(r"\{\{\s*(?:title|date|time)(?::[^{}\n]*)?\s*\}\}", re.I)
_ANY_VARIABLE = re.compile(r"\{\{\s*[A-Za-z_][\w.-]*(?::[^{}\n]*)?\s*\}\}")
_TEMPLATER = re.compile(r"<%[-_*+]?\s*(?:await\s+)?tp\.")
_HEADING = re.compile(r"^#{1,6}[ \t]", re.M)


def _skipped(text: str) -> list[tuple[int, int]]:
    """The spans of `text` no tag or placeholder is read from: fenced code blocks, inline code, link targets."""
    fenced: list[tuple[int, int]] = []
    fence, start, at = "", 0, 0
    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line)
        if not fence and m:
            fence, start = m.group(1), at
        elif (
            fence and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line[m.end() :].strip()
        ):
            fenced.append((start, at + len(line)))
            fence = ""
        at += len(line)
    # an unclosed fence runs to the end (CommonMark)
    if fence:
        fenced.append((start, len(text)))
    spans = list(fenced)
    last = 0
    # the text between fenced blocks: code spans and links
    for a, b in [*fenced, (len(text), len(text))]:
        spans += _code_spans(text, last, a)
        spans += [(m.start(), m.end()) for m in _LINK.finditer(text, last, a)]
        last = b
    # disjoint and sorted, for bisect
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def _code_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The inline code spans of text[start:end], found in one pass over its backtick runs (a regex that looks
    for each opener's closer takes quadratic time on a paragraph of unmatched backticks)."""
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(text, start, end)]
    blanks = [m.start() for m in _BLANK.finditer(text, start, end)]
    by_length: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(runs):
        by_length.setdefault(b - a, []).append(i)
    spans, i = [], 0
    while i < len(runs):
        a, b = runs[i]
        same = by_length[b - a]
        at = bisect.bisect_right(same, i)
        if at < len(same):
            close = runs[same[at]]
            blank = bisect.bisect_left(blanks, b)
            # no blank line between: one span
            if blank == len(blanks) or blanks[blank] >= close[0]:
                spans.append((a, close[1]))
                i = same[at] + 1
                continue
        # no closer in its paragraph: these backticks are text
        i += 1
    return spans


def _outside(spans: list[tuple[int, int]], pos: int) -> bool:
    """Whether pos lies in none of the disjoint, sorted spans."""
    at = bisect.bisect_right(spans, (pos, sys.maxsize)) - 1
    return at < 0 or not spans[at][0] <= pos < spans[at][1]


def is_tag(text: str) -> bool:
    """Whether `text` can be written as an inline tag: tag characters only, not all digits, a letter or digit in it."""
    return bool(_TAG_TEXT.fullmatch(text)) and _tag_like(text)


def _tag_like(tag: str) -> bool:
    return bool(_NOT_DIGIT.search(tag)) and bool(_HAS_WORD.search(tag))


def _tags(text: str) -> Iterator[re.Match[str]]:
    """The inline tags of a note's Markdown (its text after the front matter), as matches; group 1 is the tag."""
    if "#" not in text:
        return
    spans = _skipped(text)
    for m in _TAG.finditer(text):
        if _tag_like(m.group(1)) and _outside(spans, m.start()):
            yield m


def inline_tags(text: str) -> list[str]:
    """Every inline `#tag` of a note's Markdown, without its `#`, in order, each once.

    Not in fenced or inline code, not a heading's `#` marks, not a link's `#heading`; `#a/b` is the tag `a/b`.
    """
    return list(dict.fromkeys(m.group(1) for m in _tags(text)))


def renamed_inline(text: str, lose: str, keep: str) -> str:
    """The Markdown with every inline `#lose` written `#keep`, every other byte as it was (`#lose/x` stays)."""
    out, last = [], 0
    for m in _tags(text):
        if m.group(1) == lose:
            out += [text[last : m.start(1)], keep]
            last = m.end(1)
    return "".join(out) + text[last:] if out else text


def obsidian_tags(value: Any) -> Any:
    """Front-matter tags as Obsidian reads them: one string split at commas and white space, a leading `#` dropped
    from each value; any other shape is returned as it is (for the reader to judge)."""
    if isinstance(value, str):
        return [t.lstrip("#") for t in _TAG_SEP.split(value)[::2] if t.lstrip("#")]
    if isinstance(value, list):
        return [v.strip().lstrip("#") if isinstance(v, str) else v for v in value]
    return value


def bare_tag(value: Any) -> str:
    """A front-matter tag value as the spelling it carries: stripped, without its `#`."""
    return str(value).strip().lstrip("#")


def renamed_tag_string(value: str, lose: str, keep: str) -> str:
    """A one-string `tags` value (`recipe, cooking`) with `lose` written `keep`, its separators and `#`s kept, and a
    tag the rename makes a repeat dropped with the separator before it."""
    parts = _TAG_SEP.split(value)
    seen: set[str] = set()
    out: list[str] = []
    for i in range(0, len(parts), 2):
        token = parts[i]
        bare = token.lstrip("#")
        if bare == lose:
            token, bare = token[: len(token) - len(bare)] + keep, keep
        if bare and bare in seen:
            continue
        seen.add(bare)
        out += ([parts[i - 1]] if i and out else []) + [token]
    return "".join(out)


def template_marker(text: str, body_start: int) -> tuple[str, int] | None:
    """(the placeholder, its line) that makes a note a template, or None for a note; the body starts at `body_start`.

    A template is not a fact: `created: {{date}}` is no YAML date and `# {{title}}` no title. Any `{{name}}` in
    the front matter or a heading, Obsidian's own variables ({{title}}, {{date}}, {{time}}) anywhere outside
    code, and Templater's `<% tp.` commands mark one.
    """
    if "{{" not in text and "<%" not in text:
        return None
    line = lambda pos: text.count("\n", 0, pos) + 1  # noqa: E731
    for rx in (_ANY_VARIABLE, _TEMPLATER):
        if (m := rx.search(text, 0, body_start)) is not None:
            return m.group(0), line(m.start())
    body = text[body_start:]
    spans = _skipped(body)
    headings = [(h.start(), body.find("\n", h.end()) % (len(body) + 1)) for h in _HEADING.finditer(body)]  # -1: the end
    for rx in (_CORE_VARIABLE, _TEMPLATER, _ANY_VARIABLE):
        for m in rx.finditer(body):
            if rx is _ANY_VARIABLE and _outside(headings, m.start()):
                continue
            if _outside(spans, m.start()):
                return m.group(0), line(body_start + m.start())
    return None
