"""A fact's front matter rewritten byte-for-byte: the keys a merge, a rename, a relink or a retraction changes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml

from .config import RetractMode
from .corpus import (
    BOM,
    CONTROL,
    DEFAULT_MOTIF_KEYS,
    FRONT,
    KB_SCHEME,
    KEY_LINE,
    Fact,
    body_start,
    front_matter,
    link_target,
)
from .notes import OBSIDIAN_TAG_KEYS, bare_tag, obsidian_tags, renamed_inline, renamed_tag_string

# `motifs: &m [..]`: the anchor on a key's value
_ANCHOR = re.compile(r"^[A-Za-z_][\w-]*[ \t]*:[ \t]*(&[^\s\[\]{},]+)")
# Keys a merge takes in from the retired fact (with the motif keys): lists are unioned, an int count is summed.
ABSORBED_KEYS = ("sources", "refs", "links", "entities", "domain", "tags")
# What a retraction still carries over: where the claim came from and what it points at, never its motifs
# (a retraction says the fact added no claim), so no source is left only in git history.
PROVENANCE_KEYS = ("sources", "refs", "links")


def _yaml_scalar(value: Any) -> str:
    out = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True)
    out = out.removesuffix("\n").removesuffix("\n...").strip()
    if isinstance(value, str) and ":" in out and out[0] not in "'\"" and not CONTROL.search(value):
        # A plain `https://x` inside [..] is read by PyYAML but refused by stricter readers (libyaml's
        # flow rule for ':'); quoted, every reader agrees, and it is how knomit writes its refs.
        out = "'" + value.replace("'", "''") + "'"
    return out


def yaml_value(value: Any) -> str:
    """A front-matter value on one line, as the rewrite writes it (a list in flow style)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_scalar(v) for v in value) + "]"
    return _yaml_scalar(value)


def rewrite(text: str, changes: dict[str, Any]) -> str:
    """Set front-matter keys, keeping every other key's lines byte-for-byte.

    Each top-level key owns its line and the indented or list lines under it;
    a changed key's block is replaced in place, a new key is appended. A note without front matter
    (a vault's) gets one holding just the changed keys, after its byte-order mark if it has one.
    """
    m = FRONT.match(text)
    if not m:
        bom = BOM if text.startswith(BOM) else ""
        newline = "\r\n" if "\r\n" in text else "\n"
        keys = "".join(f"{key}: {yaml_value(value)}{newline}" for key, value in changes.items())
        return f"{bom}---{newline}{keys}---{newline}{text[len(bom) :]}" if changes else text
    bom = BOM if text.startswith(BOM) else ""
    newline = "\r\n" if "\r\n" in m.group(0) else "\n"
    front = m.group(1)
    lines = front.split("\n")
    blocks: list[tuple[str | None, list[str]]] = []
    for line in lines:
        km = KEY_LINE.match(line)
        if km or not blocks:
            blocks.append((km.group(1) if km else None, [line]))
        else:
            blocks[-1][1].append(line)
    done = set()
    out = []
    for key, block in blocks:
        if key is not None and key in changes:
            trailing = [ln for ln in block[1:] if not ln.strip()]  # keep blank separators
            # `extra: *m` elsewhere needs `&m` kept; an anchor deeper in the block is not kept, and the
            # reader's check before a commit (gitops.Applier.commit) refuses the result
            anchor = f"{a.group(1)} " if (a := _ANCHOR.match(block[0])) else ""
            out.append(f"{key}: {anchor}{yaml_value(changes[key])}" + ("\r" if block[0].endswith("\r") else ""))
            out.extend(trailing)
            done.add(key)
        else:
            out.extend(block)
    tail: list[str] = []
    while out and not out[-1].strip():
        tail.insert(0, out.pop())
    cr = "\r" if newline == "\r\n" else ""
    out += [f"{key}: {yaml_value(value)}{cr}" for key, value in changes.items() if key not in done]
    out += tail
    new_front = "\n".join(out)
    return f"{bom}---{newline}{new_front}\n---{newline}" + text[m.end() :]


def _stripped(value: Any) -> str:
    return str(value).strip()


def _union(*lists: list[Any], spelt: Callable[[Any], str] = _stripped) -> list[Any]:
    """The lists' items in order, each once (compared as `spelt` spells them: stripped strings)."""
    seen, out = set(), []
    for value in (v for lst in lists for v in lst):
        key = spelt(value)
        if key and key not in seen:
            seen.add(key)
            out.append(value)
    return out


def renamed_motif(
    fact: Fact, lose: str, keep: str, motif_keys: tuple[str, ...] = DEFAULT_MOTIF_KEYS, inline: bool = False
) -> str:
    """The fact's text with spelling `lose` replaced by `keep` inside each motif key that holds it, and (`inline`)
    in the body's `#lose` tags; every other byte as it was.

    Obsidian's tag keys keep their shape: a one-string `tags: a, b` stays one string and a value's `#` stays.
    A nested `#lose/x` is a spelling of its own and is not rewritten (docs/corpus.md).
    """
    meta = front_matter(fact.text)
    changes: dict[str, Any] = {}
    for key in motif_keys:
        value = meta.get(key)
        if key in OBSIDIAN_TAG_KEYS and isinstance(value, (str, list)) and lose in obsidian_tags(value):
            changes[key] = (
                renamed_tag_string(value, lose, keep)
                if isinstance(value, str)
                else _union(
                    [
                        ("#" if str(v).strip().startswith("#") else "") + keep if bare_tag(v) == lose else v
                        for v in value
                    ],
                    spelt=bare_tag,
                )
            )
        elif isinstance(value, str) and value.strip() == lose:
            changes[key] = keep
        elif isinstance(value, list) and any(str(v).strip() == lose for v in value):
            changes[key] = _union([keep if str(v).strip() == lose else v for v in value])
    text = rewrite(fact.text, changes) if changes else fact.text
    if inline:
        at = body_start(text)
        text = text[:at] + renamed_inline(text[at:], lose, keep)
    return text


