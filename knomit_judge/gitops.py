"""Git: one commit per applied decision with trailers, a session lock, and crash recovery."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git

from .errors import BadFact, CorpusLocked, CorpusUnwritable, DecisionRefused, KnomitError, NotACorpus
from .files import atomic_write, file_mode
from .jsonl import dumps
from .layout import matches
from .verdicts import Record, append_line, encode_line, line_id, now_text

log = logging.getLogger(__name__)
OWN_DIR = ".knomit/"
# Our journal and db: they never make the tree "dirty". Only these: knomit keeps its own files
# (ontology, jobs) in .knomit/ too, and a user's uncommitted edit there is work we must not mix in.
OWN_PATHS = (".knomit/verdicts/", ".knomit/judge.db")
ACTOR = {
    "GIT_AUTHOR_NAME": "knomit-judge",
    "GIT_AUTHOR_EMAIL": "knomit-judge@localhost",
    "GIT_COMMITTER_NAME": "knomit-judge",
    "GIT_COMMITTER_EMAIL": "knomit-judge@localhost",
}
# Fact paths are data: `facts/[draft].md` or `:x.md` must name that file, not a glob or pathspec magic.
GIT_ENV = {**ACTOR, "GIT_LITERAL_PATHSPECS": "1"}
# git's "local" variables (`git rev-parse --local-env-vars`): set by `git bisect run`, hooks and aliases, they point
# every git call (GitPython's too) at another repository. The corpus named on the command line is the one we touch.
LOCAL_ENV = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
)
# atomic_write's temp files, left behind only by a kill
TMP_GLOB = ".knomit-*.tmp"
# in .git: written before a sync's merge starts, gone once it is done or undone
MERGE_MARK = "knomit-merge.json"
# a proposal taken off the proposals branch: its decision is applied nowhere
DROPPED = "Knomit-Dropped"
# how long a git lock file may take to go away before it counts as stale
LOCK_WAIT_S = 2.0


def scrub_git_env() -> None:
    """Drop git's local variables from this process's environment, so git (ours, GitPython's, a child's)
    finds the repository from the directory it runs in. Called wherever a corpus's repository is opened."""
    for key in LOCAL_ENV:
        os.environ.pop(key, None)


def enclosing_top(path: Path) -> Path | None:
    """The top of the git repository that holds path (or its nearest existing parent), if any."""
    scrub_git_env()
    path = Path(path).absolute()
    while not path.is_dir():
        path = path.parent
    # git's own search, not GitPython's: it stops at GIT_CEILING_DIRECTORIES as every git command does
    found = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=path, capture_output=True, text=True)
    top = found.stdout.strip() if found.returncode == 0 else ""
    return Path(top).resolve() if top else None


def work_tree(repo: git.Repo) -> Path:
    """The top of the repository's work tree; a bare repository has none, so it holds no corpus."""
    if repo.working_tree_dir is None:
        raise NotACorpus(f"{repo.git_dir}: a bare repository (no work tree) cannot hold a corpus")
    return Path(repo.working_tree_dir)


def open_repo(root: Path) -> git.Repo:
    """The git repository whose top is the corpus root, or NotACorpus saying what to run on instead."""
    scrub_git_env()
    try:
        repo = git.Repo(root)
    except git.NoSuchPathError:
        raise NotACorpus(f"{root}: no such directory") from None
    except git.InvalidGitRepositoryError:
        top = enclosing_top(root)
        if top is not None:
            # a subfolder of a corpus: name the corpus, or the user runs `git init` here and nests a repository
            raise NotACorpus(
                f"{root} is inside the git repository {top}: run knomit-judge on {top}, the top of the corpus"
            ) from None
        raise NotACorpus(f"{root}: not a git repository (run `knomit-judge init` there)") from None
    if work_tree(repo).resolve() != Path(root).resolve():
        raise NotACorpus(f"{root}: the corpus must be the top of its git repository ({repo.working_tree_dir})")
    return repo


