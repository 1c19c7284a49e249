"""The proposals branch ([apply] mode = "propose"): decisions wait there, one commit each, for a person's word.

A proposing session commits its decisions, with their trailers and a Knomit-Proposal one, on the branch
`[apply] proposals`, checked out in a work tree of its own (.git/knomit-proposals), never in the corpus's;
the branch starts from the reviewed branch (`[git] branch` of `[git] remote`, else the checkout's branch),
which the session never moves. With a remote it is pushed, never forced: its history only grows.

What waits is read from git alone, so any clone sees the same: per verdict, the newest event on the branch
since the reviewed branch (a decision commit, or a Knomit-Dropped trailer), less what the reviewed branch
has landed. A refresh, one commit on the branch, keeps it in step: it merges the reviewed branch when that
moved, and drops (Knomit-Dropped) each proposal a writer's commit touched, or a person rejected, with those
made on it; the tree it writes is the reviewed branch, the kept proposals' files and the union of the
record files (the verdict journal and the labels), the reviewed branch's lines first.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import git

from .config import Config
from .errors import KnomitError
from .gitops import DROPPED, GitFailed, run_git, work_tree
from .gitquery import is_ancestor, rev
from .sync import Remote

# on each decision a proposing session commits: the branch it waits on
PROPOSAL = "Knomit-Proposal"
# in .git: the work tree proposing sessions commit in
TREE = "knomit-proposals"
# in .git: the private index a refresh builds its tree in
INDEX = "knomit-proposals-index"
# Append-only record files (the verdict journal, labels.LABELS_FILE): a refresh keeps both sides' lines.
RECORDS = (".knomit/verdicts/", ".knomit/labels.jsonl")
LOG_FORMAT = (
    "%H%x01%ct%x01%s%x01%P%x01%(trailers:key=Knomit-Verdict,valueonly,separator=%x02)"
    f"%x01%(trailers:key={DROPPED},valueonly,separator=%x02)"
    "%x01%(trailers:key=Knomit-Pass,valueonly,separator=%x02)%x00"
)


def is_record(path: str) -> bool:
    return path.startswith(RECORDS[0]) and path.endswith(".jsonl") or path == RECORDS[1]


@dataclass
class Proposal:
    """A decision waiting on the proposals branch: its verdict, its commit there, and the files it changes."""

    verdict: str
    pass_name: str
    subject: str  # the commit's subject line
    commit: str
    # when it was proposed: the commit's time, UTC
    at: str
    # corpus files it changes (the record files left out)
    paths: list[str] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "pass": self.pass_name,
            "subject": self.subject,
            "commit": self.commit,
            "proposed_at": self.at,
            "paths": self.paths,
        }


@dataclass
class Event:
    """One commit as the proposals read it: the verdicts it applies and the ones it drops."""

    sha: str
    at: str
    subject: str
    merge: bool
    verdicts: list[str]
    dropped: list[str]
    pass_name: str


@dataclass
class Refreshed:
    """What a refresh did to the branch."""

    # the commit it made (None: the branch was left, or fast-forwarded)
    commit: str | None = None
    # commits of the reviewed branch it brought in
    merged: int = 0
    # verdict -> why it was taken off
    dropped: dict[str, str] = field(default_factory=dict)
    # the reviewed branch held everything: the branch starts again from it
    cleared: bool = False


@dataclass
class ProposalsReport:
    """What a proposing session (or approve, or reject) did with the proposals branch; its line and JSON."""

    branch: str
    # the reviewed branch, as `origin/main` or the checkout's branch name
    base: str
    # Proposal.json() of each, after the session
    waiting: list[dict[str, Any]] = field(default_factory=list)
    proposed: list[str] = field(default_factory=list)  # verdicts proposed this session
    # verdict -> why it was taken off
    dropped: dict[str, str] = field(default_factory=dict)
    # verdicts a merge into the reviewed branch approved
    approved: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        head = (
            f"proposals {self.branch} on {self.base}: {len(self.waiting)} waiting, {len(self.proposed)} new, "
            f"{len(self.approved)} approved by a merge, {len(self.dropped)} dropped"
        )
        tail = [f"dropped {vid}: {why}" for vid, why in self.dropped.items()] + self.notes
        return head + "".join(f"; {t}" for t in tail)

    def json(self) -> dict[str, Any]:
        return {
            "branch": self.branch,
            "base": self.base,
            "waiting": self.waiting,
            "proposed": self.proposed,
            "dropped": self.dropped,
            "approved": self.approved,
            "notes": self.notes,
        }


def stamp(epoch: str) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).isoformat(timespec="seconds")


def events(repo: git.Repo, *revs: str) -> list[Event]:
    """The commits of a range, children before parents (--topo-order: a drop is always newer than what it drops)."""
    out = run_git(repo, "log", "--topo-order", f"--format={LOG_FORMAT}", *revs, "--")
    found = []
    for entry in out.split("\0"):
        parts = entry.strip("\n").split("\x01")
        if len(parts) < 7:
            continue
        sha, at, subject, parents, ids, drops, name = parts[:7]
        found.append(
            Event(
                sha,
                stamp(at),
                subject,
                len(parents.split()) > 1,
                [v.strip() for v in ids.split("\x02") if v.strip()],
                [v.strip() for v in drops.split("\x02") if v.strip()],
                name.strip(),
            )
        )
    return found


def latest(found: list[Event]) -> dict[str, Event | None]:
    """Per verdict, its newest event: the decision commit that applies it, or None once it was dropped."""
    out: dict[str, Event | None] = {}
    for e in found:
        for vid in e.dropped:
            out.setdefault(vid, None)
        if not e.merge:
            for vid in e.verdicts:
                out.setdefault(vid, e)
    return out


def changed_paths(repo: git.Repo, sha: str) -> list[str]:
    """The corpus files a (non-merge) commit changed, the record files left out."""
    out = run_git(repo, "diff-tree", "-r", "--root", "--no-commit-id", "--name-only", "-z", "--no-renames", sha)
    return [p for p in out.split("\0") if p and not is_record(p)]


def approvals_by_merge(repo: git.Repo, base: str) -> dict[str, str]:
    """verdict -> commit of each proposal the reviewed branch holds (a merged pull request, a cherry-pick), not dropped.

    Found by trailer, not by sha: a pull request merged by rebase gives the commits new ones.
    """
    found = events(repo, "--grep=^Knomit-Proposal:", f"--grep=^{DROPPED}:", base)
    return {vid: e.sha for vid, e in latest(found).items() if e is not None}


def blob_at(repo: git.Repo, spec: str) -> bytes | None:
    """A blob's bytes (`REV:PATH`), or None where there is none."""
    done = subprocess.run(["git", "cat-file", "blob", spec], cwd=work_tree(repo), capture_output=True)
    return done.stdout if done.returncode == 0 else None


