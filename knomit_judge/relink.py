"""A decision keeps every link: each link to a retired note pointed at its survivor in the form it was written,
the names the survivor takes from it, and the check that refuses a decision that would still break a link."""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from .corpus import ALIAS_KEYS, FRONT, KEY_LINE, Corpus, Fact
from .errors import BadFact
from .links import (
    MDLINK,
    WIKI_KINDS,
    WIKILINK,
    BrokenLink,
    Link,
    Vault,
    front_mapping,
    is_note,
    name_key,
    note_links,
    stem,
    vault_of,
)
from .rewrite import relinked_keys, rewrite, yaml_value

# what a Markdown link's path keeps unencoded
_RAW_OK = re.compile(r"[A-Za-z0-9/._~!$&'*+,;=:@-]")
# a path that wrote its non-ASCII letters encoded
_ESCAPED_NON_ASCII = re.compile(r"%[89A-Fa-f][0-9A-Fa-f]")


@dataclass
class Relinked:
    """A note's text with its links to a retired note pointed at the survivor."""

    text: str
    count: int  # links rewritten
    # a wikilink named the retired note by its file name
    by_file_name: bool


def relinked_note(vault: Vault, path: str, text: str, *, old: str, new: str, gone: set[str]) -> Relinked:
    """Every link of the note at `path` that leads to `old` pointed at `new`, keeping how it was written.

    `text` is the note as this decision's earlier writes left it; `gone` the files the decision deletes. A
    link by an alias is left as it is: the survivor takes the alias (names_taken), so it leads there.
    """
    body: list[tuple[Link, str]] = []
    front: list[tuple[Link, str]] = []
    by_file_name = False
    for link in note_links(path, text):
        if link.start < 0:
            # `links`/`refs` values are relinked by key below; a canvas is not rewritten
            continue
        target, how = vault.resolve(link)
        # by an alias, or its own note: it leads where it did
        if target != old or how not in ("path", "name"):
            continue
        (front if link.kind == "property" else body).append((link, relinked_link(vault, link, new, gone)))
        by_file_name |= link.kind in WIKI_KINDS and "/" not in link.target.strip("/")
    out = _spliced(text, body + front)
    count = len(body) + len(front)
    if front and not _same_but(path, text, out, {link.key for link, _ in front}):
        # quoting the new name needs YAML's own writer
        out, kept = _by_key(path, _spliced(text, body), front)
        count -= len(front) - kept
    if _meta_of(path, out) is not None and (changes := relinked_keys(out, old, new)):
        count += sum(1 for value in changes.values() if isinstance(value, list))
        out = rewrite(out, changes)
    return Relinked(out, count, by_file_name)


def relinked_link(vault: Vault, link: Link, new: str, gone: set[str]) -> str:
    """The link as it is written to name `new`: its kind, display text, path style and heading kept.

    A bare name stays a bare name where the survivor's name is unique, else it becomes the path from the
    vault's root; a path keeps its style (from the root, or relative). A heading or block the survivor
    lacks is dropped, and a link without display text shows what it showed before (`old > heading`); an
    embed of it embeds the whole survivor, which holds the retired note's claim.
    """
    if link.kind == "markdown":
        return _relinked_markdown(vault, link, new)
    m = WIKILINK.fullmatch(link.raw)
    assert m is not None, "a wikilink's raw text is what WIKILINK matched"
    name = link.target
    md = name.lower().endswith(".md")
    base = name[:-3] if md else name
    bare = new[:-3] if new.lower().endswith(".md") else new
    if "/" not in base.strip("/"):
        out = stem(new) if vault.unique_name(new, gone) else bare
    elif base.startswith(("./", "../")):
        out = posixpath.relpath(bare, posixpath.dirname(link.note) or ".")
        out = f"./{out}" if base.startswith("./") and not out.startswith("../") else out
    else:
        out = ("/" if base.startswith("/") else "") + bare
    out += name[-3:] if md else ""
    keep = vault.has_subpath(new, link.subpath)
    display = link.display
    if link.subpath and not keep and display is None and link.kind != "embed":
        display = " > ".join([name, *(p for p in link.subpath.split("#") if p)])
    bar = "\\|" if "\\|" in m.group(2) or (link.table and link.display is None) else "|"
    return f"{m.group(1)}[[{out}{link.subpath if keep else ''}{bar + display if display is not None else ''}]]"


