"""A shared remote: the remote branch merged before a session, the session's commits pushed after it.

The reviewer is one writer among many, and syncs only from the configured branch (or one tracking it): on
another branch, a detached HEAD or during a person's merge it reviews locally and pushes nothing (`skipped`).
Before it reads the corpus a session fetches `[git] branch`
from `[git] remote` and merges it; after its last commit it pushes, and when the push is rejected
because the remote moved on it fetches, merges and pushes again, PUSH_ATTEMPTS times at most. It never
force-pushes, so every update of the remote branch is a fast-forward.

On a conflict the writer's side of each conflicting hunk wins and both sides' other hunks stay; a file
one side deleted and the other changed follows the writer too. The journal's files take both sides'
lines (a union: verdicts only accumulate). The decisions whose change a writer overrode are named by
verdict id in the merge commit (a Knomit-Overridden trailer each) and in the session's JSON; their
verdicts stay, so a standing alias yes is restated without a call and a changed fact is asked again.
A merge that cannot complete (a binary file, a file against a folder) is aborted, never left half-done:
the state is `broken` with the paths and the reason, the local commits stay, the next session retries.
A merge is marked (gitops.MERGE_MARK) before it starts, so a kill half-way is finished or undone by the next
start (recovery.recover_merge). A decision both sides applied (two reviewers at once) is one decision: the
merge keeps the incoming change and names ours as the same (Knomit-Same-Decision), not overridden.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypedDict, get_args

import git

from .config import CONFIG_FILE, Config
from .corpus import parse_as
from .errors import BadFact, ConfigError
from .files import atomic_write
from .gitops import (
    GIT_ENV,
    MERGE_MARK,
    GitFailed,
    dirty_paths,
    is_ours,
    merge_in_progress,
    run_git,
    trailer_values,
    work_tree,
)
from .gitquery import git_cause, is_ancestor, last_line, push_rejected, rev
from .jsonl import dumps
from .layout import covered, matches
from .verdicts import Journal

log = logging.getLogger(__name__)

# a push rejected this often in one session waits for the next session
PUSH_ATTEMPTS = 3
# a fetch or push that takes longer counts as an unreachable remote
NET_TIMEOUT_S = 300.0
OVERRIDDEN = "Knomit-Overridden"
# "<ours> as <theirs>": both sides applied one decision; theirs is the copy kept
SAME = "Knomit-Same-Decision"
# in .git: this clone's last sync, for the metrics and `status`
STATE_FILE = "knomit-sync.json"
# the reflog message of the remote-tracking ref after our push
PUSHED = "knomit-judge: pushed"
# skipped: not on the configured branch (nor one that tracks it), or a person's merge in progress
SyncState = Literal["synced", "unreachable", "unpushed", "broken", "skipped"]
STATES: tuple[SyncState, ...] = get_args(SyncState)
TEXT_MODES = ("100644", "100755")


class Unmergeable(Exception):
    """A conflict the merge cannot settle (a binary file, a file against a folder): the merge is aborted."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


class Overridden(TypedDict):
    """A decision a writer's edit won over: its verdict and the paths the writer's side replaced."""

    verdict: str
    paths: list[str]


