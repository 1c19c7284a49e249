"""What survives what: recovery at every start brings the db in line with the journal and git."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from git import Repo

from .errors import KnomitError
from .gitops import (
    MERGE_MARK,
    Applier,
    GitFailed,
    Lock,
    _last_line,
    applied_commits,
    is_ours,
    open_repo,
    remove_stale_locks,
    run_git,
    trailer_values,
)
from .store import Store
from .verdicts import Journal, Line

log = logging.getLogger(__name__)


def recover(root: Path, repo: Repo, store: Store, lock: Lock | None = None, keep_marks: bool = False) -> list[str]:
    """Make corpus, journal and db agree after whatever happened to the last session.

    1. A decision half-applied by a killed session is rolled back to HEAD (its
       verdict is in the journal, so the next pass applies it again); a revert
       half-done is rolled back with its journal line. Git lock files the kill
       left are removed. A merge of the remote branch the session started ([git] remote) is finished or
       undone; a merge a person started is left alone.
    2. Journal lines the db lacks (a lost db, or a kill between the two writes)
       are imported: the journal is written first and is the durable copy.
    3. Which verdicts were applied or reverted is read back from the commit trailers.
    Every step is idempotent, so a kill during recovery is recovered by the next start.
    `keep_marks` (a review session, which writes the db anyway) stores how far the journal was read;
    other commands only use the marks, so a command that fails writes nothing.
    """
    notes = []
    if lock is not None and lock.stale:
        notes.append(f"took over a stale lock: {lock.stale} is gone")
    message = Applier(repo).recover()
    if message:
        log.warning("%s", message)
        notes.append(message)
    # a merge of the remote branch a kill left in progress: ours only
    if merged := recover_merge(repo, root):
        notes.append(merged)
    # killed mid-fetch or mid-push: its ref lock would block every sync
    if lock is not None and lock.stale:
        notes += clear_ref_locks(repo)
    imported = sync_journal(root, store, keep_marks)
    if imported:
        notes.append(f"imported {imported} verdict(s) from the journal")
    sync_git(repo, store)
    return notes


@dataclass
class Locked:
    """A corpus opened for writing: its repo, the session lock held, its store open."""

    root: Path
    repo: Repo
    lock: Lock
    store: Store

    def recover(self, keep_marks: bool = False) -> list[str]:
        return recover(self.root, self.repo, self.store, self.lock, keep_marks)


@contextmanager
def locked_store(root: Path | str) -> Iterator[Locked]:
    """Open the repo, take the lock, open the store; closed and released on the way out, whatever happened.

    Recovery is the caller's next step (`Locked.recover`): a review checks its models before it lets recovery
    change anything."""
    root = Path(root).resolve()
    repo = open_repo(root)
    with Lock(repo) as lock, Store.for_corpus(root) as store:
        yield Locked(root, repo, lock, store)


def recover_corpus(root: Path | str) -> list[str]:
    """Recovery alone, as every session's start runs it (under the lock); returns what it did."""
    with locked_store(root) as opened:
        return opened.recover()


def sync_journal(root: Path, store: Store, keep_marks: bool = True) -> int:
    """Import journal lines the db lacks (verdicts, reverts, describe lines, the first reader's session records); only
    lines appended since the last kept marks are read."""
    marks = store.journal_marks()
    verdicts, reverts, lines, draws = Journal(root).entries(marks)
    store.import_lines([x for x in map(Line.from_record, lines) if x is not None])
    # in the order written: a session's later record of a pass replaces its earlier one
    for draw in draws:
        store.add_draw(draw)
    known = store.known_ids([v.id for v in verdicts])
    fresh = [v for v in verdicts if v.id not in known]
    for v in fresh:
        store.add_verdict(v)
    reverted = store.reverted_ids()
    for vid, reason in reverts.items():
        if vid not in reverted:
            store.mark_reverted(vid, reason)
    if keep_marks:
        # only once imported: a kill before this reads the lines again
        store.put_journal_marks(marks)
    return len(fresh)


