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
from messages_server import MessagesServer, text  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "corpus-fixtures" / "demo"

# A test run writes nothing outside the clone: pytest's temporary folders are under .pytest-tmp/ in it
# (git-ignored; pytest's own numbered folders, so two runs never share one), a passing test's removed at once
# and a passing run's at its end (pyproject's tmp_path_retention_policy = "failed"): a failure's stay to look at.
TEMPROOT = Path(os.environ.get("PYTEST_DEBUG_TEMPROOT") or REPO / ".pytest-tmp")
TEMPROOT.mkdir(exist_ok=True)
os.environ["PYTEST_DEBUG_TEMPROOT"] = str(TEMPROOT)  # read by pytest's tmp_path_factory, and by nested runs
# The test corpora are git repositories inside the clone's work tree: git looks no higher than the folder
# (knomit-judge's own search too, gitops.enclosing_top), so a corpus is never taken for a folder of the clone.
os.environ["GIT_CEILING_DIRECTORIES"] = os.pathsep.join(
    [str(TEMPROOT), *filter(None, os.environ.get("GIT_CEILING_DIRECTORIES", "").split(os.pathsep))])
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


@pytest.fixture(scope="session")
def templates(tmp_path_factory) -> Templates:
    """Template corpora, made and embedded once per run (once per worker under xdist); each test works on a
    copy_of one, so no test sees another's writes."""
    return Templates(tmp_path_factory.mktemp)


def copy_of(template: Path, tmp_path: Path) -> CorpusRepo:
    root = tmp_path / template.name
    shutil.copytree(template, root, symlinks=True)
    return CorpusRepo(root)


@pytest.fixture
def pair_repo(templates, tmp_path) -> CorpusRepo:
    """Two spellings of one mechanism: one alias question."""
    return copy_of(templates["pair"], tmp_path)


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


# The THREE corpus reviewed once, which tests/test_revert.py and tests/test_recovery.py take copies of.
ALIAS = ("penalty-blocks-own-recovery", "self-locking-penalty")
HEDGE = "Hedged requests cut p99 latency from 300 ms to 70 ms on the search tier"
BACKUP = "A backup request sent after the p95 delay cuts search p99 from 300 ms to 70 ms"
GROUP = ("The canary gate halts any deploy while it cannot read the metrics cluster",
         "The metrics cluster is itself deployed through the same pipeline",
         "A rollback is an ordinary deploy through the pipeline")
DISCOVERED = "A release that breaks the metrics cluster cannot be rolled back"
# A corpus with one planted yes per judged pass, on disjoint files: the SMALL alias pair, a prune
# merge pair and a discovery group (the three carriers of one motif).
THREE = {
    **SMALL,
    "facts/perf/hedge.md": fact_text(HEDGE, ["hedged-requests"], 0.8, ["h1", "h2"],
                                     "A duplicate request after the p95 delay cut p99 from 300 ms to 70 ms for 5% more load."),
    "facts/perf/backup.md": fact_text(BACKUP, ["hedged-requests"], 0.6, ["h3"],
                                      "Backup requests after p95 brought search p99 down from 300 to 70 ms."),
    "facts/delivery/canary.md": fact_text(GROUP[0], ["hidden-dependency-cycle"], 0.7, ["d1"],
                                          "Every deploy waits on the canary gate, which reads the metrics cluster."),
    "facts/delivery/metrics.md": fact_text(GROUP[1], ["hidden-dependency-cycle"], 0.7, ["d2"],
                                           "Releases of the metrics cluster go through the deploy pipeline."),
    "facts/delivery/rollback.md": fact_text(GROUP[2], ["hidden-dependency-cycle"], 0.7, ["d3"],
                                            "Rolling back is a deploy like any other and passes the same gates."),
}


def quoted(s: str) -> str:
    """How a string appears in the prompt's JSON evidence."""
    return json.dumps(s, ensure_ascii=False)


def planted_reply(prompt: str) -> dict:
    """The judge's answer by what the prompt shows: yes to the three planted questions, the default otherwise."""
    if prompt.startswith("Do motif A and motif B"):
        same = all(f'"spelling": "{m}"' in prompt for m in ALIAS)
        return {"same": same, "mechanism": "A penalty removes the signal needed to lift it." if same else ""}
    if prompt.startswith("Are fact A and fact B"):
        merge = quoted(HEDGE) in prompt and quoted(BACKUP) in prompt
        return {"decision": "merge" if merge else "distinct",
                "rationale": "Both report the same hedging result." if merge else ""}
    entails = all(quoted(t) in prompt for t in GROUP) and prompt.count('"title":') == 3
    if not entails:
        return {"entails": False, "fact": None, "rationale": ""}
    return {"entails": True, "rationale": "The rollback of the metrics cluster depends on the metrics cluster.",
            "fact": {"title": DISCOVERED, "body": "Its rollback is a deploy, which waits on the gate it broke.",
                     "motifs": ["rollback-dependency-cycle"]}}


def planted(request, n):
    """The loopback judge that answers planted_reply."""
    return text(json.dumps(planted_reply(request.prompt)))


@pytest.fixture(scope="session")
def three_built(tmp_path_factory) -> Path:
    """The THREE corpus after one review (one alias, one prune merge, one discovery commit), built once per run
    (once per worker under xdist); each test takes its own copy with `three`."""
    from knomit_judge.session.review import review
    root = tmp_path_factory.mktemp("three") / "corpus"
    repo = make_repo(root, THREE)
    # every question in one session; the loopback gives no describe line, and a spelling given none is not asked
    # again (issue 39: by default it is, up to 3 times, which would add a journal commit to a later session)
    # (a resolution worth 1000 questions: every read is worth its price, worth.py)
    repo.write("knomit-judge.toml", FAST + "[budget]\noptimistic_cap = 1000\nquestions_per_resolution = 1000\n\n"
                                         "[describe]\nmax_tries = 1\n")
    repo.commit("config")
    with MessagesServer(planted) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANTHROPIC_BASE_URL", server.url)
        mp.setenv("ANTHROPIC_API_KEY", "sk-ant-test-FAKEKEY-0123456789")
        mp.delenv("KNOMIT_JUDGE_MODEL", raising=False)
        result = review(repo.root)
    applied = {name: result.passes[name].applied for name in ("alias", "prune", "discovery")}
    assert applied == {"alias": 1, "prune": 1, "discovery": 1}, result.text_lines()
    return root


@pytest.fixture
def three(three_built, tmp_path, judge_env) -> CorpusRepo:
    """A private copy of the reviewed THREE corpus; the judge (loopback) still answers the planted yeses."""
    root = tmp_path / "corpus"
    shutil.copytree(three_built, root, symlinks=True)
    judge_env.responder = planted
    return CorpusRepo(root)


# The config that makes a session sync with a shared remote: merge before it, push after it (tests/test_sync.py).
SYNC = '\n[git]\nremote = "origin"\nbranch = "main"\n'


@pytest.fixture
def path_remote(tmp_path):
    """A plain path remote: a bare repository on the same disk, holding the SMALL corpus set to sync."""
    seed = make_repo(tmp_path / "seed", SMALL)
    seed.write("knomit-judge.toml", ONE_CALL + SYNC)
    seed.commit("config")
    bare = tmp_path / "kb.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed.root), str(bare))
    git(bare, "config", "core.logAllRefUpdates", "true")
    return bare


def scripted(tmp_path: Path, *entries: dict) -> str:
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return f"scripted:{path}"
