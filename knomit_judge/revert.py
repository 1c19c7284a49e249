"""Undo an applied decision with a new commit; the reverted verdict then counts as a "no"."""

from __future__ import annotations

from pathlib import Path

import git

from .errors import NotRevertible, UnknownVerdict
from .gitops import Applier, Lock, dirty_paths, is_ours, message, open_repo
from .recovery import recover
from .store import Store
from .verdicts import Journal, now_text


def revert(verdict_id: str, root: Path | str, reason: str = "reverted by hand") -> str:
    """Restore the files the verdict's commit changed, mark it reverted, commit; returns the new sha.

    The restore, the journal's revert line and the commit go through the Applier,
    so a kill half-way is rolled back at the next start like a half-applied decision.
    The db is marked only after the commit (recovery also reads it from the trailer).
    """
    root = Path(root).resolve()
    repo = open_repo(root)
    with Lock(repo) as lock:
        store = Store.for_corpus(root)
        try:
            recover(root, repo, store, lock)
            v = store.verdict(verdict_id)
            if v is None:
                raise UnknownVerdict(f"no verdict {verdict_id!r} (see `knomit-judge verdicts`)")
            if v.reverted:
                raise NotRevertible(f"verdict {verdict_id} was already reverted")
            if not v.commit_sha:
                raise NotRevertible(f"verdict {verdict_id} applied nothing ({v.pass_name}: {v.answer})")
            if not _in_history(repo, v.commit_sha):
                raise NotRevertible(f"commit {v.commit_sha[:10]} of verdict {verdict_id} is not in this branch")
            if dirty_paths(repo):
                raise NotRevertible("the work tree has uncommitted changes; commit or stash them first")
            twins = same_decision(store, v)
            try:
                commit_sha, writes = v.commit_sha, restored_files(repo, v.commit_sha)
            except NotRevertible:
                # two reviewers applied this decision at once and the merge kept the other copy: undo that one
                kept = next((t for t in twins if _in_history(repo, t.commit_sha)), None)
                if kept is None:
                    raise
                commit_sha, writes = kept.commit_sha, restored_files(repo, kept.commit_sha)
            journal = Journal(root)
            undone = [v, *twins]
            msg = message(f"revert {v.pass_name}: {verdict_id}", f"Restores {len(writes)} file(s) as they were "
                          f"before {commit_sha[:10]}.\nReason: {reason}",
                          {"Knomit-Pass": "revert", "Knomit-Reverts": v.id})
            msg += "".join(f"Knomit-Reverts: {t.id}\n" for t in twins)  # the same decision, applied twice
            sha = Applier(repo).commit(writes, [], msg, v.id, trailer="Knomit-Reverts", appends={
                journal.relpath(v.pass_name): [{"type": "revert", "verdict": u.id, "reason": reason, "at": now_text()}
                                               for u in undone]})
            for u in undone:
                store.mark_reverted(u.id, reason)
            return sha
        finally:
            store.close()


def same_decision(store: Store, v) -> list:
    """Other applied, unreverted verdicts on the same question with the same answer: the copies two reviewers
    at once both applied (sync.py records them as one decision)."""
    rows = store.db.execute("SELECT id FROM verdicts WHERE pass = ? AND fingerprint = ? AND answer = ? AND id != ? "
                            "AND commit_sha IS NOT NULL AND reverted = 0", [v.pass_name, v.fingerprint, v.answer, v.id])
    return [store.verdict(r[0]) for r in rows]


def restored_files(repo, sha: str) -> dict[str, str | None]:
    """What each file the commit changed looked like before it (None: the commit created it).

    Refuses when a later commit changed one of them: restoring it would undo that change too.
    """
    commit = repo.commit(sha)
    parent = commit.parents[0]
    head = repo.head.commit
    writes: dict[str, str | None] = {}
    for d in parent.diff(commit):
        path = d.b_path or d.a_path
        if is_ours(path):
            continue  # the journal only grows; its lines stay as the record
        if _blob(head, path) != _blob(commit, path):
            raise NotRevertible(f"{path} changed after {sha[:10]}; revert it by hand")
        before = _blob(parent, d.a_path or path)
        writes[path] = None if before is None else before.data_stream.read().decode("utf-8")
    return writes


def _in_history(repo, sha: str) -> bool:
    try:
        return repo.is_ancestor(sha, repo.head.commit)
    except git.GitCommandError:  # not even an object here (a history rewritten since)
        return False


def _blob(commit, path):
    try:
        return commit.tree / path
    except KeyError:
        return None
