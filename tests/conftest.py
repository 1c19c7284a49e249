"""Shared fixtures and the run's setup: real git corpora in tmp dirs, a real sqlite file, a loopback Messages API
server. The plain helpers they use are in helpers.py and judges.py, where the tests import them from."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
os.environ["HF_HUB_OFFLINE"] = "1"
# One reader, the judge model, as the tests of the questions count its calls (and their subprocesses inherit it);
# tests/test_first_reader.py, the default-config test of tests/test_models.py and the installed wheel's review
# (tests/test_install.py) read with the first reader, as a user's session does.
os.environ["KNOMIT_JUDGE_FIRST_READER"] = ""
# the helper modules' asserts report as a test's do
pytest.register_assert_rewrite("helpers", "judges", "processes")

# a browser test that skips where KNOMIT_REQUIRE_BROWSER is set (CI) fails instead: tests/browser.py
from browser import pytest_runtest_makereport  # noqa: E402,F401
from helpers import (  # noqa: E402
    FAST,
    LOCAL_GIT_ENV,
    ONE_CALL,
    SMALL,
    SYNC,
    TEMPROOT,
    THREE,
    CorpusRepo,
    Templates,
    copy_of,
    git,
    make_repo,
    write_config,
)
from judges import planted  # noqa: E402
from messages_server import MessagesServer  # noqa: E402

# A test run writes nothing outside the clone: pytest's temporary folders are under .pytest-tmp/ in it
# (git-ignored; pytest's own numbered folders, so two runs never share one), a passing test's removed at once
# and a passing run's at its end (pyproject's tmp_path_retention_policy = "failed"): a failure's stay to look at.
TEMPROOT.mkdir(exist_ok=True)
# read by pytest's tmp_path_factory, and by nested runs
os.environ["PYTEST_DEBUG_TEMPROOT"] = str(TEMPROOT)
# The test corpora are git repositories inside the clone's work tree: git looks no higher than the folder
# (knomit-judge's own search too, gitops.enclosing_top), so a corpus is never taken for a folder of the clone.
os.environ["GIT_CEILING_DIRECTORIES"] = os.pathsep.join(
    [str(TEMPROOT), *filter(None, os.environ.get("GIT_CEILING_DIRECTORIES", "").split(os.pathsep))]
)
# git's local variables (helpers.LOCAL_GIT_ENV), as `git bisect run` and hooks export them: left in, every git
# call here (and in the tool and subprocesses) would work on the surrounding clone.
for _key in LOCAL_GIT_ENV:
    os.environ.pop(_key, None)


@pytest.fixture(scope="session")
def templates(tmp_path_factory) -> Templates:
    """Template corpora, made and embedded once per run (once per worker under xdist); each test works on a
    copy_of one, so no test sees another's writes."""
    return Templates(tmp_path_factory.mktemp)


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


@pytest.fixture
def fast_retry(corpus_repo):
    """The corpus with backoff waits removed (inspect_ai's fast_retry_waits)."""
    write_config(corpus_repo, FAST)
    return corpus_repo


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
    repo.write(
        "knomit-judge.toml",
        FAST + "[budget]\noptimistic_cap = 1000\nquestions_per_resolution = 1000\n\n[describe]\nmax_tries = 1\n",
    )
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
