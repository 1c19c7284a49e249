"""git asked, never changed: the commit a ref names, ancestry, and what git's stderr says of a failure."""

from __future__ import annotations

import git

from .gitops import GitFailed, run_git


def rev(repo: git.Repo, ref: str | None) -> str | None:
    """The commit `ref` names, or None (no such ref, or not a commit)."""
    if not ref:
        return None
    try:
        return run_git(repo, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}").strip() or None
    except GitFailed:
        return None


def is_ancestor(repo: git.Repo, a: str, b: str) -> bool:
    """Whether commit `a` is in the history of `b` (b itself included)."""
    try:
        run_git(repo, "merge-base", "--is-ancestor", a, b)
        return True
    except GitFailed:
        return False


def push_rejected(stderr: str) -> bool:
    """A push refused because the remote has commits we lack (not a network or permission failure)."""
    s = stderr.lower()
    # "failed to update ref" / "cannot lock ref": another push won the race after ours read the remote's refs
    return (
        "[rejected]" in s
        and ("fetch first" in s or "non-fast-forward" in s)
        or "stale info" in s
        or "failed to update ref" in s
        or "cannot lock ref" in s
    )


def git_cause(stderr: str, remote: str = "") -> str:
    """The line of git's stderr that names the cause, with what the remote said (a hook's reason) kept.

    git ends most failures with advice ("and the repository exists."), so its last line is rarely the cause.
    """
    lines = [l.strip() for l in stderr.strip().splitlines() if l.strip()]
    said = [l[len("remote:") :].strip() for l in lines if l.startswith("remote:") and l[len("remote:") :].strip()]
    rejected = next((l for l in lines if "[remote rejected]" in l or "[rejected]" in l), None)
    fatal = next((l for l in lines if l.startswith(("fatal:", "error:"))), None)
    head = rejected or (fatal.split(":", 1)[1].strip() if fatal else last_line(stderr))
    if remote and not rejected and fatal:
        head = f"{remote}: {head}"
    return head + (f"; the remote said: {' / '.join(said)}" if said else "")


def last_line(stderr: str) -> str:
    lines = [l.strip() for l in stderr.strip().splitlines() if l.strip()]
    return lines[-1] if lines else "git failed"