@dataclass
class SyncReport:
    """What a session did with the remote; its line goes with the pass lines, its JSON with the session's."""

    remote: str
    branch: str
    state: SyncState = "synced"
    # remote commits this session merged in
    merged: int = 0
    merges: list[str] = field(default_factory=list)  # merge commits made
    # local commits the push put on the remote
    pushed: int = 0
    # local commits not on the remote when the session ended
    unpushed: int = 0
    # {"verdict": id, "paths": [...]} a writer's edit won over
    overridden: list[Overridden] = field(default_factory=list)
    # {"verdict": ours, "as": theirs}: one decision both sides applied
    same: list[dict[str, str]] = field(default_factory=list)
    # broken: what stopped the merge or the push
    paths: list[str] = field(default_factory=list)
    # one line: why unreachable, unpushed or broken
    error: str = ""
    notes: list[str] = field(default_factory=list)

    def fail(self, state: SyncState, error: str, paths: list[str] | None = None) -> None:
        self.state, self.error = state, " ".join(error.split())
        self.paths = list(paths or [])
        log.warning("sync with %s/%s: %s: %s", self.remote, self.branch, state, self.error)

    def skip(self, why: str) -> None:
        self.state, self.error = "skipped", why
        log.warning("sync: skipped - %s", why)

    def note(self, text: str) -> None:
        """A note, said once however often the push loop meets it."""
        if text not in self.notes:
            self.notes.append(text)

    def line(self) -> str:
        if self.state == "skipped":
            return (
                f"sync {self.remote}/{self.branch}: skipped - {self.error}; reviewed locally, pushed nothing, "
                f"unpushed {self.unpushed}" + "".join(f"; {t}" for t in self.notes)
            )
        head = (
            f"sync {self.remote}/{self.branch}: {self.state} - merged {self.merged} remote commit(s), "
            f"pushed {self.pushed}, unpushed {self.unpushed}, overridden {len(self.overridden)}"
        )
        tail = [f"error: {self.error}"] * bool(self.error)
        if self.paths:
            tail.append("paths: " + ", ".join(self.paths))
        if self.overridden:
            tail.append("overridden by writers: " + ", ".join(o["verdict"] for o in self.overridden))
        return head + "".join(f"; {t}" for t in [*tail, *self.notes])

    def json(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "branch": self.branch,
            "state": self.state,
            "merged": self.merged,
            "merges": self.merges,
            "pushed": self.pushed,
            "unpushed": self.unpushed,
            "overridden": self.overridden,
            "same": self.same,
            "paths": self.paths,
            "error": self.error,
            "notes": self.notes,
        }