def _relinked_markdown(vault: Vault, link: Link, new: str) -> str:
    """[text](path) to `new`: the path from the linking note's folder (or the root, as written), encoded as before."""
    m = MDLINK.fullmatch(link.raw)
    assert m is not None, "a Markdown link's raw text is what MDLINK matched"
    dest = m.group(3)
    angle = dest.startswith("<")
    path, hash_, frag = (dest[1:-1] if angle else dest).partition("#")
    decoded = unquote(path)
    if decoded.startswith("/"):
        out = "/" + new
    else:
        out = posixpath.relpath(new, posixpath.dirname(link.note) or ".")
        out = f"./{out}" if decoded.startswith("./") and not out.startswith("../") else out
    if not decoded.lower().endswith(".md") and out.lower().endswith(".md"):
        # `[text](Note)`: Obsidian reads it without the extension too
        out = out[:-3]
    if not angle:
        every = bool(_ESCAPED_NON_ASCII.search(path))
        out = "".join(c if _RAW_OK.match(c) or (ord(c) > 127 and not every) else quote(c, safe="") for c in out)
    if hash_ and vault.has_subpath(new, "#" + unquote(frag)):
        out += hash_ + frag
    return f"{m.group(1)}[{m.group(2)}]({'<' + out + '>' if angle else out}{m.group(4)})"


def _spliced(text: str, edits: list[tuple[Link, str]]) -> str:
    for link, new in sorted(edits, key=lambda e: e[0].start, reverse=True):
        text = text[: link.start] + new + text[link.end :]
    return text


def _meta_of(path: str, text: str) -> dict[str, Any] | None:
    front = FRONT.match(text)
    return front_mapping(path, front.group(1)) if front else {}


def _same_but(path: str, before: str, after: str, keys: set[str | None]) -> bool:
    """Whether the front matter still parses, with the same keys, and only `keys` changed."""
    old, new = _meta_of(path, before), _meta_of(path, after)
    return (
        old is not None
        and new is not None
        and set(old) == set(new)
        and all(new[k] == v for k, v in old.items() if k not in keys)
    )


def _by_key(path: str, text: str, front: list[tuple[Link, str]]) -> tuple[str, int]:
    """Property links rewritten through their key's value (a string, or a list of them); (text, how many)."""
    meta = _meta_of(path, text) or {}
    changes: dict[str, Any] = {}
    done = 0
    for key in dict.fromkeys(link.key for link, _ in front if link.key is not None):
        swaps = [(link.raw, new) for link, new in front if link.key == key]
        value = meta.get(key)
        if isinstance(value, str):
            changes[key] = _swapped(value, swaps)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            changes[key] = [_swapped(v, swaps) for v in value]
        else:
            # a shape this tool does not rewrite: the link check names the link it leaves
            continue
        done += len(swaps)
    return (rewrite(text, changes) if changes else text), done


def _swapped(value: str, swaps: list[tuple[str, str]]) -> str:
    for raw, new in swaps:
        value = value.replace(raw, new)
    return value


def names_taken(
    vault: Vault, text: str, keep: Fact, lose: Fact, *, by_file_name: bool, titles: bool
) -> tuple[str, list[str]]:
    """The survivor's text with the retired note's names among its aliases, and the names added.

    It takes the retired note's aliases; with `titles` (a corpus whose notes are linked by name) its title,
    and its file name when a wikilink named it so: a link typed later by that name still finds the
    survivor. A name that already leads elsewhere (another note's file name or alias) is not taken, so no
    link of another note is drawn away. The key keeps its shape: a block list gets its new lines.
    """
    names = [*lose.aliases, *([lose.title] if titles else []), *([stem(lose.path)] if by_file_name else [])]
    meta = _meta_of(keep.path, text)
    if meta is None:
        return text, []
    # the key the note has: `aliases` first
    key = next((k for k in ALIAS_KEYS if k in meta), ALIAS_KEYS[0])
    old = meta.get(key)
    have = [] if old is None else [str(v) for v in (old if isinstance(old, list) else [old])]
    seen = {n.strip().casefold() for n in (*have, keep.title, stem(keep.path))}
    added: list[str] = []
    for name in (n.strip() for n in names):
        if (
            name.casefold() in seen
            or not name
            or "[[" in name
            or _elsewhere(vault, name, keep.path, {keep.path, lose.path})
        ):
            continue
        seen.add(name.casefold())
        added.append(name)
    if not added:
        return text, []
    return _appended(text, key, added) or rewrite(
        text, {key: [*(old if isinstance(old, list) else have), *added]}
    ), added


def _elsewhere(vault: Vault, name: str, keep: str, ours: set[str]) -> bool:
    """Whether a wikilink by `name` from the survivor leads (or, for a shared alias, might lead) to another note."""
    target, _ = vault.resolve(Link(keep, "wikilink", name))
    return (target is not None and target not in ours) or bool(vault.alias_of.get(name.casefold(), set()) - ours)


