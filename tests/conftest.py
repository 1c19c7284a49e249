"""Shared fixtures: real git corpora in tmp dirs, a real sqlite file, a loopback Messages API server."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ["HF_HUB_OFFLINE"] = "1"
# One reader, the judge model, as the tests of the questions count its calls (and their subprocesses inherit it);
# tests/test_first_reader.py, the default-config test of tests/test_models.py and the installed wheel's review
# (tests/test_install.py) read with the first reader, as a user's session does.
os.environ["KNOMIT_JUDGE_FIRST_READER"] = ""

# a browser test that skips where KNOMIT_REQUIRE_BROWSER is set (CI) fails instead: tests/browser.py
from browser import pytest_runtest_makereport  # noqa: E402,F401
from messages_server import MessagesServer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "corpus-fixtures" / "demo"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@localhost"}


# git's local variables (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, ...), as `git bisect run` and hooks export
# them: left in, every git call here (and in the tool and subprocesses) would work on the surrounding clone.
LOCAL_GIT_ENV = subprocess.run(["git", "rev-parse", "--local-env-vars"], capture_output=True, text=True,
                               check=True).stdout.split()
for _key in LOCAL_GIT_ENV:
    os.environ.pop(_key, None)


def git_env() -> dict[str, str]:
    """The environment for a test's git call: ours, less git's local variables a test may have set."""
    return {**{k: v for k, v in os.environ.items() if k not in LOCAL_GIT_ENV}, **GIT_ENV}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          env=git_env()).stdout


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


def fact_text(title: str, motifs=(), confidence=0.5, sources=("s1",), body="A claim and its evidence.",
              links=None, extra: str = "") -> str:
    lines = ["---", f"title: {json.dumps(title)}", f"motifs: {json.dumps(list(motifs))}",
             f"confidence: {confidence}", f"sources: {json.dumps(list(sources))}"]
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
    for path, text in (facts or {}).items():
        repo.write(path, text)
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
    "facts/ops/f1.md": fact_text("A penalty that blocks its own recovery latches the system off",
                                 ["penalty-blocks-own-recovery"], 0.7, ["s1"],
                                 "When the throttle defunds, it stops collecting the evidence it needs to refund."),
    "facts/ops/f2.md": fact_text("Rate limiting that disables the health check keeps the service down",
                                 ["penalty-blocks-own-recovery"], 0.6, ["s2"],
                                 "The limiter blocks the probe that would lift the limit."),
    "facts/ops/f3.md": fact_text("A sanction that prevents self repair keeps the node quarantined",
                                 ["self-locking-penalty"], 0.5, ["s3"],
                                 "Quarantine blocks the heartbeat the node needs to leave quarantine."),
    "facts/ops/f4.md": fact_text("Queue growth amplifies latency under load", ["queue-amplifies-latency"], 0.8,
                                 ["s4"], "Longer queues mean longer waits, which mean more retries."),
}
SAME = {"same": True, "mechanism": "A penalty removes the signal needed to lift it."}


# Corpora the judge tests copy: "pair" has exactly one alias question, "many" ten unrelated motifs.
TEMPLATES = {
    "pair": {p: SMALL[p] for p in ("facts/ops/f1.md", "facts/ops/f3.md")},
    "small": SMALL,
    "many": {f"facts/m/f{i}.md": fact_text(f"Mechanism {i}: a feedback loop of kind {i}", [f"loop-kind-{i}"])
             for i in range(10)},
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


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> Templates:
    """Template corpora, made once per test module; each test works on a copy_of one."""
    return Templates(tmp_path_factory.mktemp)


def copy_of(template: Path, tmp_path: Path) -> CorpusRepo:
    root = tmp_path / template.name
    shutil.copytree(template, root, symlinks=True)
    return CorpusRepo(root)


@pytest.fixture
def corpus_repo(tmp_path) -> CorpusRepo:
    """The SMALL corpus in a real git repo, initialised and committed."""
    return make_repo(tmp_path / "corpus", SMALL)


@pytest.fixture
def empty_repo(tmp_path) -> CorpusRepo:
    return make_repo(tmp_path / "corpus")


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "judge.db"


@pytest.fixture
def messages_server():
    with MessagesServer() as server:
        yield server


@pytest.fixture
def judge_env(messages_server, monkeypatch):
    """Point the real SDK at the loopback server with a fake key; no backoff waits."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-FAKEKEY-0123456789")
    monkeypatch.delenv("KNOMIT_JUDGE_MODEL", raising=False)
    # one reader, the judge model, as every test of the questions was written for; tests/test_first_reader.py
    # and the default-config tests of tests/test_models.py read with the first reader
    monkeypatch.setenv("KNOMIT_JUDGE_FIRST_READER", "")
    return messages_server


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


@pytest.fixture
def fast_retry(corpus_repo):
    """The corpus with backoff waits removed (inspect_ai's fast_retry_waits)."""
    write_config(corpus_repo, FAST)
    return corpus_repo


def scripted(tmp_path: Path, *entries: dict) -> str:
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return f"scripted:{path}"
