"""Undo an applied decision with a new commit; the reverted verdict then counts as a "no"."""

from __future__ import annotations

from pathlib import Path

import git
from git.objects.base import IndexObjUnion

from .errors import NotRevertible, UnknownVerdict
from .gitops import Applier, dirty_paths, is_ours, message
from .recovery import locked_store
from .store import Store
from .verdicts import Journal, Verdict, now_text


def revert(verdict_id: str, root: Path | str, reason: str = "reverted by hand") -> str:
    """Restore the files the verdict's commit changed, mark it reverted, commit; returns the new sha.

    The restore, the journal's revert line and the commit go through the Applier,
    so a kill half-way is rolled back at the next start like a half-applied decision.
    The db is marked only after the commit (recovery also reads it from the trailer).
    """
    with locked_store(root) as opened:
        opened.recover()
        repo, store = opened.repo, opened.store
        v = store.verdict(verdict_id)
        if v is None:
            raise UnknownVerdict(f"no verdict {verdict_id!r} (see `knomit-judge verdicts`)")
        if v.reverted:
            raise NotRevertible(f"verdict {verdict_id} was already reverted")
        if not v.commit_sha:
            raise NotRevertible(f"verdict {verdict_id} applied nothing ({v.pass_name}: {v.answer})")
        if not _in_history(repo, v.commit_sha):
            raise NotRevertible(f"commit {v.commit_sha[:10]} of verdict {verdict_id} is not in this branch")
        twins = same_decision(store, v)
        try:
            commit_sha, writes = v.commit_sha, restored_files(repo, v.commit_sha)
        except NotRevertible:
            # two reviewers applied this decision at once and the merge kept the other copy: undo that one
            kept = next((t.commit_sha for t in twins if t.commit_sha and _in_history(repo, t.commit_sha)), None)
            if kept is None:
                raise
            commit_sha, writes = kept, restored_files(repo, kept)
        # the commit is made from a private index of these files alone: someone's other uncommitted work (an open
        # vault's .obsidian/workspace.json) is left as it is, but a file it would overwrite must be committed first
        if busy := sorted(set(dirty_paths(repo)).intersection(writes)):
            raise NotRevertible(
                f"{busy[0]} has uncommitted changes and the revert would write it"
                f"{f' (and {len(busy) - 1} more)' if len(busy) > 1 else ''}; commit or stash them first"
            )
        journal = Journal(opened.root)
        undone = [v, *twins]
        msg = message(
            f"revert {v.pass_name}: {verdict_id}",
            f"Restores {len(writes)} file(s) as they were before {commit_sha[:10]}.\nReason: {reason}",
            {"Knomit-Pass": "revert", "Knomit-Reverts": v.id},
        )
        # the same decision, applied twice
        msg += "".join(f"Knomit-Reverts: {t.id}\n" for t in twins)
        sha = Applier(repo).commit(
            writes,
            [],
            msg,
            v.id,
            trailer="Knomit-Reverts",
            appends={
                journal.relpath(v.pass_name): [
                    {"type": "revert", "verdict": u.id, "reason": reason, "at": now_text()} for u in undone
                ]
            },
        )
        for u in undone:
            store.mark_reverted(u.id, reason)
        return sha


def same_decision(store: Store, v: Verdict) -> list[Verdict]:
    """Other applied, unreverted verdicts on the same question with the same answer: the copies two reviewers
    at once both applied (sync.py records them as one decision)."""
    rows = store.db.execute(
        "SELECT id FROM verdicts WHERE pass = ? AND fingerprint = ? AND answer = ? AND id != ? "
        "AND commit_sha IS NOT NULL AND reverted = 0",
        [v.pass_name, v.fingerprint, v.answer, v.id],
    )
    return [twin for r in rows if (twin := store.verdict(r[0])) is not None]


def restored_files(repo: git.Repo, sha: str) -> dict[str, str | None]:
    """What each file the commit changed looked like before it (None: the commit created it).

    Refuses when a later commit changed one of them: restoring it would undo that change too.
    """
    commit = repo.commit(sha)
    parent = commit.parents[0]
    head = repo.head.commit
    writes: dict[str, str | None] = {}
    for d in parent.diff(commit):
        path = d.b_path or d.a_path
        # a diff entry names one side at least
        assert path is not None
        if is_ours(path):
            # the journal only grows; its lines stay as the record
            continue
        if _blob(head, path) != _blob(commit, path):
            raise NotRevertible(f"{path} changed after {sha[:10]}; revert it by hand")
        before = _blob(parent, d.a_path or path)
        writes[path] = None if before is None else before.data_stream.read().decode("utf-8")
    return writes


def _in_history(repo: git.Repo, sha: str) -> bool:
    try:
        # GitPython types is_ancestor as taking Commits; it hands both to `git merge-base`, which takes a sha
        return repo.is_ancestor(sha, repo.head.commit)  # type: ignore[arg-type]
    # not even an object here (a history rewritten since)
    except git.GitCommandError:
        return False


def _blob(commit: git.Commit, path: str) -> IndexObjUnion | None:
    try:
        return commit.tree / path
    except KeyError:
        return None
