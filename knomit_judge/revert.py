"""Undo an applied decision with a new commit; the reverted verdict then counts as a "no"."""

from __future__ import annotations

from pathlib import Path

from .corpus import atomic_write
from .errors import NotRevertible, UnknownVerdict
from .gitops import ACTOR, OWN_DIR, Lock, dirty_paths, message, open_repo
from .recovery import recover
from .store import Store
from .verdicts import Journal, now


def revert(verdict_id: str, root: Path | str, reason: str = "reverted by hand") -> str:
    """Restore the files the verdict's commit changed, mark it reverted, commit; returns the new sha."""
    root = Path(root).resolve()
    repo = open_repo(root)
    with Lock(repo):
        store = Store.for_corpus(root)
        try:
            recover(root, repo, store)
            v = store.verdict(verdict_id)
            if v is None:
                raise UnknownVerdict(f"no verdict {verdict_id!r} (see `knomit-judge verdicts`)")
            if v.reverted:
                raise NotRevertible(f"verdict {verdict_id} was already reverted")
            if not v.commit_sha:
                raise NotRevertible(f"verdict {verdict_id} applied nothing ({v.pass_name}: {v.answer})")
            if dirty_paths(repo):
                raise NotRevertible("the work tree has uncommitted changes; commit or stash them first")
            commit = repo.commit(v.commit_sha)
            parent = commit.parents[0]
            changed = [d for d in parent.diff(commit) if not (d.b_path or d.a_path).startswith(OWN_DIR)]
            paths = []
            for d in changed:
                path = d.b_path or d.a_path
                now_blob = _blob(repo.head.commit, path)
                then_blob = _blob(commit, path)
                if now_blob != then_blob:
                    raise NotRevertible(f"{path} changed after {v.commit_sha[:10]}; revert it by hand")
                before = _blob(parent, d.a_path or path)
                if d.new_file:
                    (root / path).unlink(missing_ok=True)
                else:
                    atomic_write(root / path, before.data_stream.read().decode("utf-8"))
                paths.append(path)
            journal = Journal(root)
            journal.append(v.pass_name, {"type": "revert", "verdict": v.id, "reason": reason, "at": now()})
            store.mark_reverted(v.id, reason)
            repo.git.add("-A", "--", *paths, journal.relpath(v.pass_name))
            msg = message(f"revert {v.pass_name}: {verdict_id}", f"Restores {len(paths)} file(s) as they were "
                          f"before {v.commit_sha[:10]}.\nReason: {reason}",
                          {"Knomit-Pass": "revert", "Knomit-Reverts": v.id})
            with repo.git.custom_environment(**ACTOR):
                repo.git.commit("-q", "-m", msg)
            return repo.head.commit.hexsha
        finally:
            store.close()


def _blob(commit, path):
    try:
        return commit.tree / path
    except KeyError:
        return None
