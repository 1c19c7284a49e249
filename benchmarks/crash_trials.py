#!/usr/bin/env python3
"""Crash trials: SIGKILL review sessions at random instants; after each restart nothing is lost or half-applied.

    python benchmarks/crash_trials.py [--trials 200] [--seed 1] [--small] [--delay 0.2] [--keep DIR]

A corpus with planted alias / prune / discovery yeses (the demo corpus, or a
subset of it with --small) is reviewed by `knomit-judge review` processes
against a loopback Messages API server that answers by what each prompt shows,
slowly. Each trial starts a session, kills it (SIGKILL, to the process or its
whole process group) at an instant drawn from one of several distributions
(start-up, mid-judging, mid-apply, inside a git command, any time), then
restarts: usually the recovery every session starts with, run at once, then
the checks; sometimes the next trial's session is the restart (and may itself
be killed while recovering). Whenever a session got to finish, a "user"
commits a batch of new facts with one alias, one prune merge and (every other
batch) one discovery to find, so there is always work to interrupt. After
every restart it checks:

- `git status` is clean outside .knomit/ (inside it, only journal lines not yet
  committed, which the next decision or session end commits);
- no intent file or git lock file is left, and every fact file parses;
- every applied decision's commit carries its verdict's journal line, added by
  that very commit, and its change is complete (losers retracted, spellings gone);
- the db agrees with the journal (same verdicts) and with git (same applied set);
- no question answered before a kill reached the judge again (no prompt whose
  reply was stored is sent twice, and no fingerprint has two verdicts).

With --sync, the trials are kills at every step of the sync with a shared remote ([git] remote): a session
is killed by a hook that sleeps at that step (while fetching, while merging, as the merge commit lands,
mid-fast-forward, while pushing, as the remote takes the push), then the next session runs to the end and
must leave no merge in progress, a clean tree, the checks above passing, and the remote holding every
commit: the reviewer's, the writer's and its own.

Sessions are forked from a "zygote" process that has imported knomit_judge and
loaded the embedding model once, so a trial costs the session, not the ~7 s
start-up; the forked child is a real separate process running the CLI's own
entry point. The last check runs the real `knomit-judge` executable.

Prints one line per trial and `inconsistencies: N`; exits 1 when N > 0.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import queue
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
DEMO = REPO / "corpus-fixtures" / "demo"
# The facts of the demo corpus's planted cases (corpus-fixtures/demo/README.md): an alias pair, a prune
# merge, a prune retract, a discovery group and an exact duplicate; every other question is a no.
SMALL = """economics/fund-database-drops-closed-funds biology/nest-success-found-late
measurement/drive-failure-rate-current-fleet delivery/surviving-services-review
performance/hedged-requests-cut-p99 performance/backup-request-after-p95
reliability/checkout-pool-no-read-timeout reliability/pool-exhaustion-missing-timeouts
delivery/canary-gate-reads-metrics delivery/metrics-cluster-ships-through-pipeline
delivery/rollback-is-an-ordinary-deploy measurement/head-sampling-rare-errors reliability/trace-sampling-rare-errors
""".split()
CONFIG = """
[judge]
backoff_s = 0.0
timeout_s = 30
concurrency = 4

