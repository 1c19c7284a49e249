"""Traps a new user fell into (issue 22): each one a clear message and exit code, and no data lost.

Retractions keep provenance, files keep their modes, a symlink loop is one problem, a file that cannot
be written abandons its decision whole, a read-only corpus is exit 2, YAML anchors and duplicate keys
never produce a fact that does not parse.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
from click.testing import CliRunner
from helpers import (
    DEMO,
    INCIDENT,
    KEEP,
    LOSE,
    REPO_ID,
    SAME,
    SMALL,
    demo_repo,
    fact_text,
    git,
    knomit_kb,
    make_repo,
    scripted,
    tree_digest,
    use_entities,
)
from knomit_format import knomit_parse

from knomit_judge.cli import cli
from knomit_judge.corpus import parse_fact
from knomit_judge.errors import BadFact
from knomit_judge.rewrite import renamed_motif
from knomit_judge.session.context import ReviewOptions
from knomit_judge.session.review import review

PENALTY, LOCKING = "penalty-blocks-own-recovery", "self-locking-penalty"
ALIAS = {"pass": "alias", "a": PENALTY, "b": LOCKING, "reply": SAME}


def run(*args):
    """The CLI as a user runs it; catch_exceptions=False, so a traceback fails the test."""
    return CliRunner().invoke(cli, ["-q", *map(str, args)], catch_exceptions=False)


# the real executable's entry point, in a child process (killed, or in a mount namespace of its own)
CLI_MAIN = "import sys; sys.argv[0] = 'knomit-judge'; from knomit_judge.cli import main; main()"
CHILD_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def decision_files(root, pass_name: str | None = None) -> dict[str, str]:
    """Fact paths each decision commit changed, with git's status letter (M, A, D)."""
    grep = f"--grep=^Knomit-Pass: {pass_name}$" if pass_name else "--grep=^Knomit-Pass: "
    out = {}
    for sha in git(root, "log", grep, "--format=%H").split():
        changed = git(root, "show", "--name-status", "--no-renames", "--format=", sha).split("\n")
        for line in filter(None, changed):
            status, path = line.split("\t", 1)
            if not path.startswith(".knomit/"):
                out.setdefault(path, status)
    return out


def locking_corpus(tmp_path, **extra: str):
    """SMALL, with a second carrier of the losing spelling (f5), so an alias merge rewrites two files."""
    facts = {
        **SMALL,
        "facts/ops/f5.md": fact_text(
            "A breaker that trips on its own probe never closes again",
            [LOCKING],
            0.5,
            ["s5"],
            "The circuit breaker counts its half-open probe as a failure.",
        ),
    }
    return make_repo(tmp_path / "corpus", {**facts, **extra})


# --- 1. a retraction never loses provenance ----------------------------------------------------


def test_a_knomit_retraction_by_deletion_keeps_every_ref_adds_the_count_and_reverts_byte_for_byte(tmp_path):
    root = knomit_kb(tmp_path)
    assert run("init", root).exit_code == 0
    # motif_keys = ["entities"]: a retraction must not take in the retired fact's spellings
    use_entities(root)
    before = {p: (root / p).read_bytes() for p in (KEEP, LOSE, INCIDENT)}
    replies = tmp_path / "replies.jsonl"
    replies.write_text(
        json.dumps(
            {
                "pass": "prune",
                "a": KEEP,
                "b": LOSE,
                "reply": {
                    "decision": "retract",
                    "redundant": "B",
                    "rationale": "The second states the same pool starvation in other words.",
                },
            }
        )
        + "\n"
    )

    out = run("review", root, "--pass", "prune", "--judge", f"scripted:{replies}", "--json")

    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["passes"]["prune"]["applied"] == 1
    # the corpus retracts by deleting the file
    assert not (root / LOSE).exists()
    keep = knomit_parse((root / KEEP).read_text())
    # knomit's convention: a count, the retired fact's added (2 + 1)
    assert keep["sources"] == 3
    assert keep["refs"] == [
        "https://www.postgresql.org/docs/current/runtime-config-connection.html",
        f"{REPO_ID}{INCIDENT}",
        "https://example.org/notes/pgbouncer-transaction-mode",
    ]
    assert keep["entities"] == ["PostgreSQL", "PgBouncer", "connection pool"]  # no motif taken in
    assert keep["domain"] == ["databases", "operations"]
    [sha] = git(root, "log", "--grep=^Knomit-Pass: prune$", "--format=%H").split()
    body = git(root, "show", "-s", "--format=%B", sha)
    assert (
        f"Carried over into {KEEP}:\n- from {LOSE}: sources: 2 -> 3\n"
        f"- from {LOSE}: refs: + https://example.org/notes/pgbouncer-transaction-mode\n"
    ) in body

    vid = git(root, "show", "-s", "--format=%(trailers:key=Knomit-Verdict,valueonly)", sha).strip()
    assert run("revert", vid, root).exit_code == 0
    assert {p: (root / p).read_bytes() for p in (KEEP, LOSE, INCIDENT)} == before