def run_git(repo: git.Repo, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> str:
    """One git command as knomit-judge, with literal pathspecs; raises git.GitCommandError."""
    done = subprocess.run(
        ["git", *args],
        cwd=repo.working_tree_dir,
        input=input,
        capture_output=True,
        env={**os.environ, **GIT_ENV, **(env or {})},
    )
    if done.returncode:
        raise GitFailed(["git", *args], done.returncode, done.stderr.decode("utf-8", "replace"))
    return done.stdout.decode("utf-8", "replace")


class GitFailed(git.GitCommandError):
    """A git command run by run_git failed; `raw` is its stderr as git wrote it."""

    def __init__(self, command: list[str], status: int, stderr: str) -> None:
        super().__init__(command, status, stderr)
        self.raw = stderr


def is_ours(path: str) -> bool:
    """A path this tool writes (the verdict journal, the db and its -wal/-shm/-journal files)."""
    return path.startswith(OWN_PATHS)


def _last_line(e: git.GitCommandError) -> str:
    lines = str(getattr(e, "raw", None) or e.stderr or "").strip().splitlines()
    return lines[-1].strip() if lines else str(e)


def dirty_paths(repo: git.Repo, untracked_globs: Sequence[str] | None = None) -> list[str]:
    """Changed or untracked paths other than ours, i.e. work of someone else's we must not mix into a commit.

    `untracked_globs` (the corpus's fact paths): an untracked file counts only when it matches one. The tool
    commits only files it wrote, so an untracked `out.txt` cannot be mixed in; an untracked fact can, since
    the corpus reader reads it and a decision may rewrite it (docs/unattended.md).
    """
    return [
        path
        for code, path in status_entries(repo)
        if not (code == "??" and untracked_globs is not None and not matches(path, untracked_globs))
    ]


def status_entries(repo: git.Repo) -> list[tuple[str, str]]:
    """(status code, path) of every changed or untracked path other than ours; "??" marks an untracked one."""
    # --no-optional-locks: a status must not refresh .git/index (dry runs write nothing)
    out = repo.git.execute(["git", "--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all"])
    found: list[tuple[str, str]] = []
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if not entry:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC":
            # the rename's source path follows
            i += 1
        if not is_ours(path):
            found.append((code, path))
    return found


def merge_in_progress(repo: git.Repo) -> str | None:
    """A merge left in progress (.git/MERGE_HEAD), named; None when there is none.

    Called after recovery, which finishes or undoes a merge a session started: one left now is a person's.
    """
    try:
        sha = (Path(repo.git_dir) / "MERGE_HEAD").read_text(encoding="utf-8").split()[0]
    except (OSError, IndexError):
        return None
    return (
        f"a merge of {sha[:10]} that knomit-judge did not start is in progress (.git/MERGE_HEAD): "
        "left alone until it is committed or aborted"
    )


@dataclass
class Decision:
    pass_name: str
    verdict_id: str
    judge: str  # "<model> / <prompt name>@<version>"
    rationale: str


def message(subject: str, body: str, trailers: dict[str, str]) -> str:
    """A commit message: subject, body, then the trailers (each value on one line)."""
    lines = "\n".join(f"{k}: {' '.join(str(v).split())}" for k, v in trailers.items())
    return f"{subject}\n\n{body.strip()}\n\n{lines}\n"


def decision_trailers(d: Decision) -> dict[str, str]:
    return {
        "Knomit-Pass": d.pass_name,
        "Knomit-Verdict": d.verdict_id,
        "Knomit-Judge": d.judge,
        "Knomit-Rationale": d.rationale or "(none)",
    }


class Applier:
    """Writes a decision's files and commits them with its journal line, or leaves no trace of it.

    Before touching a file it records the intent in .git/knomit-pending.json: the
    paths it will write, the size of each journal file, HEAD, and the trailer its
    commit will carry. A session killed before the commit leaves that file
    behind, and the next start rolls the paths back to HEAD and cuts the
    journals back to those sizes; a verdict journalled before the intent is
    kept, so its decision is simply applied again. Killed after the commit, the
    next start finds the trailer and only tidies up.
    """

    def __init__(self, repo: git.Repo) -> None:
        self.repo = repo
        self.root = work_tree(repo)
        self.pending = Path(repo.git_dir) / "knomit-pending.json"
        # a private index a decision commit is built in
        self.index = Path(repo.git_dir) / "knomit-index"

    def commit(
        self,
        writes: Mapping[str, str | None],
        extra_paths: list[str],
        msg: str,
        verdict_id: str,
        *,
        trailer: str = "Knomit-Verdict",
        appends: Mapping[str, Record | list[Record]] | None = None,
        check: Callable[[str, str], object] | None = None,
    ) -> str:
        """Write the files (None deletes), append `appends` to our own files, and commit it all at once.

        This is the one path every rewrite of the corpus goes through (decisions, reverts, labels).
        `check(path, text)`, when given, is the corpus reader: a text it refuses (BadFact) is never
        written, and the decision is refused whole (DecisionRefused). A file that cannot be written
        (immutable, a directory in its place, a full disk) abandons the decision whole too: the
        files already written get their bytes and modes back, the journals their sizes.

        `extra_paths` are journal files: the commit holds them as HEAD has them plus
        this decision's own lines only (its verdict's, and what it appended), so
        `git show` of a decision shows its verdict; the other verdicts of the session
        go into its journal commit. The commit is built in a private index, so
        nothing the user has staged is swept into it, and must carry
        `trailer: verdict_id`: that is how recovery tells "killed after the commit"
        from "killed before it".
        """
        if check:
            for path, text in writes.items():
                if text is not None:
                    try:
                        check(path, text)
                    except BadFact as e:
                        # the line is the rewritten text's, not the file's as it stands: said in the reason
                        at = f" at line {e.line} of the rewritten text" if e.line else ""
                        raise DecisionRefused(path, f"the rewrite would not parse{at} ({e.reason})") from None
        # one record or several per file (a labels file imported at once is one commit)
        appended = {path: r if isinstance(r, list) else [r] for path, r in (appends or {}).items()}
        journals = list(dict.fromkeys([*extra_paths, *appended]))
        sizes = {p: _size(self.root / p) for p in journals}
        before: dict[str, tuple[bytes | None, int | None]] = {}
        for path in writes:
            try:
                before[path] = _snapshot(self.root / path)
            # a directory where the fact was: nothing is touched yet
            except OSError as e:
                raise DecisionRefused(
                    path, f"cannot read it ({e.strerror or e}): the decision is not applied"
                ) from None
        # the modes too: a kill's rollback goes through `git checkout`, which gives files the umask's mode
        modes = {path: mode for path, (_, mode) in before.items() if mode is not None}
        self._intend(
            {
                "kind": "decision",
                "verdict": verdict_id,
                "trailer": trailer,
                "head": self._head(),
                "paths": list(writes),
                "journal": sizes,
                "modes": modes,
            }
        )
        env = {"GIT_INDEX_FILE": str(self.index)}
        touched: list[str] = []
        # the path being written when an OSError comes: the one the problem names
        doing = ""
        try:
            for path, text in writes.items():
                touched.append(doing := path)
                if text is None:
                    (self.root / path).unlink(missing_ok=True)
                else:
                    atomic_write(self.root / path, text)
            for path, records in appended.items():
                doing = path
                for record in records:
                    append_line(self.root / path, record)
            self.index.unlink(missing_ok=True)
            run_git(self.repo, "read-tree", "HEAD", env=env)
            if writes:
                run_git(self.repo, "update-index", "--add", "--remove", "--", *writes, env=env)
            for path in journals:
                own = [encode_line(record) for record in appended.get(path, [])]
                blob = run_git(
                    self.repo, "hash-object", "-w", "--stdin", input=self._journal_blob(path, verdict_id, own)
                ).strip()
                run_git(self.repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            run_git(self.repo, "commit", "-q", "--allow-empty", "-m", msg, env=env)
        except git.GitCommandError as e:
            # A failed commit (a hook, a full disk) must not leave a half-applied change behind.
            self._roll_back(touched, before, sizes)
            raise KnomitError(
                f"git failed while committing verdict {verdict_id}, rolled back: {_last_line(e)}"
            ) from None
        except OSError as e:
            self._roll_back(touched, before, sizes)
            what = "delete" if writes.get(doing, "") is None else "write"
            raise DecisionRefused(
                doing, f"cannot {what} it ({e.strerror or e}): the decision is abandoned whole and the tree restored"
            ) from None
        sha = self.repo.head.commit.hexsha
        try:
            self._sync_index([*writes, *journals])
        except git.GitCommandError as e:
            # Committed, but the user's index is busy: the intent stays, and the next start syncs it.
            raise KnomitError(
                f"committed verdict {verdict_id} ({sha[:10]}) but could not update the index "
                f"({_last_line(e)}); the next session finishes it"
            ) from None
        self.pending.unlink(missing_ok=True)
        return sha

    def _roll_back(
        self, touched: list[str], before: dict[str, tuple[bytes | None, int | None]], sizes: dict[str, int | None]
    ) -> None:
        """Undo a decision that did not commit: files back to their bytes and modes, journals to their sizes.

        Done from the snapshot, not `git checkout`, which would give every file the umask's mode. Then the
        intent goes, as recovery would remove it.
        """
        failed: list[str] = []
        for path in touched:
            data, mode = before[path]
            full = self.root / path
            try:
                if data is None:
                    full.unlink(missing_ok=True)
                elif not full.exists() or full.read_bytes() != data or file_mode(full) != mode:
                    atomic_write(full, data, mode)
            except OSError as e:
                failed.append(f"{path} ({e.strerror or e})")
        for path, size in sizes.items():
            _truncate(self.root / path, size)
        self.index.unlink(missing_ok=True)
        # the intent stays: the next start's recovery tries again from HEAD
        if failed:
            log.warning("could not restore %s; the next session rolls it back", ", ".join(failed))
            return
        self.pending.unlink(missing_ok=True)

    def _journal_blob(self, path: str, verdict_id: str, own: list[bytes]) -> bytes:
        """HEAD's version of a journal file plus this decision's lines: its verdict's and `own`."""
        head = _blob_bytes(self.repo, path)
        have = set(head.splitlines())
        work = (self.root / path).read_bytes() if (self.root / path).exists() else b""
        lines = [raw for raw in work.splitlines() if raw not in have and line_id(raw) == verdict_id]
        lines += [raw for raw in own if raw not in have]
        if head and not head.endswith(b"\n"):
            head += b"\n"
        return head + b"".join(raw + b"\n" for raw in dict.fromkeys(lines))

    def _sync_index(self, paths: list[str]) -> None:
        """Point the user's index at the new commit for our paths (their other staged work is untouched)."""
        if paths:
            run_git(self.repo, "reset", "-q", "HEAD", "--", *paths)
        self.index.unlink(missing_ok=True)

    def commit_paths(self, paths: list[str], msg: str) -> str | None:
        """Commit our own files (the journal) if they changed; None if there was nothing to commit."""
        paths = [p for p in paths if (self.root / p).exists()]
        # an unfinished decision's intent must reach the next start
        if not paths or self.pending.exists():
            return None
        # `git add` would stage the journal into that merge
        if merging := merge_in_progress(self.repo):
            log.warning("journal not committed: %s", merging)
            return None
        # The intent rolls nothing back (journal lines are kept); it tells the next start that any
        # git lock file left behind is ours.
        self._intend({"kind": "journal", "paths": [], "journal": {}})
        sha = None
        try:
            run_git(self.repo, "add", "--", *paths)
            if run_git(self.repo, "diff", "--cached", "--name-only", "--", *paths):
                run_git(self.repo, "commit", "-q", "-m", msg, "--", *paths)
                sha = self.repo.head.commit.hexsha
        except git.GitCommandError as e:
            # The lines are on disk and fsync'd; the next session's journal commit takes them.
            log.warning(
                "could not commit the journal (%s); its verdicts are kept and committed next session", _last_line(e)
            )
        self.pending.unlink(missing_ok=True)
        return sha

    def recover(self, clear_locks: bool = True) -> str | None:
        """Undo (or see completed) what a killed session left; returns a message saying which, or None.

        Safe to run again if it is itself killed: the intent file goes last.
        """
        # a kill while the intent itself was written
        for tmp in Path(self.repo.git_dir).glob(TMP_GLOB):
            tmp.unlink(missing_ok=True)
        if not self.pending.exists():
            return None
        try:
            intent = json.loads(self.pending.read_text(encoding="utf-8"))
            paths, journal = list(intent.get("paths", [])), dict(intent.get("journal", {}))
        except (json.JSONDecodeError, OSError, AttributeError, TypeError, ValueError):
            # atomic_write makes this unreachable; be safe anyway
            intent, paths, journal = {}, [], {}
        notes = self._clear_git_locks() if clear_locks else []
        try:
            message = self._undo(intent, paths, journal)
        except git.GitCommandError as e:
            raise KnomitError(
                f"could not finish what the last session left ({_last_line(e)}); "
                f"{self.pending} is kept and the next start tries again"
            ) from None
        self.index.unlink(missing_ok=True)
        self.pending.unlink()
        return "; ".join([message, *notes])

    def _undo(self, intent: dict[str, Any], paths: list[str], journal: dict[str, int | None]) -> str:
        if intent.get("kind") == "journal" or not intent:
            return (
                "the last session was killed while committing its journal; its verdicts are kept and "
                "committed at the end of this one"
            )
        vid, trailer, head = intent.get("verdict"), intent.get("trailer", "Knomit-Verdict"), intent.get("head")
        # the user may have committed on top since
        since = [f"{head}..HEAD"] if head else ["-1"]
        if self._head() != head and vid in trailer_values(self.repo, trailer, *since):
            self._sync_index([*paths, *journal])
            return f"the last session was killed right after committing verdict {vid}; nothing to undo"
        in_head = (
            set(run_git(self.repo, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *paths).split("\0"))
            if paths and self._head()
            else set()
        )
        restore = [p for p in paths if p in in_head]
        if restore:
            run_git(self.repo, "reset", "-q", "HEAD", "--", *restore)
            run_git(self.repo, "checkout", "HEAD", "--", *restore)
            for path, mode in dict(intent.get("modes") or {}).items():
                if path in restore and isinstance(mode, int):
                    try:
                        os.chmod(self.root / path, mode)
                    except OSError:
                        # the content is back; a mode that cannot be set is not worth stopping recovery for
                        pass
        for path in paths:
            # a file the decision created
            if path not in in_head:
                run_git(self.repo, "rm", "-q", "--cached", "--ignore-unmatch", "--", path)
                (self.root / path).unlink(missing_ok=True)
            for tmp in (self.root / path).parent.glob(TMP_GLOB):
                tmp.unlink(missing_ok=True)
        for path, size in journal.items():
            _truncate(self.root / path, size)
        what = "a revert of" if trailer == "Knomit-Reverts" else "verdict"
        return (
            f"the last session was killed while applying {what} {vid}: rolled back {len(paths)} file(s) "
            "to HEAD (the verdict is kept; a decision is applied again, a revert is not recorded)"
        )

    def _intend(self, intent: dict[str, Any]) -> None:
        atomic_write(self.pending, dumps(intent))

    def _head(self) -> str | None:
        return self.repo.head.commit.hexsha if self.repo.head.is_valid() else None

    def _clear_git_locks(self) -> list[str]:
        """Remove git's lock files that our killed git commands left (only called with our intent present).

        A git still running (an orphan of the killed session) is given LOCK_WAIT_S to
        finish first; a lock file that outlives that has no live owner.
        """
        gitdir = Path(self.repo.git_dir)
        names = ["index.lock", "knomit-index.lock", "HEAD.lock", "packed-refs.lock"]
        if not self.repo.head.is_detached:
            names.append(f"{self.repo.head.reference.path}.lock")
        return remove_stale_locks([gitdir / n for n in names], gitdir, "a killed git command")


def remove_stale_locks(locks: list[Path], gitdir: Path, left_by: str) -> list[str]:
    """Remove git lock files with no live owner, naming each: a git still running (an orphan of a killed session)
    is given LOCK_WAIT_S to finish first, so a lock that outlives that is stale."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while any(p.exists() for p in locks) and time.monotonic() < deadline:
        time.sleep(0.05)
    notes: list[str] = []
    for p in locks:
        if p.exists():
            p.unlink(missing_ok=True)
            notes.append(f"removed the stale {p.relative_to(gitdir)} {left_by} left")
    return notes


def _snapshot(path: Path) -> tuple[bytes | None, int | None]:
    """A file's bytes and mode before a decision writes it; (None, None) when it does not exist."""
    try:
        return path.read_bytes(), file_mode(path)
    except FileNotFoundError:
        return None, None


def _size(path: Path) -> int | None:
    return path.stat().st_size if path.exists() else None


def _truncate(path: Path, size: int | None) -> None:
    """Cut an append-only file back to `size` bytes (None: it did not exist)."""
    if size is None:
        path.unlink(missing_ok=True)
    elif path.exists() and path.stat().st_size > size:
        with open(path, "r+b") as f:
            f.truncate(size)
            os.fsync(f.fileno())


def _blob_bytes(repo: git.Repo, path: str) -> bytes:
    """A file's exact bytes at HEAD (b"" when HEAD has no such file)."""
    try:
        return (repo.head.commit.tree / path).data_stream.read()
    except (KeyError, ValueError):
        return b""


def trailer_values(repo: git.Repo, key: str, *rev_args: str) -> list[str]:
    """Every value of a trailer key in the history (newest first)."""
    if not repo.head.is_valid():
        return []
    out = repo.git.log(*rev_args, f"--format=%(trailers:key={key},valueonly,separator=%x00)%x00")
    return [v.strip() for v in out.split("\0") if v.strip()]


def applied_commits(repo: git.Repo, rev: str = "HEAD") -> dict[str, str]:
    """verdict id -> sha of the commit that applied it, read from the trailers of `rev`'s history.

    A proposal dropped from the proposals branch (a Knomit-Dropped trailer newer than its commit) applied
    nothing, though a merge of that branch brings its commit along (proposals.py): it is left out.
    """
    if not repo.head.is_valid():
        return {}
    out = repo.git.log(
        "--format=%H%x01%(trailers:key=Knomit-Verdict,valueonly,separator=%x02)"
        f"%x01%(trailers:key={DROPPED},valueonly,separator=%x02)%x00",
        rev,
    )
    found: dict[str, str] = {}
    dropped: set[str] = set()
    for entry in out.split("\0"):
        if "\x01" in entry:
            sha, ids, drops = (entry.strip().split("\x01", 2) + [""])[:3]
            dropped.update(v.strip() for v in drops.split("\x02") if v.strip() and v.strip() not in found)
            for vid in ids.split("\x02"):
                if vid.strip() and vid.strip() not in dropped:
                    found.setdefault(vid.strip(), sha)
    return found


def unwritable(path: Path, e: OSError) -> CorpusUnwritable:
    """The error for a corpus a session cannot write to, saying what to do about it."""
    why = "the corpus is on a read-only file system" if e.errno == errno.EROFS else e.strerror or str(e)
    return CorpusUnwritable(
        f"cannot write {path}: {why}; a session needs to write the lock, the journal and "
        "the db (`review --dry-run` needs none of them)"
    )


class Lock:
    """One session per corpus: an flock on .git/knomit-judge.lock, released by the kernel on any death.

    The file names the holder while it is held and is emptied on a clean exit, so
    a name found in it by the next holder is a session that died: it says so.
    The descriptor is not inherited (Python's default), so an orphaned git child
    of a killed session cannot keep the lock.
    """

    def __init__(self, repo: git.Repo) -> None:
        self.path = Path(repo.git_dir) / "knomit-judge.lock"
        self.fd: int | None = None
        # the dead holder this session took over from, if any
        self.stale: str | None = None

    def __enter__(self) -> Lock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise unwritable(self.path, e) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode(errors="replace").strip() or "unknown holder"
            os.close(fd)
            raise CorpusLocked(f"corpus is locked by another session: {holder}") from None
        previous = os.read(fd, 4096).decode(errors="replace").strip()
        if previous:
            self.stale = previous
            log.warning("taking over a stale lock: %s is gone (killed?); recovering what it left", previous)
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()} since {now_text()}".encode())
        os.fsync(fd)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.fd is not None, "a lock released that was never taken"
        os.ftruncate(self.fd, 0)
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


@contextlib.contextmanager
def shared_lock(repo: git.Repo) -> Iterator[str | None]:
    """Hold the session lock shared, so no session starts meanwhile; never create its file.

    Yields None once held (or when no session ever made the file), else the holder a session wrote in it.
    """
    path = Lock(repo).path
    if not path.exists():
        yield None
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            yield os.read(fd, 4096).decode(errors="replace").strip() or "unknown holder"
            return
        yield None
    finally:
        os.close(fd)