[budget]
enabled = false
"""
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@localhost"}
STRATEGIES = {"start": 2, "judging": 3, "apply": 5, "git": 2, "anytime": 2}  # relative weights


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


# -- the corpus and the judge ---------------------------------------------------------------------

def build_corpus(root: Path, small: bool) -> None:
    """A git repository holding the demo facts (or the SMALL subset), initialised by knomit-judge."""
    from knomit_judge.init import init_corpus
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    init_corpus(root)
    for src in sorted((DEMO / "facts").rglob("*.md")):
        rel = src.relative_to(DEMO / "facts").with_suffix("").as_posix()
        if not small or rel in SMALL:
            dst = root / "facts" / src.relative_to(DEMO / "facts")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    (root / "knomit-judge.toml").write_text(CONFIG, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "corpus")


WORDS = """penalty queue buffer retry cache quota audit backup deadline timeout threshold lockout surplus rollback
throttle warranty patch outage pilot hedge subsidy alarm ranking mandate""".split()
VERBS = "starves delays masks erodes triggers locks-in outpaces saturates dampens distorts".split()
OBJECTS = "recovery funding latency demand capacity trust upkeep detection throughput reserves".split()


def write_batch(root: Path, n: int, discovery: bool) -> list[str]:
    """New work a user commits between sessions: one alias, one prune merge and (maybe) one discovery yes."""
    r = random.Random(n)
    w, v, o = r.choice(WORDS), r.choice(VERBS), r.choice(OBJECTS)
    w2, o2 = r.choice(WORDS), r.choice(OBJECTS)
    facts = {
        "twin-a": (f"Twin claim {n}: a {w} that {v} its own {o}", [f"{w}-{v}"],
                   f"Observed in batch {n}: once the {w} {v} the {o}, nothing restores it."),
        "twin-b": (f"Twin claim {n}, restated: the {w} {v} the {o} it depends on", [f"{w}-{v}"],
                   f"Batch {n} again: the {w} keeps the {o} from coming back."),
        "loop-a": (f"Loop {n}: a {w2} that feeds on the {o2} it removes", [f"loop-{n}-a"],
                   f"The {w2} in case {n} takes away the {o2} it would need to stop."),
        "loop-b": (f"Loop {n}: the {w2} consumes the {o2} that could end it", [f"loop-{n}-b"],
                   f"In case {n} the {w2} uses up the {o2} that would switch it off."),
    }
    if discovery:
        for i, what in enumerate(("requires", "is blocked by", "restarts"), 1):
            facts[f"chain-{i}"] = (f"Chain link {n}/{i}: step {i} {what} the {o2} of step {i % 3 + 1}",
                                   [f"chain-{n}"], f"In chain {n}, step {i} {what} step {i % 3 + 1}.")
    paths = []
    for name, (title, motifs, body) in facts.items():
        path = f"facts/batch-{n}/{name}.md"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(f"---\ntitle: {quoted(title)}\nmotifs: {json.dumps(motifs)}\n"
                                 f"confidence: {0.5 + 0.1 * (name == 'twin-a')}\nsources: [batch-{n}-{name}]\n---\n"
                                 f"{body}\n", encoding="utf-8")
        paths.append(path)
    return paths


def batch_reply(pass_name: str, prompt: str) -> dict | None:
    """The yes answers for the batches: same loop number, same twin number, one whole chain."""
    if pass_name == "alias":
        found = re.findall(r'"spelling": "loop-(\d+)-([ab])"', prompt)
        if len(found) == 2 and found[0][0] == found[1][0] and found[0][1] != found[1][1]:
            return {"same": True, "mechanism": "Both name a process that consumes what would stop it."}
    elif pass_name == "prune":
        found = re.findall(r'"title": "Twin claim (\d+)', prompt)
        if len(found) == 2 and found[0] == found[1]:
            return {"decision": "merge", "rationale": "Both state the same self-sustaining effect."}
    elif pass_name == "discovery":
        found = re.findall(r'"title": "Chain link (\d+)/(\d)', prompt)
        if prompt.count('"title":') == 3 and len({n for n, _ in found}) == 1 and {i for _, i in found} == {"1", "2", "3"}:
            n = found[0][0]
            return {"entails": True, "rationale": f"The three steps of chain {n} wait on each other in a cycle.",
                    "fact": {"title": f"Chain {n} closes on itself and cannot start",
                             "body": f"Each step of chain {n} needs the next, so none can go first.",
                             "motifs": [f"chain-{n}-closure"]}}
    return None


def quoted(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def planted_rules(root: Path) -> list[tuple[str, list[str], dict]]:
    """(pass, strings the prompt must show, reply) from the demo's scripted replies, matched on prompt text."""
    from knomit_judge.corpus import load_corpus
    titles = {p: f.title for p, f in load_corpus(root).facts.items()}
    rules = []
    for line in (DEMO / "judge-replies.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry["pass"] == "describe":  # lines, not questions: the loopback server answers them apart
            continue
        if entry["pass"] == "alias":
            need = [f'"spelling": "{entry["a"]}"', f'"spelling": "{entry["b"]}"']
        else:
            paths = [entry["a"], entry["b"]] if entry["pass"] == "prune" else entry["contains"]
            if not all(p in titles for p in paths):
                continue
            need = [quoted(titles[p]) for p in paths]
        rules.append((entry["pass"], need, entry["reply"]))
    return rules


DEFAULTS = {"alias": {"same": False, "mechanism": ""}, "prune": {"decision": "distinct", "rationale": ""},
            "discovery": {"entails": False, "fact": None, "rationale": ""}}


def as_shown(reply: dict, need: list[str], prompt: str) -> dict:
    """A planted retract names the entry's a or b as redundant; the judge names it as this order shows it."""
    if "redundant" not in reply or prompt.index(need[0]) < prompt.index(need[1]):
        return reply
    return {**reply, "redundant": {"A": "B", "B": "A"}[reply["redundant"]]}


def responder(rules, delay_s: float):
    """The loopback judge: the planted reply when the prompt shows its subjects, else the default; slowly."""
    from messages_server import delay, text

    from knomit_judge.prompts import load_prompt
    by_system = {load_prompt(name).system: name for name in DEFAULTS}

    def respond(request, n):
        pass_name = by_system.get(request.system)
        reply = next((as_shown(r, need, request.prompt) for p, need, r in rules
                      if p == pass_name and all(s in request.prompt for s in need)),
                     None) or batch_reply(pass_name, request.prompt) or DEFAULTS.get(pass_name, {})
        return delay(delay_s, text(json.dumps(reply)))
    return respond


def prompt_key(request) -> str | None:
    """The reply-cache key the judge stores a reply of this request under (see judge.cache_key)."""
    from knomit_judge.judge import cache_key
    from knomit_judge.prompts import load_prompt
    for name in DEFAULTS:
        p = load_prompt(name)
        if p.system == request.system:
            tool = (request.body.get("tools") or [None])[0]  # the forced reply tool is part of the key
            return cache_key(request.body.get("model", ""), p.id, p.system, request.prompt, 0, tool=tool)
    return None


# -- the zygote: sessions forked from a process that has loaded the model ------------------------------

def zygote_main() -> None:
    """Load everything once, then fork one CLI session per command line read on stdin."""
    from knomit_judge import cli
    from knomit_judge.encoders import load_model
    load_model()  # never used here: a forked child must be the first to run the model (OpenMP and fork)
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        cmd = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the session
            try:
                os.setpgid(0, 0)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                for fd, path in ((1, cmd["out"]), (2, cmd["err"])):
                    f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    os.dup2(f, fd)
                    os.close(f)
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False)
                cli.cli.main(args=cmd["argv"], prog_name="knomit-judge")
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                import traceback
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        try:
            os.setpgid(pid, pid)  # also here, so the group exists before anyone can kill it
        except OSError:
            pass
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        out.write(json.dumps({"pid": pid, "status": status}) + "\n")
        out.flush()