# --- 2. files keep their permissions ---------------------------------------------------------


@pytest.fixture
def umask_002():
    # not the usual 022, so a file made with the umask is told from one chmod'ed to 0644
    old = os.umask(0o002)
    yield
    os.umask(old)


def test_rewritten_files_keep_their_mode_and_new_ones_get_the_umasks(tmp_path, umask_002):
    repo = demo_repo(tmp_path / "demo")
    for path in (repo.root / "facts").rglob("*.md"):
        # a KB shared with one group; git does not track this, so it must not change
        path.chmod(0o640)

    review(repo.root, ReviewOptions(judge=f"scripted:{DEMO / 'judge-replies.jsonl'}"))

    files = decision_files(repo.root)
    for pass_name in ("alias", "prune", "exact", "discovery"):
        assert decision_files(repo.root, pass_name), f"the demo made no {pass_name} decision"
    merged = {p for p, s in decision_files(repo.root, "prune").items() if s == "M"}
    # survivors, retracted facts (status: retracted), relinked facts
    assert len(merged) >= 3
    rewritten = {p: mode(repo.root / p) for p, s in files.items() if s == "M"}
    assert rewritten and set(rewritten.values()) == {0o640}, rewritten
    created = {p: mode(repo.root / p) for p, s in files.items() if s == "A"}
    # 0666 & ~002, as an editor's new file
    assert created and set(created.values()) == {0o664}, created

    # a revert rewrites the carriers back: they keep their mode too
    [sha] = git(repo.root, "log", "-1", "--grep=^Knomit-Pass: alias$", "--format=%H").split()
    vid = git(repo.root, "show", "-s", "--format=%(trailers:key=Knomit-Verdict,valueonly)", sha).strip()
    assert run("revert", vid, repo.root).exit_code == 0
    reverted = [p for p in decision_files(repo.root, "revert") if p.startswith("facts/")]
    assert reverted and {mode(repo.root / p) for p in reverted} == {0o640}


def test_a_session_killed_mid_decision_is_rolled_back_with_the_modes_kept(tmp_path, umask_002):
    """The kill is real: a pre-commit hook SIGKILLs the session (its pid is in the lock) as it commits."""
    repo = locking_corpus(tmp_path)
    carriers = ["facts/ops/f3.md", "facts/ops/f5.md"]
    for path in carriers:
        (repo.root / path).chmod(0o640)
    before = {p: repo.read(p) for p in carriers}
    hook = repo.root / ".git/hooks/pre-commit"
    hook.write_text(
        "#!/bin/sh\nkill -9 $(sed -n 's/^pid \\([0-9]*\\) .*/\\1/p' .git/knomit-judge.lock)\nsleep 5\nexit 1\n"
    )
    hook.chmod(0o755)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CLI_MAIN,
            "-q",
            "review",
            str(repo.root),
            "--pass",
            "alias",
            "--judge",
            scripted(tmp_path, ALIAS),
        ],
        capture_output=True,
        text=True,
        env=CHILD_ENV,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr
    assert (repo.root / ".git/knomit-pending.json").exists() and repo.read(carriers[0]) != before[carriers[0]]
    hook.unlink()

    # the next start rolls the decision back with `git checkout`
    assert run("rebuild", repo.root).exit_code == 0
    assert {p: repo.read(p) for p in carriers} == before
    assert {mode(repo.root / p) for p in carriers} == {0o640}
    # the kept verdict waits in .knomit/
    assert git(repo.root, "status", "--porcelain", "--", "facts") == ""


