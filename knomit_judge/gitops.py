"""Git: one commit per applied decision with trailers, a session lock, and crash recovery."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import git

from .corpus import atomic_write
from .errors import CorpusLocked, NotACorpus

log = logging.getLogger(__name__)
OWN_DIR = ".knomit/"  # our journal and db: never make the tree "dirty" for our purposes
ACTOR = {"GIT_AUTHOR_NAME": "knomit-judge", "GIT_AUTHOR_EMAIL": "knomit-judge@localhost",
         "GIT_COMMITTER_NAME": "knomit-judge", "GIT_COMMITTER_EMAIL": "knomit-judge@localhost"}


def open_repo(root: Path) -> git.Repo:
    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise NotACorpus(f"{root}: not a git repository (run `git init` and `knomit-judge init` there)") from None
    if Path(repo.working_tree_dir).resolve() != Path(root).resolve():
        raise NotACorpus(f"{root}: the corpus must be the top of its git repository ({repo.working_tree_dir})")
    return repo


def dirty_paths(repo: git.Repo) -> list[str]:
    """Changed or untracked paths outside .knomit/, i.e. work of someone else's we must not mix into a commit."""
    # --no-optional-locks: a status must not refresh .git/index (dry runs write nothing)
    out = repo.git.execute(["git", "--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all"])
    paths, entries = [], out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if not entry:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC":
            i += 1  # the rename's source path follows
        if not path.startswith(OWN_DIR):
            paths.append(path)
    return paths


@dataclass
class Decision:
    pass_name: str
    verdict_id: str
    judge: str  # "<model> / <prompt name>@<version>"
    rationale: str


def message(subject: str, body: str, trailers: dict[str, str]) -> str:
    lines = "\n".join(f"{k}: {' '.join(str(v).split())}" for k, v in trailers.items())
    return f"{subject}\n\n{body.strip()}\n\n{lines}\n"


def decision_trailers(d: Decision) -> dict[str, str]:
    return {"Knomit-Pass": d.pass_name, "Knomit-Verdict": d.verdict_id, "Knomit-Judge": d.judge,
            "Knomit-Rationale": d.rationale or "(none)"}


class Applier:
    """Writes a decision's files and commits them with the journal, or leaves no trace of it.

    Before touching a file it records the intent in .git/knomit-pending.json; a
    session killed before the commit leaves that file behind, and the next start
    rolls the listed paths back to HEAD (the verdict itself is kept, so the
    decision is simply applied again).
    """

    def __init__(self, repo: git.Repo):
        self.repo = repo
        self.root = Path(repo.working_tree_dir)
        self.pending = Path(repo.git_dir) / "knomit-pending.json"

    def commit(self, writes: dict[str, str], extra_paths: list[str], msg: str, verdict_id: str) -> str:
        tracked = set(self.repo.git.ls_files("-z", "--", *writes).split("\0")) if writes else set()
        atomic_write(self.pending, json.dumps({"verdict": verdict_id, "paths": {p: p in tracked for p in writes}}))
        for path, text in writes.items():
            atomic_write(self.root / path, text)
        paths = [*writes, *[p for p in extra_paths if (self.root / p).exists()]]
        self.repo.git.add("--", *paths)
        with self.repo.git.custom_environment(**ACTOR):
            self.repo.git.commit("-q", "-m", msg, "--", *paths)
        sha = self.repo.head.commit.hexsha
        self.pending.unlink(missing_ok=True)
        return sha

    def commit_paths(self, paths: list[str], msg: str) -> str | None:
        """Commit our own files (the journal) if they changed; None if there was nothing to commit."""
        paths = [p for p in paths if (self.root / p).exists()]
        if not paths:
            return None
        self.repo.git.add("--", *paths)
        if not self.repo.git.diff("--cached", "--name-only", "--", *paths):
            return None
        with self.repo.git.custom_environment(**ACTOR):
            self.repo.git.commit("-q", "-m", msg, "--", *paths)
        return self.repo.head.commit.hexsha

    def recover(self) -> str | None:
        """Finish or undo what a killed session left; returns a message saying which, or None."""
        if not self.pending.exists():
            return None
        try:
            intent = json.loads(self.pending.read_text())
        except (json.JSONDecodeError, OSError):
            intent = {"verdict": None, "paths": {}}
        head_verdicts = trailer_values(self.repo, "Knomit-Verdict", "-1") if self.repo.head.is_valid() else []
        if intent.get("verdict") in head_verdicts:
            self.pending.unlink()
            return f"the last session was killed after committing verdict {intent['verdict']}; nothing to undo"
        for path, was_tracked in intent.get("paths", {}).items():
            if was_tracked:
                self.repo.git.reset("-q", "HEAD", "--", path)
                self.repo.git.checkout("HEAD", "--", path)
            else:
                self.repo.git.rm("-q", "--cached", "--ignore-unmatch", "--", path)
                (self.root / path).unlink(missing_ok=True)
        self.pending.unlink()
        return (f"the last session was killed while applying verdict {intent.get('verdict')}: "
                f"rolled back {len(intent.get('paths', {}))} file(s) to HEAD; the verdict is kept and applies again")


def trailer_values(repo: git.Repo, key: str, *rev_args: str) -> list[str]:
    """Every value of a trailer key in the history (newest first)."""
    if not repo.head.is_valid():
        return []
    out = repo.git.log(*rev_args, f"--format=%(trailers:key={key},valueonly,separator=%x00)%x00")
    return [v.strip() for v in out.split("\0") if v.strip()]


def applied_commits(repo: git.Repo) -> dict[str, str]:
    """verdict id -> sha of the commit that applied it, read from the trailers."""
    if not repo.head.is_valid():
        return {}
    out = repo.git.log("--format=%H%x01%(trailers:key=Knomit-Verdict,valueonly,separator=%x02)%x00")
    found = {}
    for entry in out.split("\0"):
        if "\x01" in entry:
            sha, ids = entry.strip().split("\x01", 1)
            for vid in ids.split("\x02"):
                if vid.strip():
                    found.setdefault(vid.strip(), sha)
    return found


class Lock:
    """One session per corpus: an flock on .git/knomit-judge.lock, released by the kernel on any death."""

    def __init__(self, repo: git.Repo):
        self.path = Path(repo.git_dir) / "knomit-judge.lock"
        self.fd = None

    def __enter__(self):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode(errors="replace").strip() or "unknown holder"
            os.close(fd)
            raise CorpusLocked(f"corpus is locked by another session: {holder}") from None
        previous = os.read(fd, 4096).decode(errors="replace").strip()
        if previous:
            log.warning("taking over a stale lock (%s is gone)", previous)
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc):
        os.ftruncate(self.fd, 0)
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None
