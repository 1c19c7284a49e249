"""Fresh first: what changed since a pass's last session, and the questions a new fact is owed.

`freshness` finds each pass's last session (or, in a fresh clone of a shared corpus, the history's) and what is
fresh and new since it, once a session: each pass's run keeps it; the rest only reads it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from git import Repo

from ..gitops import GitFailed, run_git
from ..passes import Candidate, subject_names
from ..passes.base import Pass
from .context import Context, Freshness, PassRun


def freshness(ctx: Context, passes: list[Pass], repo: Repo) -> dict[str, Freshness]:
    """Each pass's name -> what changed since its last session (started, ended): the names fresh since it started
    and new since it ended."""
    # False: not read yet; what git says changed since
    in_git: tuple[set[str], str] | None | bool = False
    out = {}
    for p in passes:
        when = ctx.store.last_session(p.name, ctx.kind)
        paths = None
        # unset, a session is exactly as before the remote
        if when == (None, None) and ctx.config.git.remote:
            if in_git is False:
                # a fresh clone of a shared corpus: what writers changed since any machine's last session
                # is as new to this one as to the machine that would have run it
                in_git = changed_since_last_session(repo, set(ctx.corpus.facts))
            # and what is owed is counted from that session's end, as it would
            if isinstance(in_git, tuple):
                paths, when = in_git[0], (in_git[1], in_git[1])
        out[p.name] = Freshness(when[1], fresh_names(p, ctx, when[0], paths), new_names(p, ctx, when[1], paths))
    return out


def fresh_names(p: Pass, ctx: Context, started: str | None, paths: set[str] | None = None) -> set[str]:
    """The facts (or, for alias, the spellings they carry) whose content changed since the pass's last session.

    `paths`, when given, are those facts as git tells them (a fresh clone of a shared corpus: no session of its
    own in its db).
    """
    if paths is None:
        # a first session (or a db rebuilt without its history): nothing to be fresher than
        if started is None:
            return set()
        paths = ctx.index.changed_since(started)
    if p.about != "spellings":
        return paths
    return {m for path in paths if (f := ctx.corpus.facts.get(path)) is not None and f.active for m in f.motifs}


def fresh_first(waiting: list[Candidate], fresh: set[str]) -> list[Candidate]:
    """Questions touching a fact or spelling changed since the last session first, then the backlog; each by score.

    So a duplicate a writer adds is asked while it is new, not after the backlog ranked above it.
    """
    for c in waiting:
        c.fresh = any(name in fresh for name in subject_names(c.subject))
    # stable: each part keeps its best-first order
    return sorted(waiting, key=lambda c: not c.fresh)


def new_names(p: Pass, ctx: Context, ended: str | None, paths: set[str] | None = None) -> set[str]:
    """The facts changed since the pass's last session ended (or, for alias, the spellings only they carry).

    Not the judge's own rewrites: those are indexed as it applies them, inside its session. For alias, a
    spelling an unchanged fact also carries was there before; an edit brings no new question about it.
    `paths` as for fresh_names.
    """
    if paths is None:
        if ended is None:
            return set()
        paths = ctx.index.changed_since(ended)
    if p.about != "spellings":
        return paths
    facts = ctx.corpus.facts
    return {
        m
        for path in paths
        if (f := facts.get(path)) is not None and f.active
        for m in f.motifs
        if all(c in paths for c in ctx.corpus.carriers.get(m, []))
    }


def owed_to_fresh(run: PassRun, waiting: list[Candidate], paid: set[str]) -> set[str]:
    """The questions owed to new facts or spellings: each one's best `fresh_per_change` that touch it, by score.

    Its own best, not the pass's global rank: a new fact's duplicate may rank 34th of 771 questions, behind
    pairs of older facts, and is still its new fact's nearest. What was asked about a name since the pass's
    session ended (an earlier round, a killed session, a paid batch result) counts against what it is owed,
    so the count is derived from stored verdicts and a rerun does not ask more.
    """
    p, ctx = run.p, run.ctx
    fresh, per = run.freshness.new, ctx.config.budget.fresh_per_change
    if not fresh or per <= 0 or not ctx.config.budget.enabled or not p.owes_questions_to_new:
        return set()
    # only questions scoring this much are owed (alias: name matches)
    floor = p.owed_min_score
    asked: dict[str, int] = {}
    ended = run.freshness.ended
    subjects = ctx.store.subjects_since(p.name, ended, ctx.kind) if ended else []
    for subject in [*subjects, *(c.subject for c in waiting if c.fingerprint in paid)]:
        for name in subject_names(subject):
            asked[name] = asked.get(name, 0) + 1
    owed: set[str] = set()
    # best first: fresh_first kept the score order within the fresh part (new is within fresh)
    for c in waiting:
        if not c.fresh:
            break
        if c.fingerprint in paid or c.score < floor:
            continue
        names = [n for n in subject_names(c.subject) if n in fresh]
        if any(asked.get(n, 0) < per for n in names):
            owed.add(c.fingerprint)
            for n in names:
                asked[n] = asked.get(n, 0) + 1
    return owed


def changed_since_last_session(repo: Repo, facts: set[str]) -> tuple[set[str], str] | None:
    """The facts git changed since the newest session's journal commit in HEAD's history, and when that
    commit was made (None: no session in the history).

    What a db with no session of its own (a fresh clone, an ephemeral runner) takes as fresh: the writers'
    edits since whichever machine reviewed last.
    """
    try:
        found = run_git(repo, "log", "-1", "--format=%H %ct", "--grep=^Knomit-Session: ", "HEAD").split()
        if not found:
            return None
        changed = run_git(repo, "diff", "--name-only", "-z", "--no-renames", found[0], "HEAD").split("\0")
    except GitFailed:
        return None
    at = datetime.fromtimestamp(int(found[1]), UTC).isoformat(timespec="milliseconds")
    return {p for p in changed if p in facts}, at