def entry_at(repo: git.Repo, rev: str, path: str) -> tuple[str, str] | None:
    """(mode, blob sha) of a path at a commit, or None where it has none."""
    out = run_git(repo, "ls-tree", "-z", rev, "--", path)
    head, _, _ = out.partition("\t")
    bits = head.split()
    return (bits[0], bits[2]) if len(bits) == 3 else None


def record_paths(repo: git.Repo, *revs: str) -> list[str]:
    """The record files any of the commits holds."""
    paths: set[str] = set()
    for commit in revs:
        out = run_git(repo, "ls-tree", "-r", "-z", "--name-only", commit, "--", ".knomit")
        paths.update(p for p in out.split("\0") if p and is_record(p))
    return sorted(paths)


def union_lines(first: bytes, *others: bytes) -> bytes:
    """An append-only file's lines: `first`'s as they are, then every other line it lacks, in order."""
    have = set(first.splitlines())
    out = first if not first or first.endswith(b"\n") else first + b"\n"
    for data in others:
        for line in data.splitlines():
            if line.strip() and line not in have:
                have.add(line)
                out += line + b"\n"
    return out


class Board:
    """The proposals branch of one corpus: where it is, what waits on it, and the commits that keep it in step."""

    def __init__(self, root: Path, repo: git.Repo, config: Config) -> None:
        self.root, self.repo, self.config = root, repo, config
        self.branch = config.apply.proposals
        self.ref = f"refs/heads/{self.branch}"
        self.remote = config.git.remote
        self.tracking = f"refs/remotes/{self.remote}/{self.branch}" if self.remote else None
        self.path = Path(repo.git_dir) / TREE

    # --- reading ---------------------------------------------------------------------------------

    def base(self) -> tuple[str, str | None]:
        """The reviewed branch, named, and its commit: the remote's, as last fetched, with [git] remote; else the
        branch the corpus has checked out."""
        if self.remote:
            name = f"{self.remote}/{self.config.git.branch}"
            return name, rev(self.repo, f"refs/remotes/{name}") or rev(
                self.repo, f"refs/heads/{self.config.git.branch}"
            )
        try:
            name = run_git(self.repo, "symbolic-ref", "-q", "--short", "HEAD").strip()
        except GitFailed:
            name = "HEAD"
        return name, rev(self.repo, "HEAD")

    def tip(self) -> str | None:
        """The branch's commit here, else the remote's as last fetched."""
        return rev(self.repo, self.ref) or rev(self.repo, self.tracking)

    def waiting(self, base: str | None = None, tip: str | None = None) -> list[Proposal]:
        """The proposals waiting for a person's word, oldest first."""
        base = base or self.base()[1]
        tip = tip or self.tip()
        if tip is None:
            return []
        found = events(self.repo, tip, *([f"^{base}"] if base else []))
        proposed = {vid: e for vid, e in latest(found).items() if e is not None}
        landed = self.landed(base, list(proposed)) if base else set()
        out = [Proposal(vid, e.pass_name, e.subject, e.sha, e.at) for vid, e in proposed.items() if vid not in landed]
        for p in out:
            p.paths = changed_paths(self.repo, p.commit)
        order = {e.sha: i for i, e in enumerate(found)}
        return sorted(out, key=lambda p: -order[p.commit])

    def landed(self, base: str, verdicts: list[str]) -> set[str]:
        """Which of these verdicts the reviewed branch applied (approved, or merged), wherever their commits came from:
        the branch merges the reviewed one, so its history is no guide; the trailers are."""
        if not verdicts:
            return set()
        found = events(
            self.repo, "--extended-regexp", *(f"--grep=^(Knomit-Verdict|{DROPPED}): {vid}$" for vid in verdicts), base
        )
        return {vid for vid, e in latest(found).items() if e is not None and vid in verdicts}

    def figures(self, now: datetime | None = None) -> dict[str, Any]:
        """What status, the metrics and the report say of the branch: what waits, and since when."""
        name, base = self.base()
        waiting = self.waiting(base) if base else []
        oldest = min((p.at for p in waiting), default=None)
        now = now or datetime.now(UTC)
        return {
            "branch": self.branch,
            "base": name,
            "waiting": len(waiting),
            "oldest_at": oldest,
            "oldest_age_s": round((now - datetime.fromisoformat(oldest)).total_seconds()) if oldest else None,
            "items": [p.json() for p in waiting],
        }

    # --- the work tree sessions commit in ------------------------------------------------------

    def open_tree(self, base: str) -> git.Repo:
        """The work tree on the branch (made, from the remote's branch or the reviewed one, when missing)."""
        if not rev(self.repo, self.ref):
            start = rev(self.repo, self.tracking) or base
            run_git(self.repo, "update-ref", "-m", "knomit-judge: proposals start", self.ref, start)
        if (self.path / ".git").is_file():
            try:
                tree = git.Repo(self.path)
                # a corpus copied or moved with its .git keeps a tree whose link names the old repository's
                ours = Path(tree.common_dir).resolve() == Path(self.repo.common_dir).resolve()
                if ours and tree.head.is_valid() and not tree.head.is_detached and tree.head.reference.path == self.ref:
                    return tree
            except (git.InvalidGitRepositoryError, git.NoSuchPathError, TypeError):
                pass
        run_git(self.repo, "worktree", "prune")
        self._forget_elsewhere()
        shutil.rmtree(self.path, ignore_errors=True)
        try:
            run_git(self.repo, "worktree", "add", "--quiet", str(self.path), self.branch)
        except GitFailed as e:
            raise KnomitError(
                f"cannot check out {self.branch} in {self.path}: {e.raw.strip().splitlines()[-1]} "
                f"(is it checked out in {self.root}? check out {self.config.git.branch} there)"
            ) from None
        return git.Repo(self.path)

    def _forget_elsewhere(self) -> None:
        """This repository's records of a proposals tree at another place (the corpus was copied or moved, with its
        .git): git would hold the branch checked out there, and refuse to check it out here."""
        for record in (Path(self.repo.common_dir) / "worktrees").glob("*/gitdir"):
            where = Path(record.read_text(encoding="utf-8").strip()).parent
            if where.name == self.path.name and where.resolve() != self.path.resolve():
                shutil.rmtree(record.parent)

    def remote_of(self, tree: git.Repo) -> Remote | None:
        """The branch's own sync with [git] remote: merged from the remote before, pushed after (never forced)."""
        if not self.remote:
            return None
        return Remote.of(tree, replace(self.config, git=replace(self.config.git, branch=self.branch)))

    # --- the refresh ---------------------------------------------------------------------------

    def refresh(
        self,
        tree: git.Repo,
        base: str,
        base_name: str,
        drop: dict[str, str] | None = None,
        records: dict[str, list[bytes]] | None = None,
        *,
        notes: list[str] | None = None,
    ) -> Refreshed:
        """Keep the branch in step with the reviewed branch at `base`, in one commit (or none).

        `drop`: verdict -> why, proposals a person took off; `records`: lines to add to record files (labels);
        `notes`: lines for the commit's body. The tree is reset to the result: it is ours, and a session left
        nothing uncommitted in it (the caller committed its journal lines first).
        """
        drop, records = dict(drop or {}), dict(records or {})
        tip = rev(self.repo, self.ref)
        assert tip is not None, "open_tree made the branch"
        done = Refreshed()
        # all of it is on the reviewed branch: start again from it
        if tip != base and is_ancestor(self.repo, tip, base):
            done.cleared = True
            tip_for_parents, waiting, old = base, [], base
        else:
            old = run_git(self.repo, "merge-base", tip, base).strip()
            waiting = self.waiting(base, tip)
            tip_for_parents = tip
            done.merged = 0 if old == base else int(run_git(self.repo, "rev-list", "--count", f"{tip}..{base}").strip())
        keep = self._replay(waiting, base, old, base_name, drop, done=done)
        parents = [tip_for_parents] + ([base] if not done.cleared and done.merged else [])
        tree_sha = self._tree(base, tip, keep, records)
        if parents == [tip] and tree_sha == self._tree_of(tip):
            # nothing moved, nothing to drop or record
            return done
        if done.cleared and tree_sha == self._tree_of(base):
            new = base
        else:
            new = run_git(
                self.repo,
                "commit-tree",
                tree_sha,
                *(a for p in parents for a in ("-p", p)),
                input=self._message(base_name, done, notes or []).encode("utf-8"),
            ).strip()
            done.commit = new
        # the branch and its work tree move together
        run_git(tree, "reset", "-q", "--hard", new)
        return done

    def _replay(
        self, waiting: list[Proposal], base: str, old: str, base_name: str, drop: dict[str, str], *, done: Refreshed
    ) -> list[Proposal]:
        """The proposals kept, replayed in order on `base`: each one whose files are as it found them (as the reviewed
        branch has them, or as a proposal kept before it left them). The rest are dropped, with why."""
        keep: list[Proposal] = []
        # path -> its entry as the kept proposals leave it
        after: dict[str, tuple[str, str] | None] = {}
        for p in waiting:
            why = drop.get(p.verdict)
            found = {path: entry_at(self.repo, f"{p.commit}^", path) for path in p.paths}
            now = {path: after[path] if path in after else entry_at(self.repo, base, path) for path in p.paths}
            moved = sorted(path for path in p.paths if found[path] != now[path])
            if not why and moved:
                on_base = [
                    path
                    for path in moved
                    if path not in after and entry_at(self.repo, base, path) != entry_at(self.repo, old, path)
                ]
                why = (
                    f"its facts moved on {base_name}: {', '.join(on_base)}"
                    if on_base
                    else "it was made on the change of a proposal dropped before it"
                )
            if why:
                done.dropped[p.verdict] = why
                continue
            keep.append(p)
            after.update({path: entry_at(self.repo, p.commit, path) for path in p.paths})
        return keep

    def _tree_of(self, rev: str) -> str:
        return run_git(self.repo, "rev-parse", f"{rev}^{{tree}}").strip()

    def _tree(self, base: str, tip: str, keep: list[Proposal], records: dict[str, list[bytes]]) -> str:
        """The reviewed branch's tree, with the kept proposals' files and both sides' record lines."""
        index = Path(self.repo.git_dir) / INDEX
        env = {"GIT_INDEX_FILE": str(index)}
        index.unlink(missing_ok=True)
        try:
            run_git(self.repo, "read-tree", base, env=env)
            # oldest first: a later proposal's version of a file it shares wins
            for p in keep:
                for path in p.paths:
                    entry = entry_at(self.repo, p.commit, path)
                    if entry:
                        run_git(
                            self.repo, "update-index", "--add", "--cacheinfo", f"{entry[0]},{entry[1]},{path}", env=env
                        )
                    else:
                        run_git(self.repo, "update-index", "--force-remove", "--", path, env=env)
            for path in sorted({*record_paths(self.repo, base, tip), *records}):
                data = union_lines(
                    blob_at(self.repo, f"{base}:{path}") or b"",
                    blob_at(self.repo, f"{tip}:{path}") or b"",
                    b"".join(line + b"\n" for line in records.get(path, [])),
                )
                blob = run_git(self.repo, "hash-object", "-w", "--stdin", input=data).strip()
                run_git(self.repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            return run_git(self.repo, "write-tree", env=env).strip()
        finally:
            index.unlink(missing_ok=True)

    def _message(self, base_name: str, done: Refreshed, notes: list[str]) -> str:
        what = []
        if done.cleared:
            what.append(f"start again from {base_name}")
        elif done.merged:
            what.append(f"merge {base_name} ({done.merged} commit(s))")
        if done.dropped:
            what.append(f"drop {len(done.dropped)} proposal(s)")
        # only record lines moved: labels given on the reviewed branch or the checkout
        if not what:
            what.append("record labels")
        body = [f"Dropped {vid}: {why}." for vid, why in done.dropped.items()] + notes
        trailers = "".join(f"{DROPPED}: {vid}\n" for vid in done.dropped)
        return f"proposals: {', '.join(what)}\n\n" + ("\n".join(body) + "\n\n" if body else "") + trailers
