"""`approve` and `reject`: a person's word on the decisions waiting on the proposals branch ([apply] mode = "propose").

approve lands the chosen proposals on the reviewed branch, checked out here, as the same decision commits: the
branch fast-forwarded to the proposals when every one is chosen and the branch holds nothing dropped, else each
chosen one re-applied in order, its message and trailers intact, where its files are still as it found them (one
whose files changed since is named and left: the next session proposes it again on them, or asks afresh). It
merges what writers pushed first and pushes after, as a session does, records a `yes` label for each, and brings
the branch in step. reject drops one from the branch (with the proposals made on its change), records a `no`
label and a revert line there: never proposed or applied again while its facts stand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .config import Config, load_config
from .errors import DecisionRefused, KnomitError, UnknownVerdict
from .gitops import Applier, GitFailed, dirty_paths, merge_in_progress, open_repo, run_git
from .gitquery import is_ancestor, rev
from .labels import LABELS_FILE, Label, commit_labels, labeller, parse_labels
from .proposals import Proposal, blob_at, entry_at, events
from .recovery import Locked, locked_store, sync_git
from .session.propose import Proposing, journal_paths, open_proposals
from .session.review import pull
from .sync import Remote
from .verdicts import Journal, encode_line, line_id, now_text


class NotAProposal(KnomitError):
    """The verdict named does not wait on the proposals branch (or propose mode is off)."""


def require_propose(config: Config) -> None:
    if config.apply.mode != "propose":
        raise NotAProposal(
            'apply.mode is "commit": decisions are committed as they are made, none is proposed '
            '(set [apply] mode = "propose" in knomit-judge.toml)'
        )


def approve(root: Path | str, ids: list[str], every: bool = False) -> dict[str, Any]:
    """Land the chosen proposals (every one with `every`) on the reviewed branch; the API behind `approve`."""
    root = Path(root).resolve()
    config = load_config(root)
    require_propose(config)
    remote = Remote.of(open_repo(root), config)
    with locked_store(root) as opened:
        opened.recover()
        repo, store = opened.repo, opened.store
        _on_reviewed_branch(opened, config)
        if remote:
            # what writers pushed meanwhile, merged as a session merges it
            pull(remote, root, repo, store)
        proposing = open_proposals(root, repo, config, store, base=repo.head.commit.hexsha)
        waiting = proposing.waiting()
        chosen = pick(waiting, ids, every)
        landed, left, carried = land(opened, proposing, chosen)
        labels = None
        if landed:
            labels = commit_labels(
                opened, [(vid, "yes", "approved") for vid in landed], commits=landed, carried=carried
            )["commit"]
        if remote:
            remote.push()
            remote.save()
        # the proposals follow the reviewed branch as it now is
        proposing.base = repo.head.commit.hexsha
        proposing.refresh()
        proposing.finish()
    return {
        "approved": landed,
        "left": left,
        "label_commit": labels,
        "head": proposing.base,
        **({"sync": remote.report.json()} if remote else {}),
        "proposals": proposing.report.json(),
    }


def reject(root: Path | str, verdict: str, note: str = "") -> dict[str, Any]:
    """Drop one proposal and record a `no` label on the proposals branch; the API behind `reject`."""
    root = Path(root).resolve()
    config = load_config(root)
    require_propose(config)
    # an unknown remote exits 2 before anything is done
    Remote.of(open_repo(root), config)
    with locked_store(root) as opened:
        opened.recover()
        store = opened.store
        proposing = open_proposals(root, opened.repo, config, store)
        found = {p.verdict: p for p in proposing.waiting()}
        if verdict not in found:
            raise NotAProposal(_not_waiting(verdict, proposing))
        v = store.verdict(verdict)
        if v is None:
            raise UnknownVerdict(f"no verdict {verdict!r} in the db: run a session first")
        who, at, note = labeller(root), now_text(), " ".join(note.split())
        reason = f"rejected by {who}" + (f": {note}" if note else "")
        label = Label(v.id, v.pass_name, v.answer, v.is_yes, "no", who, at, note, found[verdict].commit)
        # the revert line: a rejected yes counts as a no wherever the journal goes (an exact duplicate's too)
        revert = {"type": "revert", "verdict": v.id, "reason": reason, "at": at}
        done = proposing.refresh(
            {verdict: reason},
            {LABELS_FILE: [encode_line(label.record())], Journal(root).relpath(v.pass_name): [encode_line(revert)]},
            [f"Label: {verdict} no ({v.pass_name} {v.answer}), by {who}."],
        )
        store.mark_reverted(verdict, reason)
        proposing.finish()
    return {
        "rejected": verdict,
        "commit": done.commit,
        "dropped": done.dropped,
        "label": label.record(),
        **({"sync": proposing.remote.report.json()} if proposing.remote else {}),
        "proposals": proposing.report.json(),
    }


def pick(waiting: list[Proposal], ids: list[str], every: bool) -> list[Proposal]:
    """The chosen proposals, in the order they were proposed; an id that waits on no proposal is an error."""
    if every:
        return waiting
    known = {p.verdict for p in waiting}
    if missing := [vid for vid in ids if vid not in known]:
        raise NotAProposal(
            f"{', '.join(missing)}: not waiting on the proposals branch "
            f"(waiting: {', '.join(sorted(known)) or 'none'}; see `knomit-judge inbox`)"
        )
    return [p for p in waiting if p.verdict in set(ids)]


def land(
    opened: Locked, proposing: Proposing, chosen: list[Proposal]
) -> tuple[dict[str, str], dict[str, str], list[dict[str, Any]]]:
    """Commit the chosen proposals on the checked-out reviewed branch: (landed verdict -> commit, left verdict ->
    why, the branch's label records the reviewed branch lacks, for the label commit)."""
    repo, store, board = opened.repo, opened.store, proposing.board
    head, tip = repo.head.commit.hexsha, rev(board.repo, board.ref)
    if not chosen or tip is None:
        return {}, {}, []
    on_branch = events(repo, tip, f"^{head}")
    if (
        is_ancestor(board.repo, head, tip)
        and not any(e.dropped for e in on_branch)
        and {v for e in on_branch if not e.merge for v in e.verdicts} == {p.verdict for p in chosen}
    ):
        # the very commits: the branch holds no other decision
        run_git(repo, "merge", "--ff-only", "-q", tip)
        sync_git(repo, store)
        return {p.verdict: p.commit for p in chosen}, {}, []
    landed: dict[str, str] = {}
    left: dict[str, str] = {}
    journal = Journal(opened.root)
    for p in chosen:
        moved = [path for path in p.paths if entry_at(repo, "HEAD", path) != entry_at(repo, f"{p.commit}^", path)]
        if moved:
            left[p.verdict] = f"its files changed since it was proposed ({', '.join(moved)})"
            continue
        writes = {
            path: None if (data := blob_at(repo, f"{p.commit}:{path}")) is None else data.decode("utf-8")
            for path in p.paths
        }
        # its verdict's line goes into its commit, as in the session's
        rel = journal.relpath(p.pass_name)
        carry(opened.root / rel, blob_at(repo, f"{p.commit}:{rel}") or b"", only=p.verdict)
        try:
            sha = Applier(repo).commit(writes, [rel], run_git(repo, "log", "-1", "--format=%B", p.commit), p.verdict)
        except DecisionRefused as e:
            left[p.verdict] = str(e)
            continue
        store.mark_applied(p.verdict, sha)
        landed[p.verdict] = sha
    # the verdicts the branch journalled (its no's, describe lines) come along: a clone re-buys nothing
    if landed:
        paths = journal_paths(opened.root)
        for rel in paths:
            carry(opened.root / rel, blob_at(repo, f"{tip}:{rel}") or b"")
        Applier(repo).commit_paths(paths, f"journal: verdicts journalled on {board.branch}\n")
    have = set((opened.root / LABELS_FILE).read_bytes().splitlines()) if (opened.root / LABELS_FILE).exists() else set()
    carried = [
        json.loads(raw)
        for raw in (blob_at(repo, f"{tip}:{LABELS_FILE}") or b"").splitlines()
        if raw.strip() and raw not in have and parse_labels(raw)
    ]
    return landed, left, carried


def carry(path: Path, data: bytes, only: str | None = None) -> None:
    """Append the lines of `data` that the file lacks (with `only`, that verdict's lines alone)."""
    have = path.read_bytes() if path.exists() else b""
    known = set(have.splitlines())
    new = [
        line
        for line in data.splitlines()
        if line.strip() and line not in known and (only is None or line_id(line) == only)
    ]
    if not new:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write((b"\n" if have and not have.endswith(b"\n") else b"") + b"".join(line + b"\n" for line in new))


def _on_reviewed_branch(opened: Locked, config: Config) -> None:
    """approve commits on the checkout: it must be the reviewed branch, with no change of a person's in the way."""
    repo = opened.repo
    if merging := merge_in_progress(repo):
        raise KnomitError(merging)
    try:
        current = run_git(repo, "symbolic-ref", "-q", "--short", "HEAD").strip()
    except GitFailed:
        raise KnomitError("HEAD is detached: check out the reviewed branch to approve onto it") from None
    if config.git.remote and current != config.git.branch:
        upstream = run_git(repo, "for-each-ref", "--format=%(upstream)", f"refs/heads/{current}").strip()
        if upstream != f"refs/remotes/{config.git.remote}/{config.git.branch}":
            raise KnomitError(f"on branch {current}: check out {config.git.branch}, the reviewed branch, to approve")
    if current == config.apply.proposals:
        raise KnomitError(f"on {current}, the proposals branch: check out the reviewed branch to approve")
    if dirty := dirty_paths(repo, config.corpus.paths):
        raise KnomitError(
            f"the work tree has {len(dirty)} uncommitted change(s) (e.g. {dirty[0]}): commit or stash them first"
        )


def _not_waiting(verdict: str, proposing: Proposing) -> str:
    waiting = sorted(p.verdict for p in proposing.waiting())
    return (
        f"{verdict}: not waiting on {proposing.board.branch} (waiting: {', '.join(waiting) or 'none'}; "
        "see `knomit-judge inbox`)"
    )