def wait_gone(pid: int) -> None:
    """Orphaned git children of a killed session finish before the restart (as a later cron run would)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


class Zygote:
    def __init__(self, env: dict):
        self.proc = subprocess.Popen([sys.executable, __file__, "--zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def ready(self, timeout: float = 300) -> None:
        line = self.lines.get(timeout=timeout)
        if line != "ready":
            raise RuntimeError(f"zygote failed to start: {line!r}")

    def spawn(self, argv: list[str], out: Path, err: Path) -> int:
        self.proc.stdin.write(json.dumps({"argv": argv, "out": str(out), "err": str(err)}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.lines.get(timeout=60))["pid"]

    def exited(self, timeout: float = 0) -> int | None:
        """The wait status of the running session once it has ended, else None."""
        try:
            line = self.lines.get(timeout=timeout) if timeout else self.lines.get_nowait()
        except queue.Empty:
            return None
        return json.loads(line)["status"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


# -- the checks --------------------------------------------------------------------------------------

def journal_verdicts(root: Path) -> list[dict]:
    from knomit_judge.verdicts import Journal
    return [r for r in Journal(root).records() if r["type"] == "verdict"]


def stored_keys(root: Path) -> set[str]:
    """Reply-cache keys durable in the db now (opening rolls back a killed session's hot journal)."""
    path = root / ".knomit" / "judge.db"
    if not path.exists():
        return set()
    db = sqlite3.connect(path)
    try:
        return {r[0] for r in db.execute("SELECT key FROM replies")}
    except sqlite3.OperationalError:
        return set()
    finally:
        db.close()


def check(root: Path) -> list[str]:
    """Every way corpus, journal, db and git could disagree after a restart; [] when they agree."""
    from knomit_judge.corpus import load_corpus
    from knomit_judge.gitops import applied_commits, open_repo
    from knomit_judge.store import Store
    bad = []
    status = git(root, "status", "--porcelain", "-z", "--untracked-files=all").split("\0")
    for entry in filter(None, status):
        path = entry[3:]
        if not (path.startswith(".knomit/verdicts/") and path.endswith(".jsonl")):
            bad.append(f"git status: {entry!r}")
    for leftover in ("knomit-pending.json", "knomit-index", "knomit-index.lock", "index.lock", "HEAD.lock",
                     "refs/heads/main.lock"):
        if (root / ".git" / leftover).exists():
            bad.append(f"left behind: .git/{leftover}")
    corpus = load_corpus(root)
    bad += [f"fact does not parse: {p}" for p in corpus.problems]

    records = journal_verdicts(root)
    ids = Counter(r["id"] for r in records)
    questions = Counter((r["pass"], r["fingerprint"]) for r in records)
    bad += [f"verdict {vid} journalled {n} times" for vid, n in ids.items() if n > 1]
    bad += [f"question {q} answered {n} times" for q, n in questions.items() if n > 1]
    by_id = {r["id"]: r for r in records}

    repo = open_repo(root)
    applied = applied_commits(repo)
    for vid, sha in applied.items():
        v = by_id.get(vid)
        if v is None:
            bad.append(f"commit {sha[:10]} applies verdict {vid}, which the journal does not hold")
            continue
        journal = f".knomit/verdicts/{v['pass']}.jsonl"
        if vid not in _ids_at(root, sha, journal):
            bad.append(f"commit {sha[:10]} applies {vid} without its journal line")
        elif vid in _ids_at(root, f"{sha}^", journal):
            bad.append(f"{vid}'s journal line was committed before its decision {sha[:10]}")
        changed = _changed(root, sha)
        if journal not in changed:
            bad.append(f"commit {sha[:10]} does not add its journal file")
        if stray := [p for p in changed if p and not p.startswith(("facts/", ".knomit/verdicts/"))]:
            bad.append(f"commit {sha[:10]} touches {stray}")
        bad += _complete(v, sha, corpus)

    store = Store.for_corpus(root)
    try:
        rows = {r[0]: r[1] for r in store.db.execute("SELECT id, commit_sha FROM verdicts")}
    finally:
        store.close()
    if missing := set(by_id) - set(rows):
        bad.append(f"{len(missing)} journalled verdict(s) missing from the db")
    if extra := set(rows) - set(by_id):
        bad.append(f"{len(extra)} db verdict(s) missing from the journal")
    for vid, sha in applied.items():
        if vid in rows and rows[vid] != sha:
            bad.append(f"db says {vid} applied by {rows[vid]}, git says {sha[:10]}")
    bad += [f"db says {vid} applied, git has no such commit" for vid, sha in rows.items() if sha and vid not in applied]
    return bad


@functools.cache
def _ids_at(root: Path, rev: str, path: str) -> set[str]:
    """Verdict ids in a journal file at a commit (commits never change, so this is cached)."""
    done = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True)
    out = set()
    for raw in done.stdout.splitlines() if done.returncode == 0 else []:
        try:
            out.add(json.loads(raw).get("id"))
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            pass
    return out


