"""The inbox: what a person dropping by should look at now, best use of their minute first.

1. undecided: questions the judge could not decide (a split between the two orders, or samples that
   did not agree), so the default was recorded; only those whose question still stands.
2. held: yes verdicts a pass on probation keeps from applying; labelling them is how probation ends.
3. shorter-kept: applied prune retracts of a prompt that named no redundant fact (prune@1), where the fixed
   rules kept the fact with the shorter body: the retired one may have contained it, and `revert` undoes it.
4. proposal: discovery proposals (new facts written) nobody has labelled yet.
5. sample: a random sample of each session's applied decisions per pass (`calibration.sample_rate`,
   at least one), drawn with the session id as seed, so the same session always offers the same ones
   and the labels they get measure precision without a person's choice of what to check.

Anything labelled already is left out. Read-only: no lock, no judge call, not one byte written.
"""

from __future__ import annotations

import math
import random
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from .config import load_config
from .corpus import Corpus, load_corpus
from .errors import BadFact
from .file_index import FileIndex
from .gitops import OWN_DIR, open_repo
from .labels import latest, read_labels
from .passes import JUDGED_PASSES, subject_names
from .passes.registry import all_passes
from .precision import of_pass
from .proposals import Board, Proposal
from .store import Store
from .verdicts import About, Verdict

# proposal: waiting ones, then discovery's
KINDS = ("undecided", "held", "shorter-kept", "proposal", "sample")
UNDECIDED = ("split by position:", "undecided:")  # the rationale judge.Judge._aggregate records
MAX_TITLES = 4
BODY_CHARS = 400
# what a person reads to answer: titles, or a fact's fields
Evidence = dict[str, list[str] | dict[str, Any]]


@dataclass
class Item:
    kind: str
    why: str
    verdict: Verdict
    evidence: Evidence
    label_command: str
    # a decision waiting on the proposals branch ([apply] mode = "propose")
    proposal: Proposal | None = None
    # a proposal's: its branch, approve, reject
    commands: dict[str, str] = field(default_factory=dict)

    def json(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "kind": self.kind,
            "why": self.why,
            "verdict": v.id,
            "pass": v.pass_name,
            "subject": v.subject,
            "answer": v.answer,
            "rationale": v.rationale,
            "agreement": v.agreement,
            "commit": self.proposal.commit if self.proposal else v.commit_sha,
            "session": v.session,
            "judged_at": v.created_at,
            "evidence": self.evidence,
            "label": self.label_command,
            **(
                {"proposed_at": self.proposal.at, "title": self.proposal.subject, **self.commands}
                if self.proposal
                else {}
            ),
        }


def undecided(v: Verdict) -> bool:
    return v.rationale.startswith(UNDECIDED)


def sample(verdicts: list[Verdict], rate: float) -> list[Verdict]:
    """Each session's applied decisions per pass, sampled at `rate` (at least one), seeded by session and pass."""
    groups: dict[tuple[str, str], list[Verdict]] = {}
    for v in verdicts:
        groups.setdefault((v.session or "", v.pass_name), []).append(v)
    out = []
    order = {name: i for i, name in enumerate(JUDGED_PASSES)}
    for session, name in sorted(groups, key=lambda k: (k[0], -order[k[1]]), reverse=True):  # newest session first
        # the draw must not depend on db order
        members = sorted(groups[session, name], key=lambda v: v.id)
        k = min(len(members), math.ceil(rate * len(members))) if rate > 0 else 0
        out.extend(random.Random(f"{session}/{name}").sample(members, k))
    return out


