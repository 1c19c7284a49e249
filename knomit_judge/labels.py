"""Labels: a person's yes or no on a verdict, journalled in git so they survive a lost db and travel with the corpus.

A label answers the verdict's question as the person sees it: `yes` means the two spellings are one
mechanism, the two facts are one (merge or retract), the group entails the fact; `no` means not. On an
applied decision, then, `yes` says the judge was right and `no` says it was wrong. Labels are read from
the journal `.knomit/labels.jsonl` itself, never from a db copy: a label pulled from another clone
counts at once, and deleting the db loses none.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BadLabel, UnknownVerdict
from .gitops import Applier
from .jsonl import read_jsonl
from .recovery import Locked, locked_store
from .verdicts import now_text

LABELS_FILE = ".knomit/labels.jsonl"
ANSWERS = ("yes", "no")
TRAILER = "Knomit-Label"
LABELLER_ENV = "KNOMIT_JUDGE_LABELLER"


@dataclass
class Label:
    verdict: str
    pass_name: str
    # the verdict's answer, as the judge gave it (same, merge, ...)
    answer: str
    # the verdict was a yes: a decision applied, or held to apply
    is_yes: bool
    # yes | no: the person's answer to the verdict's question
    label: str
    by: str
    at: str  # UTC
    note: str = ""
    # the decision's commit when it was labelled, if applied
    commit: str | None = None

    @property
    def right(self) -> bool:
        """Whether the person agrees with the judge."""
        return (self.label == "yes") == self.is_yes

    def record(self) -> dict[str, Any]:
        return {
            "type": "label",
            "verdict": self.verdict,
            "pass": self.pass_name,
            "answer": self.answer,
            "is_yes": self.is_yes,
            "label": self.label,
            "by": self.by,
            "at": self.at,
            "note": self.note,
            "commit": self.commit,
        }

    @classmethod
    def from_record(cls, r: object) -> Label | None:
        """A label from a journal line, or None for a line a hand edit or a merge conflict mangled."""
        if (
            not isinstance(r, dict)
            or r.get("type") != "label"
            or r.get("label") not in ANSWERS
            or not isinstance(r.get("is_yes"), bool)
            or not all(isinstance(r.get(k), str) and r[k] for k in ("verdict", "pass", "at"))
        ):
            return None
        return cls(
            r["verdict"],
            r["pass"],
            str(r.get("answer", "")),
            r["is_yes"],
            r["label"],
            str(r.get("by", "")),
            r["at"],
            str(r.get("note") or ""),
            r.get("commit") if isinstance(r.get("commit"), str) else None,
        )


def read_labels(root: Path | str) -> list[Label]:
    """Every well-formed label of the corpus, oldest first (by time; the journal order breaks ties)."""
    path = Path(root) / LABELS_FILE
    return parse_labels(path.read_bytes()) if path.exists() else []


def parse_labels(data: bytes) -> list[Label]:
    """The well-formed labels of a labels file's bytes (a file, or a commit's copy of it), oldest first."""
    out = []
    for raw in data.splitlines():
        try:
            label = Label.from_record(json.loads(raw))
        except (json.JSONDecodeError, UnicodeDecodeError):
            # a torn last line from a killed label command
            continue
        if label:
            out.append(label)
    # stable: lines merged from two clones still count in time order
    return sorted(out, key=lambda lab: lab.at)


def latest(labels: list[Label]) -> dict[str, Label]:
    """The label that counts for each verdict: the last one given (a person may change their mind)."""
    return {lab.verdict: lab for lab in labels}


def labeller(root: Path) -> str:
    """Who labels: KNOMIT_JUDGE_LABELLER, else git's author identity (GIT_AUTHOR_* env, then user.name/email)."""
    if os.environ.get(LABELLER_ENV, "").strip():
        return os.environ[LABELLER_ENV].strip()
    done = subprocess.run(["git", "var", "GIT_AUTHOR_IDENT"], cwd=root, capture_output=True, text=True)
    if done.returncode == 0 and ">" in done.stdout:
        return done.stdout[: done.stdout.rindex(">") + 1].strip()  # without git's timestamp
    return f"{os.environ.get('USER') or 'unknown'} (no git identity)"