@functools.cache
def _changed(root: Path, sha: str) -> list[str]:
    """`git show --name-only` of a commit."""
    return git(root, "show", "--name-only", "--format=", "-z", sha).split("\0")


def _complete(v: dict, sha: str, corpus) -> list[str]:
    """The applied decision is wholly visible now: a retracted loser, a vanished spelling, a written fact."""
    if v["pass"] in ("prune", "exact"):
        losers = [f for f in corpus.facts.values() if f.text and f"retracted_by: {v['id']}" in f.text]
        if not losers or any(f.active for f in losers):
            return [f"{v['pass']} {v['id']} ({sha[:10]}): no retracted loser in the corpus"]
    elif v["pass"] == "alias":
        if all(corpus.carriers.get(m) for m in (v["subject"]["a"], v["subject"]["b"])):
            return [f"alias {v['id']} ({sha[:10]}): both spellings still carried"]
    elif v["pass"] == "discovery":
        if not any(f"knomit-judge:{v['id']}" in f.sources for f in corpus.facts.values()):
            return [f"discovery {v['id']} ({sha[:10]}): the proposed fact is missing"]
    return []


# -- the trials --------------------------------------------------------------------------------------

@dataclass
class Report:
    trials: int = 0
    inconsistencies: list[str] = field(default_factory=list)
    strategies: Counter = field(default_factory=Counter)
    interrupted: Counter = field(default_factory=Counter)  # what each kill left behind
    lines: list[str] = field(default_factory=list)
    final: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)  # seconds per phase