def inbox(root: Path | str) -> dict[str, Any]:
    """Everything `knomit-judge inbox` lists, best first (the library API; read-only)."""
    root = Path(root).resolve()
    repo = open_repo(root)
    config = load_config(root)
    with Store.read_only(root) as store:
        every = store.verdicts()
        verdicts = [v for v in every if v.pass_name in JUDGED_PASSES]
        # the file index makes this a lookup per fact; its copy lives in memory and is never saved
        corpus = load_corpus(root, config.corpus.max_fact_bytes, FileIndex(store), config.corpus)
    labels = read_labels(root)
    labelled = latest(labels)
    passes = all_passes()

    def about(v: Verdict) -> About:
        # exact duplicates: copies of a fact
        return passes[v.pass_name].about if v.pass_name in passes else "facts"

    board = Board(root, repo, config) if config.apply.mode == "propose" else None
    waiting = board.waiting() if board else []
    known = {v.id: v for v in every}
    proposals = [(p, known[p.verdict]) for p in waiting if p.verdict in known]
    open_ = [v for v in verdicts if v.id not in labelled and not v.reverted]
    newest = sorted(open_, key=lambda v: (v.created_at, v.id), reverse=True)
    current: dict[tuple[str, str], Verdict] = {}
    for v in newest:
        current.setdefault((v.pass_name, v.fingerprint), v)
    precision = {n: of_pass(labels, n, config.calibration.min_precision) for n in JUDGED_PASSES}
    on_probation = {n for n, p in precision.items() if p.probation}
    applied = [v for v in open_ if v.commit_sha]
    chosen: list[tuple[str, str, Verdict]] = []
    chosen += [
        ("undecided", v.rationale + (f" (agreement {v.agreement:.2f})" if v.agreement is not None else ""), v)
        for v in newest
        if undecided(v) and current[v.pass_name, v.fingerprint] is v and passes[v.pass_name].still_holds(v, corpus)
    ]
    chosen += [
        ("held", f"{v.pass_name} is on probation: this yes waits for labels", v)
        for v in newest
        if v.is_yes and not v.commit_sha and v.pass_name in on_probation and not passes[v.pass_name].outdated(v)
    ]  # asked again, never applied
    chosen += [
        ("shorter-kept", why, v)
        for v in sorted(applied, key=lambda v: (v.created_at, v.id), reverse=True)
        if passes[v.pass_name].outdated(v) and (why := shorter_kept(v, corpus, repo))
    ]
    chosen += [
        ("proposal", "a proposed fact nobody has looked at", v)
        for v in sorted(applied, key=lambda v: (v.created_at, v.id), reverse=True)
        if passes[v.pass_name].proposes
    ]
    chosen += [
        (
            "sample",
            f"sampled from session {v.session} ({config.calibration.sample_rate:g} of its "
            f"{v.pass_name} decisions, at least one)",
            v,
        )
        for v in sample(applied, config.calibration.sample_rate)
    ]
    # a waiting proposal is listed as one, first
    seen: set[str] = {p.verdict for p, _ in proposals}
    items = [
        Item(
            "proposal",
            f"waits on {board.branch if board else ''} for a person's word: approve or reject it",
            v,
            evidence(v, about(v), corpus, repo, p.commit),
            f"knomit-judge label {v.id} yes|no {shlex.quote(str(root))}",
            p,
            {
                "branch": board.branch if board else "",
                "approve": f"knomit-judge approve {v.id} {shlex.quote(str(root))}",
                "reject": f"knomit-judge reject {v.id} {shlex.quote(str(root))} --note WHY",
            },
        )
        for p, v in proposals
    ]
    for kind, why, v in chosen:
        if v.id not in seen:
            seen.add(v.id)
            items.append(
                Item(
                    kind,
                    why,
                    v,
                    evidence(v, about(v), corpus, repo),
                    f"knomit-judge label {v.id} yes|no {shlex.quote(str(root))}",
                )
            )
    return {
        "corpus": str(root),
        "items": items,
        "probation": sorted(on_probation),
        **({"proposals": board.figures()} if board else {}),
        "precision": {n: p.json() for n, p in precision.items()},
        "labels": len(labelled),
        "counts": {k: sum(i.kind == k for i in items) for k in KINDS},
    }


RETRACT_SUBJECT = re.compile(r"^prune: retract (\S+) \(redundant with (\S+)\)$")


def shorter_kept(v: Verdict, corpus: Corpus, repo: git.Repo) -> str | None:
    """Why an applied prune@1 retract needs a look, if its survivor's body was the shorter of the two.

    That prompt left the survivor to the fixed rules, which can keep a fact contained in the one they
    retire. The facts are read as they were just before the decision's commit.
    """
    try:
        m = RETRACT_SUBJECT.match(repo.git.log("-1", "--format=%s", v.commit_sha).strip())
        if not m:
            return None
        retired, kept = (corpus.parse(p, repo.git.show(f"{v.commit_sha}^:{p}")) for p in m.groups())
    except (git.GitCommandError, BadFact, ValueError):
        # not in this history, or a file no longer readable: nothing to compare
        return None
    if len(kept.body) >= len(retired.body):
        return None
    return (
        f"a prune@1 retract left the choice to the fixed rules, which kept {kept.path} ({len(kept.body)} "
        f"characters) and retired {retired.path} ({len(retired.body)}): if the retired fact said more, "
        f"undo it with `knomit-judge revert {v.id}`"
    )