def sync_git(repo: Repo, store: Store, rev: str = "HEAD") -> None:
    """Which verdicts were applied or reverted, read back from the commit trailers (of `rev`'s history: a proposing
    session's reviewed branch is the remote's, which the checkout may lag)."""
    applied = applied_commits(repo, rev)
    # of the verdicts git says were applied, those the db lacks the commit of (one per decision, so few)
    unapplied = store.known_ids(list(applied), where="commit_sha IS NULL")
    for vid, sha in applied.items():
        if vid in unapplied:
            store.mark_applied(vid, sha)
    # the journal's reason, when it has one, is kept
    reverted = store.reverted_ids()
    for vid in trailer_values(repo, "Knomit-Reverts", rev):
        if vid not in reverted:
            store.mark_reverted(vid, "reverted (from git history)")


def recover_merge(repo: Repo, root: Path) -> str | None:
    """Finish or undo a merge a killed session started (its MERGE_MARK says so); a message, or None.

    Landed (HEAD moved off the marked head): only git's merge state files are left to remove. Not landed:
    the merge is aborted and the paths it may have touched are put back as HEAD has them (the work tree was
    clean when it started). Either way the next pull merges again. A merge without our mark is a person's:
    never touched here.
    """
    gitdir = Path(repo.git_dir)
    mark = gitdir / MERGE_MARK
    if not mark.exists():
        return None
    try:
        intent = json.loads(mark.read_text(encoding="utf-8"))
        head, theirs = str(intent["head"]), str(intent["theirs"])
    except (OSError, ValueError, KeyError, TypeError):
        mark.unlink(missing_ok=True)
        return None
    notes = Applier(repo)._clear_git_locks()
    try:
        what = _settle_merge(repo, root, gitdir, head, theirs)
    except GitFailed as e:
        raise KnomitError(
            f"could not finish or undo the merge the last session left ({_last_line(e)}); "
            f"{mark} is kept and the next start tries again"
        ) from None
    mark.unlink()
    # not the merge we marked: a person's, left as it is
    if not what:
        return None
    log.warning("%s", what)
    return "; ".join([what, *notes])


def clear_ref_locks(repo: Repo) -> list[str]:
    """Remove the lock files a killed fetch or push left on remote-tracking refs (called only when the last
    session died holding the corpus lock). Each is given LOCK_WAIT_S to go away first: an orphaned git child
    may still be finishing. Left in place, `cannot lock ref` would make every later sync `unreachable`."""
    refs = Path(repo.git_dir) / "refs" / "remotes"
    locks = list(refs.rglob("*.lock")) if refs.is_dir() else []
    return remove_stale_locks(locks, Path(repo.git_dir), "a killed fetch or push")


def _settle_merge(repo: Repo, root: Path, gitdir: Path, head: str, theirs: str) -> str:
    """recover_merge's work once the mark is read: finish a merge that landed, else undo it."""
    try:
        merge_head = (gitdir / "MERGE_HEAD").read_text(encoding="utf-8").split()[0]
    except (OSError, IndexError):
        merge_head = None
    now = run_git(repo, "rev-parse", "-q", "--verify", "HEAD").strip()
    # not the merge we marked: a person's, left as it is
    if merge_head not in (None, theirs):
        return ""
    if now != head:
        for name in ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "AUTO_MERGE"):
            (gitdir / name).unlink(missing_ok=True)
        what = f"the last session was killed as its merge of {theirs[:10]} landed: finished"
    else:
        if merge_head:
            try:
                run_git(repo, "merge", "--abort")
            except GitFailed:
                # the paths are put back below either way
                pass
        for name in ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "AUTO_MERGE"):
            (gitdir / name).unlink(missing_ok=True)
        changed = [
            p
            for p in run_git(repo, "diff", "--name-only", "-z", "--no-renames", head, theirs).split("\0")
            if p and not is_ours(p)
        ]
        present = (
            set(run_git(repo, "ls-tree", "-r", "-z", "--name-only", head, "--", *changed).split("\0"))
            if changed
            else set()
        )
        for path in changed:
            if path in present:
                run_git(repo, "reset", "-q", head, "--", path)
                run_git(repo, "checkout", head, "--", path)
            # a file the merge brought in
            else:
                run_git(repo, "rm", "-q", "--cached", "--ignore-unmatch", "--", path)
                (root / path).unlink(missing_ok=True)
        ours = [p for p in run_git(repo, "diff", "--name-only", "-z", "--cached", head).split("\0") if p]
        # journal files the merge staged: back to HEAD in the index, their lines kept on disk
        if ours:
            run_git(repo, "reset", "-q", head, "--", *ours)
        what = (
            f"the last session was killed while merging {theirs[:10]}: undone, HEAD and the work tree as "
            "they were; this session merges again"
        )
    return what