def killed_mid(root: Path, asked: int) -> list[str]:
    """What a kill interrupted, read from what it left behind (before any recovery)."""
    found = []
    if (root / ".git" / "knomit-pending.json").exists():
        found.append("apply")
    if any((root / ".git" / n).exists() for n in ("index.lock", "knomit-index.lock", "HEAD.lock")):
        found.append("git")
    if any(not e[3:].startswith(".knomit/") for e in filter(None, git(
            root, "status", "--porcelain", "-z", "--untracked-files=all").split("\0"))):
        found.append("dirty-tree")
    if asked:
        found.append("judging")
    return found or ["clean"]


class Trials:
    def __init__(self, work: Path, seed: int, small: bool, delay_s: float, log=print):
        from messages_server import MessagesServer
        self.work, self.rng, self.log = work, random.Random(seed), log
        self.root = work / "corpus"
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.server = MessagesServer().start()
        self.env = {**os.environ, "ANTHROPIC_BASE_URL": self.server.url,
                    "ANTHROPIC_API_KEY": "sk-ant-test-crash-0000", "HF_HUB_OFFLINE": "1",
                    "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(REPO)}
        self.env.pop("KNOMIT_JUDGE_MODEL", None)
        self.env["KNOMIT_JUDGE_FIRST_READER"] = ""  # one reader: the trials count the judge model's calls
        self.zygote = Zygote(self.env)  # loads the model while the corpus is built
        build_corpus(self.root, small)
        self.server.responder = responder(planted_rules(self.root), delay_s)
        self.zygote.ready()
        self.report = Report()
        self.stored: set[str] = set()  # reply-cache keys durable at the last kill
        self.batches: list[bool] = []  # per batch the user added: does it plant a discovery?

    def close(self):
        self.zygote.close()
        self.server.close()

    def session(self, n: int) -> int:
        return self.zygote.spawn(["review", str(self.root), "--json"], self.logs / f"{n}.out", self.logs / f"{n}.err")

    def trial(self, n: int, last: bool = False) -> None:
        strategy = self.rng.choices(list(STRATEGIES), weights=list(STRATEGIES.values()))[0]
        whole_group = self.rng.random() < 0.7
        calls = self.server.calls
        pid = self.session(n)
        t0 = time.monotonic()
        status = self._kill_when(strategy, pid, calls, t0, whole_group)
        killed_at = time.monotonic() - t0
        wait_gone(pid)
        asked = self.server.requests[calls:]
        mid = killed_mid(self.root, len(asked)) if status is None else ["completed"]
        self.report.trials += 1
        self.report.strategies[strategy] += 1
        self.report.interrupted.update(mid)
        bad = [f"asked again, though its reply was stored before the kill: {r.prompt[:70]!r}..."
               for r in asked if prompt_key(r) in self.stored]
        if status is not None and os.waitstatus_to_exitcode(status) != 0:
            bad.append(f"session exited {os.waitstatus_to_exitcode(status)}: "
                       + (self.logs / f"{n}.err").read_text(errors="replace")[-400:])
        self.stored = stored_keys(self.root)
        restart = "restart: the next session"
        if self.rng.random() < 0.7 or n == 0:
            from knomit_judge.recovery import recover_corpus
            notes = recover_corpus(self.root)
            bad += check(self.root)
            restart = "restart: recovered" + (f" ({'; '.join(notes)[:90]}...)" if notes else "")
        if not bad and not last and "completed" in mid:  # caught up (and nothing left over): time for new work
            restart += f"; user adds batch {self.add_batch()}"
        line = (f"trial {n:3d} {strategy:<8} kill {'group' if whole_group else 'pid  '} at {killed_at:5.2f}s, "
                f"{len(asked):3d} call(s), left {'+'.join(mid)}; {restart}")
        self.report.lines.append(line)
        self.log(line)
        for b in bad:
            self.log(f"  INCONSISTENT: {b}")
        self.report.inconsistencies += [f"trial {n}: {b}" for b in bad]

    def add_batch(self) -> int:
        """A user commits new facts (only theirs: never what a session left), making new work."""
        n = len(self.batches)
        self.batches.append(n % 2 == 0)
        paths = write_batch(self.root, n, discovery=self.batches[-1])
        git(self.root, "add", "--", *paths)
        git(self.root, "commit", "-q", "-m", f"user: batch {n}", "--", *paths)
        return n

    def _kill_when(self, strategy: str, pid: int, calls: int, t0: float, whole_group: bool) -> int | None:
        """Kill the session at the strategy's instant; None when killed, the wait status if it ended first."""
        rng, gitdir = self.rng, self.root / ".git"
        # every draw up front, so a seed fixes the whole schedule whatever the timing
        at = {"start": rng.uniform(0, 0.4), "anytime": rng.uniform(0, 5.0)}.get(strategy)
        nth_request, after = rng.randint(1, 16), rng.uniform(0, 0.3)
        skip_applies, apply_delay = rng.choice([0, 0, 1, 2]), rng.uniform(0, 0.03)
        seen_pending, was_pending = 0, False
        deadline, fire_at = t0 + 60, None
        while time.monotonic() < deadline:
            status = self.zygote.exited()
            if status is not None:
                return status
            now = time.monotonic()
            if fire_at is None:
                if at is not None and now - t0 >= at:
                    fire_at = now
                elif strategy == "judging" and self.server.calls - calls >= nth_request:
                    fire_at = now + after
                elif strategy == "apply":
                    pending = (gitdir / "knomit-pending.json").exists()
                    if pending and not was_pending:
                        seen_pending += 1
                        if seen_pending > skip_applies:
                            fire_at = now + apply_delay
                    was_pending = pending
                elif strategy == "git" and any((gitdir / n).exists() for n in ("index.lock", "knomit-index.lock")):
                    fire_at = now
            if fire_at is not None and now >= fire_at:
                try:
                    (os.killpg if whole_group else os.kill)(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                status = self.zygote.exited(timeout=30)
                return None if os.WIFSIGNALED(status) else status
            time.sleep(0.001)
        os.killpg(pid, signal.SIGKILL)
        self.zygote.exited(timeout=30)
        return None

    def finish(self) -> None:
        """Run sessions to completion until one asks nothing and commits nothing; then the real executable, then
        the checks. (A session that asks nothing may still commit: a merge its cached replies decide rewrites
        carriers, whose new describe key the next session reads from the reply cache, and that session is not
        yet caught up.)"""
        for n in range(6):
            calls = self.server.calls
            head = git(self.root, "rev-parse", "HEAD").strip()
            pid = self.session(1000 + n)
            status = self.zygote.exited(timeout=600)
            asked = self.server.requests[calls:]
            self.report.inconsistencies += [f"final session {n}: asked again ({r.prompt[:60]!r})"
                                            for r in asked if prompt_key(r) in self.stored]
            self.stored = stored_keys(self.root)
            if os.WEXITSTATUS(status) != 0:
                self.report.inconsistencies.append(f"final session {n} exited {os.WEXITSTATUS(status)}: "
                                                   + (self.logs / f"{1000 + n}.err").read_text()[-500:])
            if not asked and git(self.root, "rev-parse", "HEAD").strip() == head:
                break
        calls = self.server.calls
        exe = Path(sys.executable).parent / "knomit-judge"
        done = subprocess.run([str(exe) if exe.exists() else "knomit-judge", "review", str(self.root), "--json"],
                              capture_output=True, text=True, env=self.env, timeout=600)
        out = json.loads(done.stdout) if done.stdout.startswith("{") else {}
        self.report.final = {"exit": done.returncode, "calls": self.server.calls - calls,
                             "states": {k: v["state"] for k, v in out.get("passes", {}).items()}}
        if done.returncode != 0 or self.server.calls != calls:
            self.report.inconsistencies.append(f"final real session: exit {done.returncode}, "
                                               f"{self.server.calls - calls} call(s): {done.stderr[-500:]}")
        self.report.inconsistencies += [f"final: {b}" for b in check(self.root)]
        self.report.inconsistencies += [f"final: {b}" for b in planted_outcomes(self.root, self.batches)]


def planted_outcomes(root: Path, batches: list[bool]) -> list[str]:
    """The crashed-and-restarted corpus reached what one uninterrupted review reaches."""
    from knomit_judge.corpus import load_corpus
    corpus = load_corpus(root)
    bad = []
    for n, discovery in enumerate(batches):
        if corpus.carriers.get(f"loop-{n}-a") and corpus.carriers.get(f"loop-{n}-b"):
            bad.append(f"batch {n}: alias loop-{n}-a / loop-{n}-b not merged")
        if sum(f.active and re.match(rf"Twin claim {n}[:,]", f.title) is not None for f in corpus.facts.values()) != 1:
            bad.append(f"batch {n}: twin claims not merged")
        if discovery and not any(f.title == f"Chain {n} closes on itself and cannot start" for f in corpus.facts.values()):
            bad.append(f"batch {n}: chain {n} not discovered")
    rules = planted_rules(root)
    for pass_name, need, reply in rules:
        if pass_name == "alias" and reply.get("same"):
            pair = [s.split('"')[3] for s in need]
            if all(corpus.carriers.get(m) for m in pair):
                bad.append(f"alias {pair} not merged")
        if pass_name == "prune" and reply["decision"] != "distinct":
            titles = [json.loads(s) for s in need]
            active = [f for f in corpus.facts.values() if f.title in titles and f.active]
            if len(active) != 1:
                bad.append(f"prune {titles}: {len(active)} active")
    if any(r["entails"] for p, _, r in rules if p == "discovery") and not any(
            f.path.startswith("facts/discovered/") for f in corpus.facts.values()):
        bad.append("discovery: nothing proposed")
    return bad


# -- kills during the sync with a shared remote -------------------------------------------------------

SYNC = '\n[git]\nremote = "origin"\nbranch = "main"\n'
# step -> (the hook, where: "clone" or "remote", its body's condition); the hook says it was reached, then sleeps
SYNC_STEPS = {
    "fetch": ("reference-transaction", "clone", '[ "$1" = prepared ] && grep -q " refs/remotes/origin/main$"'),
    "merge": ("prepare-commit-msg", "clone", "[ -f .git/MERGE_HEAD ]"),
    "merge-landed": ("reference-transaction", "clone",
                     '[ "$1" = committed ] && [ -f .git/MERGE_HEAD ] && grep -q " refs/heads/main$"'),
    "fast-forward": ("reference-transaction", "clone", '[ "$1" = prepared ] && [ -f .git/knomit-merge.json ] && '
                                                       '[ ! -f .git/MERGE_HEAD ] && grep -q " refs/heads/main$"'),
    "push": ("pre-push", "clone", "true"),
    "pushed": ("post-receive", "remote", "true"),
}


def sync_kills(work: Path, log=print, steps=tuple(SYNC_STEPS)) -> Report:
    """Kill a session at each step of its sync; the next session must recover, merge and push everything."""
    from messages_server import MessagesServer
    report = Report()
    server = MessagesServer().start()
    env = {**os.environ, "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-test-crash-0000",
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(REPO)}
    env.pop("KNOMIT_JUDGE_MODEL", None)
    env["KNOMIT_JUDGE_FIRST_READER"] = ""
    zygote = Zygote(env)
    try:
        seed, remote, root, writer = work / "seed", work / "kb.git", work / "reviewer", work / "writer"
        (work / "logs").mkdir(parents=True, exist_ok=True)
        build_corpus(seed, small=True)
        (seed / "knomit-judge.toml").write_text(CONFIG + SYNC, encoding="utf-8")
        git(seed, "commit", "-q", "-am", "config: the shared remote")
        git(work, "clone", "-q", "--bare", str(seed), str(remote))
        git(work, "clone", "-q", str(remote), str(root))
        git(work, "clone", "-q", str(remote), str(writer))
        server.responder = responder(planted_rules(root), 0.01)
        zygote.ready()
        for n, step in enumerate(steps):
            git(writer, "pull", "-q", "--no-rebase", "origin", "main")
            (writer / "facts" / "writer").mkdir(parents=True, exist_ok=True)
            (writer / "facts" / "writer" / f"w{n}.md").write_text(
                f"---\ntitle: {quoted(f'Writer note {n}: a {WORDS[n]} outlives its reason')}\nmotifs: [writer-{n}]\n"
                f"confidence: 0.5\nsources: [writer-{n}]\n---\nThe {WORDS[n]} stays after the cause is gone.\n")
            git(writer, "add", "-A")
            git(writer, "commit", "-q", "-m", f"writer: note {n}")
            git(writer, "push", "-q", "origin", "HEAD:main")
            theirs = git(writer, "rev-parse", "HEAD").strip()
            if step != "fast-forward":  # a local commit makes the merge a real one
                git(root, "add", "--", *write_batch(root, 100 + n, discovery=False))
                git(root, "commit", "-q", "-m", f"user: batch {100 + n}")
            mine = git(root, "rev-parse", "HEAD").strip()
            name, where, when = SYNC_STEPS[step]
            flag = work / f"reached-{step}"
            hook = (root / ".git" if where == "clone" else remote) / "hooks" / name
            hook.parent.mkdir(exist_ok=True)
            hook.write_text(f'#!/bin/sh\nif {when}; then touch "{flag}"; sleep 120; fi\nexit 0\n')
            hook.chmod(0o755)
            pid = zygote.spawn(["review", str(root), "--json"], work / "logs" / f"{step}.out",
                               work / "logs" / f"{step}.err")
            deadline, status = time.monotonic() + 120, None
            while not flag.exists() and time.monotonic() < deadline and status is None:
                status = zygote.exited(timeout=0.05)
            bad = []
            if status is None:
                os.killpg(pid, signal.SIGKILL)
                zygote.exited(timeout=30)
            else:
                bad.append(f"the session ended before the kill at {step}")
            hook.unlink()
            wait_gone(pid)
            left = [x for x in ("MERGE_HEAD", "knomit-merge.json") if (root / ".git" / x).exists()]
            pid = zygote.spawn(["review", str(root), "--json"], work / "logs" / f"{step}-next.out",
                               work / "logs" / f"{step}-next.err")
            status = zygote.exited(timeout=600)
            out = (work / "logs" / f"{step}-next.out").read_text()
            sync = json.loads(out).get("sync", {}) if out.startswith("{") else {}
            if os.waitstatus_to_exitcode(status) != 0 or sync.get("state") != "synced" or sync.get("unpushed"):
                bad.append(f"next session: exit {os.waitstatus_to_exitcode(status)}, sync {sync}: "
                           + (work / "logs" / f"{step}-next.err").read_text()[-400:])
            bad += [f".git/{x} left behind" for x in ("MERGE_HEAD", "knomit-merge.json")
                    if (root / ".git" / x).exists()]
            bad += check(root)
            head = git(root, "rev-parse", "HEAD").strip()
            if git(remote, "rev-parse", "main").strip() != head:
                bad.append("the remote does not hold the reviewer's HEAD")
            for sha in (mine, theirs):
                if subprocess.run(["git", "merge-base", "--is-ancestor", sha, "main"], cwd=remote).returncode:
                    bad.append(f"commit {sha[:10]} lost")
            report.trials += 1
            report.strategies[f"sync:{step}"] += 1
            report.interrupted.update(left or ["nothing-left"])
            line = (f"sync kill at {step:<13} left {'+'.join(left) or 'no merge state'}; "
                    f"next session {sync.get('state')}")
            report.lines.append(line)
            log(line)
            for b in bad:
                log(f"  INCONSISTENT: {b}")
            report.inconsistencies += [f"sync {step}: {b}" for b in bad]
    finally:
        zygote.close()
        server.close()
    return report


def run_trials(work: Path, trials: int, seed: int, small: bool = True, delay_s: float = 0.2, log=print) -> Report:
    start = time.monotonic()
    t = Trials(work, seed, small, delay_s, log)
    try:
        t.report.timings["start-up"] = time.monotonic() - start
        for n in range(trials):
            t.trial(n, last=n >= trials - 3)  # no new work at the very end: the finish would have to judge it
        t.report.timings["trials"] = time.monotonic() - start - t.report.timings["start-up"]
        t.finish()
        t.report.timings["finish"] = time.monotonic() - start - sum(t.report.timings.values())
    finally:
        t.close()
    return t.report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--small", action="store_true", help="the planted subset of the demo corpus")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds the judge takes per call")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    parser.add_argument("--sync", action="store_true", help="kill at every step of the sync with a shared remote")
    parser.add_argument("--zygote", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.zygote:
        zygote_main()
        return 0
    work = args.keep or Path(tempfile.mkdtemp(prefix="knomit-crash-"))
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
    start = time.monotonic()
    try:
        report = sync_kills(work) if args.sync else run_trials(work, args.trials, args.seed, args.small, args.delay)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{report.trials} trials in {time.monotonic() - start:.0f}s; kills by strategy: "
          f"{dict(report.strategies)}; left behind: {dict(report.interrupted)}; final: {report.final}; "
          f"seconds: { {k: round(v) for k, v in report.timings.items()} }")
    for line in report.inconsistencies:
        print(f"INCONSISTENT {line}")
    print(f"inconsistencies: {len(report.inconsistencies)}")
    return 1 if report.inconsistencies else 0


if __name__ == "__main__":
    sys.exit(main())
