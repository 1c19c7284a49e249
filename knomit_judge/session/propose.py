"""A proposing session's two ends ([apply] mode = "propose"): the proposals branch brought in step before the
session (what a killed one left, other clones' proposals, a merged pull request's approvals, the drops), and
pushed after it. `approve` and `reject` open it the same way (proposals.py holds the branch itself)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import git

from ..config import Config
from ..errors import KnomitError
from ..files import atomic_write
from ..gitops import Applier, GitFailed, work_tree
from ..jsonl import dumps
from ..labels import LABELS_FILE, Label, labeller, latest, parse_labels
from ..passes import JUDGED_PASSES
from ..passes.base import DESCRIBE
from ..proposals import Board, Proposal, ProposalsReport, Refreshed, approvals_by_merge, blob_at
from ..recovery import sync_git, sync_journal
from ..store import Store
from ..sync import STATE_FILE, Remote
from ..verdicts import Journal, encode_line, now_text

log = logging.getLogger(__name__)


@dataclass
class Proposing:
    """The proposals branch opened for writing: its work tree (where a session reads and commits), its base."""

    board: Board
    tree: git.Repo
    # the reviewed branch's commit the branch is in step with
    base: str
    # the branch's own sync with [git] remote
    remote: Remote | None
    report: ProposalsReport
    # verdicts waiting when it was opened
    before: set[str] = field(default_factory=set)

    @property
    def root(self) -> Path:
        return work_tree(self.tree)

    def waiting(self) -> list[Proposal]:
        return self.board.waiting(self.base)

    @property
    def proposed(self) -> set[str]:
        """Verdicts waiting on the branch: a session applies none of them again."""
        return {p.verdict for p in self.waiting()}

    def refresh(
        self,
        drop: dict[str, str] | None = None,
        records: dict[str, list[bytes]] | None = None,
        notes: list[str] | None = None,
    ) -> Refreshed:
        done = self.board.refresh(self.tree, self.base, self.report.base, drop, records, notes=notes)
        self.report.dropped.update(done.dropped)
        return done

    def finish(self) -> None:
        """Push the branch (with [git] remote) and say what waits on it."""
        if self.remote:
            self.remote.push()
            record = {**self.remote.report.json(), "at": datetime.now(UTC).isoformat(timespec="seconds")}
            # where `status` and the metrics read a clone's last sync: the corpus's own .git
            try:
                atomic_write(Path(self.board.repo.git_dir) / STATE_FILE, dumps(record))
            except OSError as e:
                log.warning("could not keep the sync state: %s", e)
        waiting = self.waiting()
        self.report.waiting = [p.json() for p in waiting]
        self.report.proposed = [p.verdict for p in waiting if p.verdict not in self.before]


def journal_paths(root: Path) -> list[str]:
    journal = Journal(root)
    return [journal.relpath(p) for p in ("exact", *JUDGED_PASSES, DESCRIBE)]


def open_proposals(root: Path, repo: git.Repo, config: Config, store: Store, base: str | None = None) -> Proposing:
    """Bring the proposals branch in step (the lock held, the corpus recovered): `base`, the reviewed branch's commit
    (None: the remote's, fetched now, or the checkout's branch)."""
    try:
        return _open(root, repo, config, store, base)
    # a local git failure (a lock, a full disk): named, and nothing half-done is left
    except GitFailed as e:
        lines = e.raw.strip().splitlines()
        raise KnomitError(
            f"the proposals branch {config.apply.proposals} could not be brought in step: {lines[-1] if lines else e}"
        ) from None


def _open(root: Path, repo: git.Repo, config: Config, store: Store, base: str | None) -> Proposing:
    board = Board(root, repo, config)
    notes: list[str] = []
    if base is None:
        if reviewed := Remote.of(repo, config):
            # the reviewed branch as the remote has it now; the checkout is not touched
            reviewed.fetch()
            if reviewed.report.state != "synced":
                notes.append(f"{reviewed.report.line()}: proposing on it as last fetched")
        name, base = board.base()
        if base is None:
            raise KnomitError(f"{root}: no commit of {name} to propose on")
    else:
        name = board.base()[0]
    tree = board.open_tree(base)
    applier = Applier(tree)
    # a proposing session killed half-way through a decision
    if said := applier.recover():
        notes.append(said)
    applier.commit_paths(journal_paths(work_tree(tree)), "journal: verdicts kept before refreshing the proposals\n")
    remote = board.remote_of(tree)
    if remote:
        # another clone's proposals, or a person's commits on the branch
        remote.pull()
    # verdicts journalled on the branch (here or on other clones): answered here too, never bought again. Read with the
    # reviewed branch's marks (its journal is the first part of the branch's), so the marks stay the checkout's.
    sync_journal(work_tree(tree), store, keep_marks=False)
    # what the reviewed branch applied (a merged pull request), though the checkout lags
    sync_git(repo, store, base)
    report = ProposalsReport(board.branch, name, notes=notes)
    proposing = Proposing(board, tree, base, remote, report)
    proposing.before = proposing.proposed
    # the labels of the reviewed branch, of the proposals branch, and of the checkout (a `label` given here)
    labels = parse_labels(blob_at(repo, f"{base}:{LABELS_FILE}") or b"")
    for where in (work_tree(tree), root):
        labels += parse_labels((where / LABELS_FILE).read_bytes() if (where / LABELS_FILE).exists() else b"")
    said_for = latest(sorted(labels, key=lambda lab: lab.at))
    lines, approved = [], []
    # a merged pull request: approval of all it held
    for vid, sha in approvals_by_merge(repo, base).items():
        v = store.verdict(vid)
        if vid in said_for or v is None:
            continue
        lines.append(
            encode_line(
                Label(
                    v.id,
                    v.pass_name,
                    v.answer,
                    v.is_yes,
                    "yes",
                    labeller(root),
                    now_text(),
                    f"approved: merged into {name}",
                    sha,
                ).record()
            )
        )
        approved.append(vid)
    drop = {vid: "labelled no" for vid in proposing.before if said_for.get(vid) and said_for[vid].label == "no"}
    # the checkout's labels ride on the branch too: the session reads its labels there (a no gates the pass)
    here = (root / LABELS_FILE).read_bytes().splitlines() if (root / LABELS_FILE).exists() else []
    proposing.refresh(
        drop,
        {LABELS_FILE: [*here, *lines]} if here or lines else None,
        [f"Approved {vid}: merged into {name}." for vid in approved],
    )
    report.approved = approved
    return proposing