def evidence(v: Verdict, about: About, corpus: Corpus, repo: git.Repo, commit: str | None = None) -> Evidence:
    """What a person needs to answer the question, from the corpus as it is now (and the decision's commit, or the
    proposal's: `commit`): each spelling's carriers, or each fact's title and body (a proposal's too)."""
    s = v.subject
    out: Evidence
    commit = commit or v.commit_sha
    if about == "spellings":
        out = {m: [f.title for f in corpus.carrier_facts(m)[:MAX_TITLES]] for m in (s["a"], s["b"])}
        # once applied, the losing spelling has no carriers left: the commit rewrote them
        if commit:
            out["carriers rewritten by the commit"] = [_title(corpus, p) for p in changed(repo, commit)]
        return out
    out = {path: _fact(corpus, path) for path in subject_names(s)}
    if v.payload:
        out["proposed"] = {"title": v.payload.get("title"), "body": _short(v.payload.get("body", ""))}
    return out


def changed(repo: git.Repo, sha: str) -> list[str]:
    """The corpus files a decision's commit changed (our own journal left out)."""
    try:
        names = repo.git.show("--name-only", "--format=", sha).splitlines()
    except git.GitCommandError:
        # not in this history (rewritten since)
        return []
    return [n for n in names if n and not n.startswith(OWN_DIR)]


def _title(corpus: Corpus, path: str) -> str:
    fact = corpus.facts.get(path)
    return fact.title if fact else path


def _fact(corpus: Corpus, path: str) -> dict[str, str]:
    fact = corpus.facts.get(path)
    if fact is None:
        return {"missing": "not in the corpus now"}
    return {"title": fact.title, "body": _short(fact.body), "status": fact.status}


def _short(text: object) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= BODY_CHARS else text[: BODY_CHARS - 1] + "…"


def inbox_lines(result: dict[str, Any], limit: int) -> list[str]:
    """The inbox as text: one numbered block per item."""
    items = result["items"]
    if not items:
        return ["inbox empty: nothing waits for approval, and nothing undecided, held, proposed or sampled for a label"]
    out = [
        f"inbox: {len(items)} item(s)"
        + (f", first {limit} shown" if len(items) > limit else "")
        + " - best use of a minute first"
    ]
    for name in result["probation"]:
        p = result["precision"][name]
        out.append(
            f"{name} on probation (precision {p['precision']:.2f} [{p['low']:.2f}, {p['high']:.2f}] < "
            f"{p['min_precision']:.2f}): its held yeses apply once labels lift it"
        )
    for n, item in enumerate(items[:limit], 1):
        v = item.verdict
        subject = " / ".join(subject_names(v.subject))
        where = (
            f"proposed in {item.proposal.commit[:10]} on {item.commands['branch']}"
            if item.proposal
            else f"applied in {v.commit_sha[:10]}"
            if v.commit_sha
            else "not applied"
        )
        out.append(f"{n}. [{item.kind}] {v.pass_name} {subject}")
        out.append(f"   why: {item.why}")
        out.append(f"   judge: {v.answer} ({where}) - {v.rationale or '(no rationale)'}")
        for key, value in item.evidence.items():
            out.append(f"   {key}: {evidence_text(value)}")
        if item.proposal:
            out += [f"   approve: {item.commands['approve']}", f"   reject: {item.commands['reject']}"]
        else:
            out.append(f"   verdict {v.id}: {item.label_command}")
    return out


def evidence_text(value: object) -> str:
    if isinstance(value, list):
        return "; ".join(value) if value else "(none)"
    if isinstance(value, dict):
        return " - ".join(f"{value[k]}" for k in ("title", "body", "missing") if value.get(k)) + (
            f" [{value['status']}]" if value.get("status") not in (None, "active") else ""
        )
    return str(value)