# --- 3. a symlink loop is one problem ---------------------------------------------------------


def test_a_symlink_loop_is_a_problem_for_that_path_and_the_rest_is_reviewed(tmp_path):
    repo = locking_corpus(tmp_path)
    os.symlink("self.md", repo.root / "facts/self.md")
    repo.commit("a link to itself")

    dry = run("review", repo.root, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert report["corpus"]["read"] == 5 and report["corpus"]["skipped"] == 1
    [problem] = report["problems"]
    assert problem["path"] == "facts/self.md" and "symlink loop" in problem["reason"]

    for args in (["rebuild"], ["inbox"], ["report", "--html", tmp_path / "report.html"], ["status"]):
        out = run(args[0], repo.root, *args[1:])
        assert out.exit_code == 0, (args, out.output)
    out = run("review", repo.root, "--pass", "alias", "--judge", scripted(tmp_path, ALIAS), "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["passes"]["alias"]["applied"] == 1


# --- 4. a fact that cannot be written mid-decision -----------------------------------------------


@pytest.fixture
def immutable():
    """`chattr +i`: not even root may write, rename over or delete the file (as in the issue's report)."""
    made = []

    def make(path):
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
        if done.returncode:
            pytest.skip(f"chattr +i is not available here: {done.stderr.decode().strip()}")
        made.append(path)

    yield make
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_carrier_that_cannot_be_written_abandons_its_decision_whole_and_the_session_goes_on(tmp_path, immutable):
    pool = "facts/ops/pool.md"
    repo = locking_corpus(
        tmp_path,
        **{
            pool: fact_text(
                "Queues that grow under load raise latency for every request",
                ["queue-growth"],
                0.4,
                ["s6"],
                "Longer queues mean longer waits, which mean more retries.",
            )
        },
    )
    for path in ("facts/ops/f3.md", "facts/ops/f5.md"):
        (repo.root / path).chmod(0o640)
    before = {p: (repo.root / p).read_bytes() for p in ("facts/ops/f3.md", "facts/ops/f5.md")}
    head = git(repo.root, "rev-parse", "HEAD")
    # the merge rewrites f3 first, then fails on f5; a prune merge comes after it in the same session
    immutable(repo.root / "facts/ops/f5.md")
    judge = scripted(
        tmp_path,
        ALIAS,
        {
            "pass": "prune",
            "a": "facts/ops/f4.md",
            "b": pool,
            "reply": {"decision": "merge", "rationale": "Both say queue growth under load raises latency."},
        },
    )

    out = run("review", repo.root, "--judge", judge, "--json")

    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["passes"]["alias"]["applied"] == 0 and result["passes"]["alias"]["resolved"] == 1
    # the other decisions and passes went on
    assert result["passes"]["prune"]["applied"] == 1
    assert all(p["state"] != "aborted" for p in result["passes"].values())
    [problem] = [p for p in result["problems"] if p["path"] == "facts/ops/f5.md"]
    vid = problem["reason"].split()[1]
    assert "cannot write it" in problem["reason"] and "Operation not permitted" in problem["reason"]
    assert "abandoned whole" in problem["reason"]
    # the tree restored: f3 (written first) has its bytes and mode back; nothing of the alias was committed
    assert {p: (repo.root / p).read_bytes() for p in before} == before
    assert mode(repo.root / "facts/ops/f3.md") == 0o640
    assert git(repo.root, "status", "--porcelain") == ""
    assert not git(repo.root, "log", f"{head.strip()}..HEAD", "--grep=^Knomit-Pass: alias$", "--format=%H")
    assert not (repo.root / ".git/knomit-pending.json").exists()

    # the cause removed, the next session applies the stored yes without asking again
    subprocess.run(["chattr", "-i", str(repo.root / "facts/ops/f5.md")], check=True)
    again = json.loads(run("review", repo.root, "--pass", "alias", "--judge", judge, "--json").stdout)
    assert again["passes"]["alias"]["applied"] == 1 and again["problems"] == []
    assert git(
        repo.root, "log", "--grep=^Knomit-Pass: alias$", "--format=%(trailers:key=Knomit-Verdict,valueonly)"
    ).split() == [vid]
    assert {mode(repo.root / p) for p in before} == {0o640}


def test_a_knomit_deletion_that_cannot_delete_is_abandoned_with_the_survivor_restored(tmp_path, immutable):
    root = knomit_kb(tmp_path)
    assert run("init", root).exit_code == 0
    before = {p: (root / p).read_bytes() for p in (KEEP, LOSE, INCIDENT)}
    immutable(root / LOSE)
    replies = tmp_path / "replies.jsonl"
    replies.write_text(
        json.dumps(
            {
                "pass": "prune",
                "a": KEEP,
                "b": LOSE,
                "reply": {
                    "decision": "retract",
                    "redundant": "B",
                    "rationale": "The second states the same pool starvation in other words.",
                },
            }
        )
        + "\n"
    )

    out = run("review", root, "--pass", "prune", "--judge", f"scripted:{replies}", "--json")

    assert out.exit_code == 0, out.output
    [problem] = [p for p in json.loads(out.stdout)["problems"] if p["path"] == LOSE]
    assert "cannot delete it" in problem["reason"]
    assert {p: (root / p).read_bytes() for p in before} == before
    assert git(root, "status", "--porcelain") == ""


# --- 5. a read-only corpus -----------------------------------------------------------------------


def test_a_lock_that_cannot_be_made_is_exit_2_not_a_traceback(corpus_repo, monkeypatch):
    # a key, so the lock is what fails
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-FAKEKEY-0123456789")
    # something in the way, which root cannot bypass
    (corpus_repo.root / ".git/knomit-judge.lock").mkdir()
    out = run("review", corpus_repo.root)
    assert out.exit_code == 2
    assert "cannot write" in out.stderr and "knomit-judge.lock" in out.stderr


def test_a_db_that_cannot_be_opened_is_exit_2_not_a_traceback(corpus_repo):
    (corpus_repo.root / ".knomit/judge.db").unlink(missing_ok=True)
    (corpus_repo.root / ".knomit/judge.db").mkdir()
    out = run("rebuild", corpus_repo.root)
    assert out.exit_code == 2 and "cannot open the db" in out.stderr


def test_a_read_only_file_system_is_exit_2_and_a_dry_run_still_works(corpus_repo):
    """A real read-only mount: a private mount namespace (unshare -m) with the corpus bind-mounted ro."""
    root = corpus_repo.root
    # the db exists, as on a corpus reviewed before
    assert run("rebuild", root).exit_code == 0
    digest = tree_digest(root)

    def read_only(*args: str) -> subprocess.CompletedProcess:
        command = " ".join(
            ['mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" || exit 99;', 'shift; exec "$@"']
        )
        return subprocess.run(
            ["unshare", "-m", "sh", "-c", command, "sh", str(root), sys.executable, "-c", CLI_MAIN, *args],
            capture_output=True,
            text=True,
            timeout=120,
            # the mount is what fails
            env={**CHILD_ENV, "ANTHROPIC_API_KEY": "sk-ant-test-FAKEKEY"},
        )

    probe = read_only("--help")
    if probe.returncode:
        pytest.skip(f"no private read-only mount here (unshare -m / mount): {probe.stderr.strip()[:200]}")
    for command in ("review", "rebuild"):
        done = read_only("-q", command, str(root))
        assert done.returncode == 2, (command, done.stderr)
        assert "read-only file system" in done.stderr and "Traceback" not in done.stderr
    dry = read_only("-q", "review", str(root), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert tree_digest(root) == digest


# --- 6. YAML anchors -----------------------------------------------------------------------------

ANCHORED = (
    f"---\ntitle: A breaker that trips on its own probe never closes again\nmotifs: &m [{LOCKING}]\n"
    "seen_as: *m\nconfidence: 0.5\n---\nThe circuit breaker counts its half-open probe as a failure.\n"
)
NESTED = (
    f"---\ntitle: A breaker that trips on its own probe never closes again\nmotifs:\n  - &m {LOCKING}\n"
    "seen_as: *m\nconfidence: 0.5\n---\nThe circuit breaker counts its half-open probe as a failure.\n"
)


def test_a_rewrite_writes_the_anchor_on_a_key_back_out():
    fact = parse_fact("f.md", ANCHORED)
    text = renamed_motif(fact, LOCKING, PENALTY)
    assert f"motifs: &m [{PENALTY}]\nseen_as: *m\n" in text
    assert parse_fact("f.md", text).motifs == (PENALTY,)


def test_an_anchored_carrier_is_rewritten_and_parses(tmp_path):
    repo = locking_corpus(tmp_path, **{"facts/ops/f5.md": ANCHORED})
    out = run("review", repo.root, "--pass", "alias", "--judge", scripted(tmp_path, ALIAS), "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["passes"]["alias"]["applied"] == 1
    assert parse_fact("f5", repo.read("facts/ops/f5.md")).motifs == (PENALTY,)
    assert json.loads(run("review", repo.root, "--dry-run", "--json").stdout)["problems"] == []


def test_a_rewrite_that_would_not_parse_is_never_committed(tmp_path):
    """An anchor inside a rewritten list cannot be kept: the reader refuses the result, so the decision is."""
    repo = locking_corpus(tmp_path, **{"facts/ops/f5.md": NESTED})
    before = tree_digest(repo.root / "facts")
    out = run("review", repo.root, "--pass", "alias", "--judge", scripted(tmp_path, ALIAS), "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["passes"]["alias"]["applied"] == 0
    [problem] = result["problems"]
    assert problem["path"] == "facts/ops/f5.md" and "would not parse" in problem["reason"]
    assert "at line 4 of the rewritten text (bad YAML front matter: found undefined alias 'm')" in problem["reason"]
    assert tree_digest(repo.root / "facts") == before and git(repo.root, "status", "--porcelain") == ""
    # the next session reads every fact as before: nothing broken was committed
    assert json.loads(run("review", repo.root, "--dry-run", "--json").stdout)["corpus"]["skipped"] == 0


# --- 7. a duplicate key --------------------------------------------------------------------------


def test_a_key_written_twice_is_a_problem_naming_the_line():
    text = fact_text("Two motif lines", ["a"], extra="motifs: [b]\n")
    with pytest.raises(BadFact) as e:
        parse_fact("facts/x.md", text)
    assert e.value.path == "facts/x.md" and e.value.line == 6
    assert "'motifs' is written twice (lines 3 and 6)" in e.value.reason


def test_a_fact_with_a_duplicate_motifs_key_is_reported_and_not_rewritten(tmp_path):
    twice = fact_text(
        "A sanction that prevents self repair keeps the node quarantined",
        [LOCKING],
        body="Quarantine blocks the heartbeat the node needs to leave quarantine.",
        extra="motifs: [quarantine-latch]\n",
    )
    repo = locking_corpus(tmp_path, **{"facts/ops/f3.md": twice})
    out = run("review", repo.root, "--pass", "alias", "--judge", scripted(tmp_path, ALIAS), "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    # the other carrier, f5, is rewritten
    assert result["passes"]["alias"]["applied"] == 1
    assert result["problems"] == [
        {
            "path": "facts/ops/f3.md",
            "line": 6,
            "reason": "key 'motifs' is written twice (lines 3 and 6): one value would be lost; keep one",
        }
    ]
    assert repo.read("facts/ops/f3.md") == twice