class Remote:
    """`[git] remote` and `branch` of one corpus: pull before a session, push after it."""

    def __init__(self, repo: git.Repo, config: Config) -> None:
        self.repo = repo
        self.root = work_tree(repo)
        self.name, self.branch = config.git.remote, config.git.branch
        self.tracking = f"refs/remotes/{self.name}/{self.branch}"
        self.fact_globs = tuple(config.corpus.paths)
        # how a merged fact is read back
        self.layout = config.corpus
        self.report = SyncReport(self.name, self.branch)
        self.mark = Path(repo.git_dir) / MERGE_MARK
        # why the remote branch could not be merged in now (a dirty work tree)
        self.blocked = ""

    @classmethod
    def of(cls, repo: git.Repo, config: Config) -> Remote | None:
        """The corpus's remote, checked now (an unknown name exits 2 before anything runs); None if unset."""
        if not config.git.remote:
            return None
        if config.git.remote not in run_git(repo, "remote").split():
            raise ConfigError(
                f"git.remote: {config.git.remote!r} is not a remote of {repo.working_tree_dir} "
                f"(add it with `git remote add {config.git.remote} URL`)"
            )
        return cls(repo, config)

    # --- the two ends of a session -------------------------------------------------------------

    def pull(self) -> bool:
        """Fetch the remote branch and merge it into HEAD; True when HEAD moved."""
        if why := self._off_branch():
            self.report.skip(why)
            return False
        try:
            return self._fetch() and self._merge()
        # a local git failure (a lock, a full disk): named, the session goes on locally
        except GitFailed as e:
            self._abort()
            self.report.fail("broken", f"git failed: {last_line(e.raw)}")
            return False

    def fetch(self) -> bool:
        """Fetch the remote branch into its remote-tracking ref and merge nothing (a proposing session's base)."""
        return self._fetch()

    def push(self) -> None:
        """Push HEAD to the remote branch; on a rejection fetch, merge and push again (never forced)."""
        r = self.report
        try:
            self._push()
        except GitFailed as e:
            self._abort()
            r.fail("broken", f"git failed: {last_line(e.raw)}")
        finally:
            try:
                r.unpushed = self.unpushed()
            except GitFailed:
                pass

    def _off_branch(self) -> str | None:
        """Why HEAD must not be synced: not the configured branch nor one tracking it, or a person's merge."""
        if merging := merge_in_progress(self.repo):
            return merging
        try:
            current = run_git(self.repo, "symbolic-ref", "-q", "--short", "HEAD").strip()
        except GitFailed:
            head = rev(self.repo, "HEAD")
            return f"detached HEAD{f' at {head[:10]}' if head else ''}, not {self.branch}"
        if current == self.branch:
            return None
        upstream = run_git(self.repo, "for-each-ref", "--format=%(upstream)", f"refs/heads/{current}").strip()
        if upstream == self.tracking:
            return None
        return f"on branch {current}, not {self.branch}"

    def _push(self) -> None:
        r = self.report
        if r.state in ("unreachable", "broken", "skipped"):
            # said why at the start; the commits stay and the next session tries again
            return
        for _ in range(PUSH_ATTEMPTS):
            ahead = self.unpushed()
            if not ahead:
                return
            if broken := self._broken_facts():
                r.fail("broken", "not pushed: these facts parse on the remote and not here", broken)
                return
            try:
                self._net("push", "--quiet", self.name, f"HEAD:refs/heads/{self.branch}")
            except GitFailed as e:
                # refused by the remote (a hook, a permission), or not reached
                if not push_rejected(e.raw):
                    r.fail("unpushed" if "remote rejected" in e.raw else "unreachable", git_cause(e.raw, self.name))
                    return
                log.info("push to %s/%s rejected: the remote moved on; merging it again", self.name, self.branch)
                if not self._fetch():
                    return
                self._merge()
                if r.state == "broken":
                    return
                # the remote did move, and its commits cannot come in now: not a race lost
                if self.blocked:
                    r.fail(
                        "unpushed",
                        f"the push was rejected: {self.name}/{self.branch} has commits this clone "
                        f"lacks, and {self.blocked}; the next session tries again",
                    )
                    return
                continue
            # the remote-tracking ref and its reflog say when the last push went out (metrics read it)
            run_git(self.repo, "update-ref", "-m", PUSHED, self.tracking, "HEAD")
            r.pushed += ahead
            return
        r.fail(
            "unpushed",
            f"the push was rejected {PUSH_ATTEMPTS} times (the remote kept moving); the next session tries again",
        )

    # --- fetch and merge ---------------------------------------------------------------------------

    def _fetch(self) -> bool:
        before = rev(self.repo, self.tracking)
        try:
            self._net("fetch", "--quiet", "--no-tags", self.name, f"+refs/heads/{self.branch}:{self.tracking}")
        except GitFailed as e:
            # a new branch: the push makes it
            if "couldn't find remote ref" in e.raw.lower():
                # deleted on the remote, or a new remote: a stale tracking ref would say "all pushed"
                if before:
                    run_git(self.repo, "update-ref", "-d", self.tracking)
                self.report.note(f"{self.name} has no branch {self.branch}: the push creates it")
                return False
            self.report.fail("unreachable", git_cause(e.raw, self.name))
            return False
        after = rev(self.repo, self.tracking)
        if before and after and not is_ancestor(self.repo, before, after):
            self.report.note(
                f"{self.name}/{self.branch} was rewritten (force-pushed): {before[:10]}, fetched "
                f"before, is no longer in its history; merged as it is now"
            )
        return True

    def _merge(self) -> bool:
        """Merge the fetched branch into HEAD, the writers' hunks winning; False when nothing moved."""
        head, theirs = rev(self.repo, "HEAD"), rev(self.repo, self.tracking)
        if theirs is None:
            return False
        # no commit here yet (never so after `init`): nothing to merge into
        if head is None:
            self.report.fail("broken", f"HEAD has no commit: {self.name}/{self.branch} is not merged")
            return False
        if is_ancestor(self.repo, theirs, head):
            return False
        if dirty := self._held(head, theirs):
            self.blocked = f"the work tree has {len(dirty)} uncommitted change(s) (e.g. {dirty[0]})"
            self.report.note(f"{self.blocked}: {self.name}/{self.branch} is not merged")
            return False
        # a kill from here on is finished or undone by the next start (recover_merge)
        self._intend(head, theirs)
        count = int(run_git(self.repo, "rev-list", "--count", f"HEAD..{theirs}").strip())
        if is_ancestor(self.repo, head, theirs):
            try:
                run_git(self.repo, "merge", "--ff-only", "-q", theirs)
            # an untracked file in the way, say: nothing was changed
            except GitFailed as e:
                self.mark.unlink(missing_ok=True)
                self.report.fail("broken", f"the fast-forward to {self.name}/{self.branch} failed: {git_cause(e.raw)}")
                return False
            self.mark.unlink(missing_ok=True)
            self.report.merged += count
            return True
        base = run_git(self.repo, "merge-base", "HEAD", theirs).strip()
        done = subprocess.run(
            ["git", "merge", "--no-ff", "--no-commit", theirs],
            cwd=self.root,
            capture_output=True,
            env={**os.environ, **GIT_ENV},
        )
        said = (done.stdout + done.stderr).decode("utf-8", "replace")
        # refused before it began (an untracked file in the way, say)
        if done.returncode and not self._merging():
            self.mark.unlink(missing_ok=True)
            self.report.fail("broken", f"the merge of {self.name}/{self.branch} did not start: {git_cause(said)}")
            return False
        try:
            if way := re.search(r"CONFLICT \((?:file/directory|directory/file)\).*? of (.+?) from ", said):
                raise Unmergeable(way[1], "a file against a folder: resolve it by hand and commit")
            lost = self._resolve()
            lost |= self._unbroken(theirs)
            twins = self._twins(base, theirs)
            overridden = {vid: paths for vid, paths in self._decisions(base, lost).items() if vid not in twins}
            run_git(self.repo, "commit", "-q", "-F", "-", input=self._message(count, lost, overridden, twins).encode())
            self.mark.unlink(missing_ok=True)
        except (Unmergeable, GitFailed) as e:
            self._abort()
            path, reason = (e.path, e.reason) if isinstance(e, Unmergeable) else (".", last_line(e.raw))
            self.report.fail(
                "broken",
                f"the merge of {self.name}/{self.branch} was aborted: {reason}; "
                "the local commits stay and the next session tries again",
                [path],
            )
            return False
        except BaseException:
            # whatever went wrong, never a merge left in progress
            self._abort()
            raise
        self.report.merged += count
        self.report.merges.append(run_git(self.repo, "rev-parse", "HEAD").strip())
        self.report.overridden += [{"verdict": vid, "paths": paths} for vid, paths in overridden.items()]
        self.report.same += [{"verdict": ours, "as": other} for ours, other in twins.items()]
        return True

    def _held(self, head: str, theirs: str) -> list[str]:
        """Uncommitted changes that hold the merge back: to a fact or the settings (the session reads them), or
        to a file the writers' commits change. Any other (an open vault's .obsidian/workspace.json) git's merge
        leaves as it is, and an aborted one too (`merge --abort` keeps changes to files the merge did not touch)."""
        incoming = set(
            run_git(self.repo, "diff", "--name-only", "-z", "--no-renames", f"{head}...{theirs}").split("\0")
        )
        return [
            p
            for p in dirty_paths(self.repo, self.fact_globs)
            if covered(p, self.fact_globs, self.layout.exclude) or p == CONFIG_FILE or p in incoming
        ]

    def _resolve(self) -> set[str]:
        """Settle every conflicted path; returns the paths where the writer's side replaced ours."""
        stages: dict[str, dict[int, tuple[str, str]]] = {}
        for entry in run_git(self.repo, "ls-files", "-u", "-z").split("\0"):
            if entry:
                info, path = entry.split("\t", 1)
                mode, sha, stage = info.split()
                stages.setdefault(path, {})[int(stage)] = (mode, sha)
        lost: set[str] = set()
        for path, s in sorted(stages.items()):
            if (self.root / path).is_dir() or 2 not in s and 3 not in s or set(s) in ({2}, {3}):
                raise Unmergeable(
                    path, "a file against a folder (or a rename against a change): resolve it by hand and commit"
                )
            if any(mode not in TEXT_MODES for mode, _ in s.values()):
                raise Unmergeable(path, "a symlink or submodule changed on both sides")
            if 2 in s and 3 in s:
                blobs = [self._blob(s[n][1]) if n in s else b"" for n in (2, 1, 3)]
                if any(b"\0" in b[:8000] for b in blobs):
                    raise Unmergeable(path, "a binary file changed on both sides")
                # the journal: both sides' lines, verdicts only accumulate
                union = is_ours(path)
                merged, conflicts = self._merge_file(path, blobs, "--union" if union else "--theirs")
                self._stage(path, s[3][0], merged)
                if conflicts and not union:
                    lost.add(path)
            # we deleted (or moved) it, the writer changed it: the writer's file stays
            elif 3 in s:
                self._stage(path, *s[3])
                lost.add(path)
            # the writer deleted a journal file we added to: our lines are kept
            elif is_ours(path):
                self._stage(path, *s[2])
            # the writer deleted what we changed: deleted
            else:
                run_git(self.repo, "rm", "-q", "--cached", "--", path)
                (self.root / path).unlink(missing_ok=True)
                lost.add(path)
        if run_git(self.repo, "ls-files", "-u"):
            raise Unmergeable(".", "conflicts remain after resolving")
        return lost

    def _unbroken(self, theirs: str) -> set[str]:
        """A fact the merge of both sides' hunks left unparseable takes the writer's file whole."""
        taken: set[str] = set()
        for path in self._changed("HEAD", None):
            merged = self._show(f":{path}")
            if merged is not None and not self._parses(path, merged):
                if self._show(f"{theirs}:{path}") is not None:
                    run_git(self.repo, "checkout", theirs, "--", path)
                else:  # the writer deleted it
                    run_git(self.repo, "rm", "-q", "-f", "--", path)
                taken.add(path)
                self.report.notes.append(f"{path}: the merged hunks did not parse; the writer's file is kept whole")
        return taken

    def _decisions(self, base: str, paths: set[str]) -> dict[str, list[str]]:
        """verdict id -> the paths of its decision a writer's side replaced, for our commits since `base`."""
        if not paths:
            return {}
        out: dict[str, list[str]] = {}
        log_text = run_git(
            self.repo,
            "-c",
            "core.quotePath=false",
            "log",
            "--name-only",
            "--no-merges",
            "--format=%x00%(trailers:key=Knomit-Verdict,valueonly,separator=%x01)",
            f"{base}..HEAD",
        )
        for record in log_text.split("\0")[1:]:
            head, _, names = record.partition("\n")
            touched = sorted(paths & {n for n in names.splitlines() if n})
            for vid in filter(None, (v.strip() for v in head.split("\x01"))):
                if touched:
                    out.setdefault(vid, touched)
        return out

    def _twins(self, base: str, theirs: str) -> dict[str, str]:
        """Our decisions since `base` that the incoming side applied too (same pass, fingerprint and answer):
        verdict id -> the incoming verdict's id. Two reviewers at once both decide a question; the merge keeps
        one change, and ours is the same decision, never one a writer overrode."""
        ours, incoming = self._applied(f"{base}..HEAD"), self._applied(f"{base}..{theirs}")
        if not ours or not incoming:
            return {}
        # verdict id -> (pass, fingerprint, answer)
        question: dict[str, tuple[object, object, object]] = {}
        # the merged journal: both sides' lines
        for record in Journal(self.root).records(types=("verdict",)):
            if record.get("id") in ours or record.get("id") in incoming:
                question[record["id"]] = (record.get("pass"), record.get("fingerprint"), record.get("answer"))
        theirs_by_question = {question[v]: v for v in incoming if v in question}
        return {v: theirs_by_question[question[v]] for v in ours if v in question and question[v] in theirs_by_question}

    def _applied(self, revs: str) -> list[str]:
        """The verdict ids of the decision commits in a range."""
        out = run_git(
            self.repo,
            "log",
            "--no-merges",
            "--format=%(trailers:key=Knomit-Verdict,valueonly,separator=%x00)%x00",
            revs,
        )
        return [v.strip() for v in out.split("\0") if v.strip()]

    def _message(
        self, count: int, lost: set[str], overridden: dict[str, list[str]], twins: dict[str, str] | None = None
    ) -> str:
        subject = f"sync: merge {self.name}/{self.branch} ({count} commit(s))"
        body = (
            [f"Writers' side kept where both sides changed the same lines: {', '.join(sorted(lost))}."] if lost else []
        )
        for vid, paths in overridden.items():
            body.append(
                f"Overridden: {vid} in {', '.join(paths)}; its verdict stands (an alias is restated, a "
                "changed fact is asked again)."
            )
        for ours, other in (twins or {}).items():
            body.append(f"Same decision: {ours} is {other}, applied on both sides; one change is kept.")
        trailers = "".join(f"{OVERRIDDEN}: {vid}\n" for vid in overridden) + "".join(
            f"{SAME}: {ours} as {other}\n" for ours, other in (twins or {}).items()
        )
        return subject + "\n\n" + ("\n".join(body) + "\n\n" if body else "") + trailers

    # --- what the metrics and the push read ------------------------------------------------------

    def save(self) -> None:
        """Keep this session's report for the metrics file and `status` (a per-clone fact: in .git)."""
        record = {**self.report.json(), "at": datetime.now(UTC).isoformat(timespec="seconds")}
        try:
            atomic_write(Path(self.repo.git_dir) / STATE_FILE, dumps(record))
        except OSError as e:
            log.warning("could not keep the sync state: %s", e)

    def last(self) -> dict[str, Any] | None:
        """The last session's sync as it saved it (SyncReport.json() and `at`), or None before any."""
        try:
            return json.loads((Path(self.repo.git_dir) / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def figures(self, sessions_ended: list[str]) -> dict[str, Any]:
        """What the metrics file and `status --json` say of the remote; `sessions_ended`: ISO times, any order."""
        try:
            last = json.loads((Path(self.repo.git_dir) / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            last = {}
        oldest = self.oldest_unpushed_at()
        waited = (
            0
            if oldest is None
            else sum(datetime.fromisoformat(t) >= datetime.fromisoformat(oldest) for t in sessions_ended)
        )
        return {
            "remote": self.name,
            "branch": self.branch,
            "state": last.get("state"),
            "error": last.get("error"),
            "last_sync_at": last.get("at"),
            "last_push_at": self.last_push_at(),
            "unpushed_commits": self.unpushed(),
            "unpushed_sessions": waited,
            "overridden_decisions": self.overridden_total(),
        }

    def unpushed(self) -> int:
        """Local commits not on the remote branch as last fetched or pushed."""
        if rev(self.repo, "HEAD") is None:
            return 0
        since = [f"^{self.tracking}"] if rev(self.repo, self.tracking) else []
        return int(run_git(self.repo, "rev-list", "--count", "HEAD", *since).strip())

    def last_push_at(self) -> str | None:
        """When a push last updated the remote branch from this clone (the remote-tracking ref's reflog)."""
        try:
            out = run_git(self.repo, "reflog", "show", "--date=unix", "--format=%gd%x01%gs", self.tracking, "--")
        except GitFailed:
            # no such ref, or no reflog: never pushed from here
            return None
        for entry in out.splitlines():
            at, _, what = entry.partition("\x01")
            if what == PUSHED or what.startswith("update by push"):
                stamp = int(at.rpartition("@{")[2].rstrip("}"))
                return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")
        return None

    def oldest_unpushed_at(self) -> str | None:
        """When the oldest local commit not on the remote was made, or None when everything went out."""
        if not self.unpushed():
            return None
        since = [f"^{self.tracking}"] if rev(self.repo, self.tracking) else []
        stamps = run_git(self.repo, "log", "--format=%ct", "HEAD", *since).split()
        return datetime.fromtimestamp(min(map(int, stamps)), UTC).isoformat(timespec="seconds")

    def overridden_total(self) -> int:
        """Decisions overridden by writers, over the whole history (every clone's merges)."""
        return len(trailer_values(self.repo, OVERRIDDEN))

    def _broken_facts(self) -> list[str]:
        """Facts the push would break: they parse on the remote branch and not at HEAD."""
        if rev(self.repo, self.tracking) is None:
            return []
        out: list[str] = []
        for path in self._changed(self.tracking, "HEAD"):
            here, there = self._show(f"HEAD:{path}"), self._show(f"{self.tracking}:{path}")
            if here is not None and not self._parses(path, here) and there is not None and self._parses(path, there):
                out.append(path)
        return out

    # --- git -----------------------------------------------------------------------------------

    def _net(self, *args: str) -> None:
        """A fetch or push: no prompt for a password (nobody is there to answer), and a time limit."""
        env = {**os.environ, **GIT_ENV, "GIT_TERMINAL_PROMPT": "0"}
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=self.root,
                capture_output=True,
                env=env,
                timeout=NET_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise GitFailed(["git", *args], -1, f"git {args[0]} timed out after {NET_TIMEOUT_S:.0f} s") from None
        if done.returncode:
            raise GitFailed(["git", *args], done.returncode, done.stderr.decode("utf-8", "replace"))

    def _merging(self) -> bool:
        return (Path(self.repo.git_dir) / "MERGE_HEAD").exists()

    def _abort(self) -> None:
        if self._merging():
            run_git(self.repo, "merge", "--abort")
        self.mark.unlink(missing_ok=True)

    def _intend(self, head: str, theirs: str) -> None:
        """Say, before a merge starts, that this tool started it: recovery then knows it may undo it."""
        atomic_write(self.mark, dumps({"head": head, "theirs": theirs, "remote": self.name, "branch": self.branch}))

    def _blob(self, sha: str) -> bytes:
        return subprocess.run(["git", "cat-file", "blob", sha], cwd=self.root, capture_output=True, check=True).stdout

    def _show(self, spec: str) -> bytes | None:
        done = subprocess.run(["git", "cat-file", "blob", spec], cwd=self.root, capture_output=True)
        return done.stdout if done.returncode == 0 else None

    def _changed(self, a: str, b: str | None) -> list[str]:
        """Fact paths that differ between two trees (b None: the index)."""
        args = ["diff", "--name-only", "-z", "--no-renames", *(["--cached", a] if b is None else [a, b])]
        return [p for p in run_git(self.repo, *args).split("\0") if p and matches(p, self.fact_globs)]

    def _parses(self, path: str, data: bytes) -> bool:
        try:
            parse_as(self.layout, path, data.decode("utf-8"))
            return True
        except (BadFact, UnicodeDecodeError):
            return False

    def _merge_file(self, path: str, blobs: list[bytes], favour: str) -> tuple[bytes, int]:
        """git merge-file of ours, base, theirs: the merged bytes (`favour` settling conflicts) and the conflicts."""
        with tempfile.TemporaryDirectory(dir=self.repo.git_dir, prefix="knomit-merge-") as tmp:
            names: list[str] = []
            for name, data in zip(("ours", "base", "theirs"), blobs):
                (Path(tmp) / name).write_bytes(data)
                names.append(str(Path(tmp) / name))
            plain = subprocess.run(["git", "merge-file", "-p", *names], capture_output=True)
            settled = subprocess.run(["git", "merge-file", "-p", favour, *names], capture_output=True)
        if plain.returncode < 0 or settled.returncode != 0:
            raise Unmergeable(path, "git merge-file failed: " + last_line(settled.stderr.decode("utf-8", "replace")))
        return settled.stdout, plain.returncode

    def _stage(self, path: str, mode: str, content: bytes | str) -> None:
        """Put one resolved file in the index at stage 0 and in the work tree (content: bytes, or a blob sha)."""
        sha = (
            content
            if isinstance(content, str)
            else run_git(self.repo, "hash-object", "-w", "--stdin", input=content).strip()
        )
        run_git(self.repo, "update-index", "--add", "--cacheinfo", f"{mode},{sha},{path}")
        run_git(self.repo, "checkout", "--", path)