def read_label_file(path: Path | str) -> list[tuple[str, str, str]]:
    """(verdict id, yes|no, note) from a JSONL file: {"verdict": "v…", "label": "yes"|"no"|true|false, "note": "…"}.

    Every line is checked before anything is written; a bad one is an error naming it.
    """
    out = []
    for n, entry in read_jsonl(path, BadLabel):
        if not isinstance(entry, dict) or not isinstance(entry.get("verdict"), str) or not entry["verdict"]:
            raise BadLabel(f"{path}:{n}: 'verdict' must be a verdict id")
        value = entry.get("label")
        value = {True: "yes", False: "no"}.get(value, value) if isinstance(value, bool) else value
        if value not in ANSWERS:
            raise BadLabel(f"{path}:{n}: 'label' must be yes or no (or true/false)")
        note = entry.get("note", "")
        if not isinstance(note, str):
            raise BadLabel(f"{path}:{n}: 'note' must be a string")
        out.append((entry["verdict"], value, note))
    if not out:
        raise BadLabel(f"{path}: no labels in it")
    return out


def revert_command(verdict_id: str, root: Path, note: str = "") -> str:
    """The exact command that undoes an applied decision a person labelled no."""
    reason = f"labelled no: {note}" if note else "labelled no"
    return f"knomit-judge revert {verdict_id} {shlex.quote(str(root))} --reason {shlex.quote(reason)}"


def label(
    root: Path | str, entries: list[tuple[str, str, str]], by: str | None = None, source: str | None = None
) -> dict[str, Any]:
    """Journal people's labels (verdict id, yes|no, note) and commit them alone (the API behind `label`).

    Under the session lock, after recovery (so verdicts journalled elsewhere are known). The commit holds
    only the new label lines, built in a private index as a decision commit is, so nothing staged by the
    user and no other journal line goes with it. A label never changes the corpus: a `no` on an applied
    decision returns the `revert` command that would undo it.
    """
    for _, value, _ in entries:
        if value not in ANSWERS:
            raise BadLabel(f"a label is yes or no, not {value!r}")
    with locked_store(root) as opened:
        opened.recover()
        return commit_labels(opened, entries, by, source)


def commit_labels(
    opened: Locked,
    entries: list[tuple[str, str, str]],
    by: str | None = None,
    source: str | None = None,
    *,
    commits: dict[str, str] | None = None,
    carried: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """label()'s commit, under the lock the caller holds and after its recovery; `commits`: verdict -> the commit
    a label names where the db does not have it yet (a proposal landed just now); `carried`: label records given
    elsewhere (on the proposals branch) that go into the same commit."""
    root, store = opened.root, opened.store
    who, at = by or labeller(root), now_text()
    labels, reverts = [], []
    for vid, value, note in entries:
        v = store.verdict(vid)
        if v is None:
            raise UnknownVerdict(f"no verdict {vid!r} (see `knomit-judge verdicts` or `knomit-judge inbox`)")
        labels.append(
            Label(
                v.id,
                v.pass_name,
                v.answer,
                v.is_yes,
                value,
                who,
                at,
                " ".join(note.split()),
                (commits or {}).get(v.id, v.commit_sha),
            )
        )
        if value == "no" and v.commit_sha and not v.reverted:
            reverts.append(revert_command(v.id, root, note))
    sha = Applier(opened.repo).commit(
        {},
        [],
        _message(labels, source),
        _key(labels[0]),
        trailer=TRAILER,
        appends={LABELS_FILE: [*(carried or []), *(lab.record() for lab in labels)]},
    )
    return {"commit": sha, "labels": [lab.record() for lab in labels], "revert": reverts}


def _key(lab: Label) -> str:
    """The trailer value a label commit carries: how recovery tells a finished commit from a killed one."""
    return f"{lab.verdict} {lab.label}"


def _message(labels: list[Label], source: str | None) -> str:
    first = labels[0]
    subject = (
        f"label: {first.verdict} {first.label} ({first.pass_name})"
        if len(labels) == 1
        else f"label: {len(labels)} labels" + (f" from {Path(source).name}" if source else "")
    )
    body = "\n".join(
        f"{lab.verdict} ({lab.pass_name} {lab.answer}"
        f"{', applied in ' + lab.commit[:10] if lab.commit else ', not applied'}): {lab.label}"
        f"{' - ' + lab.note if lab.note else ''}"
        for lab in labels
    )
    trailers = "".join(f"{TRAILER}: {_key(lab)}\n" for lab in labels)
    return (
        f"{subject}\n\nLabelled by {first.by} at {first.at}.\n{body}\n\n"
        f"{trailers}Knomit-Labeller: {' '.join(first.by.split())}\n"
    )