def _appended(text: str, key: str, names: list[str]) -> str | None:
    """`names` added as new `- name` lines under a block list `key:`, or None where the key is not one."""
    front = FRONT.match(text)
    if not front:
        return None
    lines = front.group(1).split("\n")
    at = next((i for i, ln in enumerate(lines) if (km := KEY_LINE.match(ln)) and km.group(1) == key), None)
    if at is None or lines[at].rstrip("\r").split(":", 1)[1].strip():
        return None
    items = 0
    while at + items + 1 < len(lines) and re.match(r"^[ \t]*- ", lines[at + items + 1]):
        items += 1
    if not items:
        return None
    last = lines[at + items]
    indent = last[: len(last) - len(last.lstrip())]
    cr = "\r" if last.endswith("\r") else ""
    lines[at + items + 1 : at + items + 1] = [f"{indent}- {yaml_value(n)}{cr}" for n in names]
    start = front.start(1)
    return text[:start] + "\n".join(lines) + text[front.end(1) :]


def titles_are_names(corpus: Corpus) -> bool:
    """Whether notes are linked by name here (a vault, a folder of notes: front matter optional)."""
    return corpus.layout is not None and corpus.layout.front_matter == "optional"


def newly_broken(vault: Vault, writes: dict[str, str | None], retired: dict[str, str]) -> list[BrokenLink]:
    """The links a decision's writes would break: each link of an active note that led to an active note before
    and would no longer lead there after (to the survivor, for a link to a note it retires).

    A link that led to nothing, or to a retracted note, before is not the decision's to mend; a link of a note
    the decision retires is history. Only links by a name of a written file can change where they lead, so
    only those are resolved.
    """
    keys = _names(vault, writes)
    with vault.trying(writes):
        keys |= _names(vault, writes)
    notes = set().union(*(vault.linked_by.get(k, set()) for k in keys)) | {p for p in writes if is_note(p)}
    before = {
        note: _led_to(vault, note, retired) for note in sorted(notes) if vault.active(note) and note in vault.links
    }
    broken: list[BrokenLink] = []
    with vault.trying(writes):
        for note, wanted in before.items():
            if not vault.active(note) or note not in vault.links:
                # retired by this decision: its links are history
                continue
            have = _led_to(vault, note, {})
            counted = Counter(t for link, t in wanted if link.kind != "path") - Counter(
                t for link, t in have if link.kind != "path"
            )
            paths = (
                {t for link, t in wanted if link.kind == "path"}
                - {t for link, t in have if link.kind == "path"}
                - {note}
            )
            for target in [*counted.elements(), *sorted(paths)]:
                link = next(link for link, t in wanted if t == target)
                broken.append(BrokenLink(link, "moved", target))
    return broken


def _names(vault: Vault, writes: dict[str, str | None]) -> set[str]:
    """The name keys by which a link may lead to one of the written files."""
    return {k for path in writes for k in (name_key(path), *(name_key(a) for a in vault.aliases.get(path, ())))}


def would_break(corpus: Corpus, writes: dict[str, str | None], retired: dict[str, str]) -> list[BrokenLink]:
    """newly_broken() for a decision; a rewrite of facts' front matter that changes no link, alias or status (an
    alias merge's motif keys) cannot move a link, and is let through without reading every note."""
    if not retired and all(_moves_nothing(corpus, path, text) for path, text in writes.items()):
        return []
    return newly_broken(vault_of(corpus), writes, retired)


def _moves_nothing(corpus: Corpus, path: str, text: str | None) -> bool:
    fact = corpus.facts.get(path)
    if fact is None or text is None:
        # a new file, a deletion, or a note that is no fact
        return False
    try:
        new = corpus.parse(path, text)
    except BadFact:
        # refused by the reader's check (gitops.Applier.commit) before anything is written
        return True
    sig = lambda f: (f.status, f.aliases, [(k.kind, k.target, k.subpath) for k in note_links(path, f.text, f)])  # noqa: E731
    return sig(fact) == sig(new)


def _led_to(vault: Vault, note: str, retired: dict[str, str]) -> list[tuple[Link, str]]:
    """Each link of the note that leads to an active file, with where it should lead once `retired` are."""
    out = []
    for link in vault.links.get(note, []):
        target, _ = vault.resolve(link)
        if target is not None and vault.active(target):
            out.append((link, retired.get(target, target)))
    return out


def refusal(broken: list[BrokenLink]) -> str:
    """Why a decision is refused, for the pass note and the session's problems."""
    first = broken[0]
    more = f" and {len(broken) - 1} more" if len(broken) > 1 else ""
    return (
        f"it would break {len(broken)} link(s): {first.link.raw} in {first.link.where()} would no longer lead to "
        f"{first.to}{more} (relink by hand, then the next session applies it)"
    )