def _count(value: Any) -> int | None:
    """An int `sources` as written (a count), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def absorbed(
    keep: Fact, lose: Fact, motif_keys: tuple[str, ...] = DEFAULT_MOTIF_KEYS, keys: tuple[str, ...] = ABSORBED_KEYS
) -> dict[str, Any]:
    """The front-matter changes by which `keep` takes in `lose`: each key keeps its type.

    Lists are unioned (order kept, deduplicated), an int `sources` count becomes the sum (as
    knomit's own dedup merge does), and links or refs to either of the two facts are dropped (a
    fact does not link to itself). A retraction takes in only PROVENANCE_KEYS and no motif key.
    """
    mine, theirs = front_matter(keep.text), front_matter(lose.text)
    changes: dict[str, Any] = {}
    for key in dict.fromkeys([*motif_keys, *keys]):
        ours, other = mine.get(key), theirs.get(key)
        tags = key in OBSIDIAN_TAG_KEYS
        # `tags: a, b` is two tags (Obsidian's one-string form), never the one value "a, b"
        if tags:
            ours, other = (obsidian_tags(v) if isinstance(v, str) else v for v in (ours, other))
        if key in ("links", "refs") and isinstance(ours, list) and other is None:
            # still drop the survivor's own link to the fact it absorbs
            other = []
        if other is None or (other == [] and key not in ("links", "refs")) or isinstance(other, (bool, dict)):
            continue
        if key == "sources" and _count(other) is not None and ours is not None and _count(ours) is None:
            # a count cannot join a list of sources; the survivor's list stays as it is
            continue
        new: Any
        if key == "sources" and (have := _count(ours)) is not None:
            more = _count(other)
            new = have + (more if more is not None else len(other) if isinstance(other, list) else 1)
        elif ours is None:
            new = other
        elif isinstance(ours, (list, str)):
            new = _union(_as_list(ours), _as_list(other), spelt=bare_tag if tags else _stripped)
            if isinstance(ours, str) and len(new) == 1:
                new = ours
        else:
            # a shape this tool does not know how to merge: leave it as it is
            continue
        if key in ("links", "refs") and isinstance(new, list):
            new = [r for r in new if link_target(str(r)) not in (keep.path, lose.path)]
        if new != ours and not (ours is None and new == []):
            changes[key] = new
    return changes


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def provenance(keep: Fact, lose: Fact) -> dict[str, Any]:
    """The changes by which a retraction's survivor takes in the sources, refs and links it lacks."""
    return absorbed(keep, lose, motif_keys=(), keys=PROVENANCE_KEYS)


def copy_provenance(keep: Fact, copy: Fact) -> dict[str, Any]:
    """provenance() for an exact duplicate: a literal copy is the same evidence, so a `sources` count is not
    added to (2 + 2 would claim four sources for two); citations the survivor lacks are still taken in."""
    changes = provenance(keep, copy)
    if isinstance(changes.get("sources"), int) and not isinstance(changes["sources"], bool):
        del changes["sources"]
    return changes


def carried_over(keep: Fact, changes: dict[str, Any]) -> list[str]:
    """What `changes` add to `keep`'s front matter, one line a key, for a commit body."""
    mine, lines = front_matter(keep.text), []
    for key, new in changes.items():
        old = mine.get(key)
        if isinstance(new, int) and not isinstance(new, bool):
            lines.append(f"{key}: {old if old is not None else 0} -> {new}")
        elif isinstance(new, list):
            had = {str(v).strip() for v in (old if isinstance(old, list) else [] if old is None else [old])}
            added = [str(v) for v in new if str(v).strip() not in had]
            gone = sorted(had - {str(v).strip() for v in new})
            parts = ([f"+ {', '.join(added)}"] if added else []) + (
                [f"dropped its link to {', '.join(gone)} (the retired fact)"] if gone else []
            )
            if parts:
                lines.append(f"{key}: {'; '.join(parts)}")
        else:
            lines.append(f"{key}: {new}")
    return lines


def relinked(ref: str, old: str, new: str) -> str:
    """`ref` pointed at `new` instead of `old`, in the form it was written (kb:// keeps its repo id)."""
    if link_target(ref) != old:
        return ref
    if ref.strip().startswith(KB_SCHEME):
        repo_id = ref.strip()[len(KB_SCHEME) :].partition("/")[0]
        return f"{KB_SCHEME}{repo_id}/{new}"
    return new


def relinked_changes(fact: Fact, old: str, new: str) -> dict[str, Any]:
    """The front-matter changes that point the fact's links and kb:// refs at `new` instead of `old`."""
    return relinked_keys(fact.text, old, new)


def relinked_keys(text: str, old: str, new: str) -> dict[str, Any]:
    """relinked_changes of a note's text (a note that is no fact has `links` and `refs` too)."""
    meta = front_matter(text)
    changes: dict[str, Any] = {}
    for key in ("links", "refs"):
        value = meta.get(key)
        if isinstance(value, list) and any(link_target(str(r)) == old for r in value):
            changes[key] = _union([relinked(str(r), old, new) if isinstance(r, str) else r for r in value])
    return changes


def retracted(fact: Fact, survivor: str, verdict_id: str, mode: RetractMode = "status") -> str | None:
    """The retired fact's new text: `status: retracted` with who and why, or None (delete the file)."""
    if mode == "delete":
        return None
    return rewrite(fact.text, {"status": "retracted", "retracted_by": verdict_id, "survivor": survivor})
