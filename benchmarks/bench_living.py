#!/usr/bin/env python3
"""bench_living: judge attention on a living knowledge base, one default review per day (issue 21).

    .venv/bin/python benchmarks/bench_living.py [--days N] [--extra 2] [--keep DIR] [--json] [--set "KEY = VALUE"]
    .venv/bin/python benchmarks/bench_living.py --synthetic [--facts 10000] [--days 4] [--seed 0]
    .venv/bin/python benchmarks/bench_living.py --remote [--days N] [--extra 2]

Real history (the default): ../shared/data/aekb-history.bundle (skipped when absent), the agent branch
replayed day by day. The writer's state of each day is the branch's last commit of that day (its own
time zone) with knomit's reviewer taken out: the facts its standing dedups removed are put back and the
front-matter lines its `dedup: merge` commits added to the survivor are restored (a dedup that a later
`learn: Restore ...` commit undid is left to the writer, who restored the fact himself). That state is
committed on a `writer` branch of a scratch corpus and merged into the reviewed branch as a writer's
branch merges (`git merge -X theirs`; a fact the reviewer retired and the writer edited comes back: the
writer's edit wins). Then one default `knomit-judge review --json` runs, through the real CLI and the
real SDK, against a loopback Messages API judge (tests/messages_server.py) that answers from labels only:
  prune: merge for the five standing dedup pairs (read from the bundle's `dedup: merge A into B` commits),
         distinct for everything else; the judge tells facts apart by the titles in its evidence;
  alias: same for the entity spellings labelled in benchmarks/data/aekb-entity-aliases.tsv (spellings and
         our judgement only), different for everything else;
  discovery: no;
  describe (one line per spelling): the recorded lines of benchmarks/data/aekb-describe-replies.jsonl, a
         model's (benchmarks/data/describe-replies.md), priced like any call; --no-lines: no line at all.
Usage is the prompt's characters / 4 plus the reply contract's overhead, priced at list prices for the default
models (claude-sonnet-5-5 judges, claude-haiku-5-5 writes the lines); the same calls are then priced for each
current model as the judge, with and without the thinking judge.effort is expected to spend (models.py).
The corpus reviews entity spellings (`[corpus] motif_keys = ["motifs", "entities"]`, as init suggests
for a knomit KB); every other key is the default `init` writes.

--remote: the same replay through a shared remote (issue 28): a bare repository served by `git daemon`
on 127.0.0.1, `[git] remote = "origin"`. The writer, on its own clone, merges each day's state into the
remote branch as it was before that day's session (`-X theirs`, as above) and pushes it while the
session runs: when the reviewer's first push of the session is about to go out (its pre-push hook), or
after the session when it pushed nothing. So the reviewer's decisions meet the writer's concurrent edits
in the reviewer's own merge (the writer's hunk wins; the decisions it overrode are named), and a day's
edits are reviewed by the next session. The reviewer runs in a fresh clone (no db: an ephemeral runner)
every third day and in its kept clone otherwise. Printed beside the usual figures: the writer edits that
overrode a decision, and what became of each by the end.

--synthetic: gen_corpus.py's mechanism corpus at scale: --facts facts on day 1, then each day 1% of them
new or edited (half each), with planted paraphrase duplicates arriving over the days; the judge answers
from the generator's truth (its alias and duplicate pairs). Same figures.

Printed per day: facts, questions, calls, $, pass states and decisions; in total: $, $ per resolution,
calls per question, sessions from a duplicate's appearance to its merge, calls on the unchanged corpus
in --extra sessions after the last day, and `knomit-judge rebuild --check` when the CLI has it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from messages_server import MessagesServer, refusal, tool  # noqa: E402
from messages_server import status as http_status  # noqa: E402

from knomit_judge.config import load_config  # noqa: E402
from knomit_judge.corpus import load_corpus  # noqa: E402

BUNDLE = ROOT.parent / "shared" / "data" / "aekb-history.bundle"
if not BUNDLE.exists():  # a worktree sits one level deeper than the clone
    BUNDLE = Path("/work/shared/data/aekb-history.bundle")
AGENT = "origin/agent/mindev.local-8ef0cd32"
ALIASES = ROOT / "benchmarks" / "data" / "aekb-entity-aliases.tsv"
TOOL_OVERHEAD = 313  # input tokens the API adds for the reply contract (a forced tool; a schema, about as many)
JUDGES = ("claude-haiku-5-5", "claude-sonnet-5-5", "claude-opus-5-5", "claude-sonnet-4-6")  # current, 2026-12-05
FIRST_READER = "claude-haiku-5-5"  # judge.first_reader's default
DEFAULTS = {"alias": {"same": False, "mechanism": ""}, "prune": {"decision": "distinct", "rationale": "They make "
            "different claims."}, "discovery": {"entails": False, "fact": None, "rationale": "Nothing new follows "
            "from the group."}}
QUIET = 3  # a day on which the writer added or edited at most this many facts is a quiet day


def git(cwd: Path, *args: str, env: dict | None = None, check: bool = True, data: bytes | None = None) -> str:
    r = subprocess.run(["git", "-c", "user.name=writer", "-c", "user.email=writer@localhost", "-c",
                        "commit.gpgsign=false", "-c", "gc.auto=0", "-C", str(cwd), *args],
                       capture_output=True, input=data, env={**os.environ, **(env or {})})
    if check and r.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {r.stderr.decode(errors='replace')}")
    return r.stdout.decode(errors="replace")


# -- the labelled judge ---------------------------------------------------------------------------------
class Spellings:
    """Alias labels as groups: two spellings are one thing when a chain of labelled pairs joins them."""

    def __init__(self, pairs) -> None:
        self.parent: dict[str, str] = {}
        for a, b in pairs:
            self.parent[self.find(a)] = self.find(b)

    def find(self, x: str) -> str:
        while self.parent.setdefault(x, x) != x:
            x = self.parent[x]
        return x

    def same(self, a: str, b: str) -> bool:
        return a in self.parent and b in self.parent and self.find(a) == self.find(b)


def read_alias_labels(path: Path) -> list[tuple[str, str]]:
    """The `same` rows of a labels TSV (spelling_a, spelling_b, judgement, note); # starts a comment."""
    pairs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) < 3 or cols[2] not in ("same", "different"):
            raise SystemExit(f"{path}:{n}: expected spelling_a<TAB>spelling_b<TAB>same|different[<TAB>note]")
        if cols[2] == "same":
            pairs.append((cols[0], cols[1]))
    return pairs


@dataclass
class LabelJudge:
    """Answers Messages requests from labels alone: the evidence's spellings or titles, looked up.

    Describe requests (one line per spelling) are answered from recorded lines (`lines`: spelling -> line,
    a model's, benchmarks/data/aekb-describe-replies.jsonl), priced like every call; none without them.
    """

    spellings: Spellings
    duplicates: set  # frozensets of two fact paths
    titles: dict = field(default_factory=dict)  # title -> paths, refreshed from the corpus before each session
    asked: dict = field(default_factory=lambda: defaultdict(int))
    questions: set = field(default_factory=set)  # this session's distinct questions that reached the judge
    lines: dict = field(default_factory=dict)
    usage: list = field(default_factory=list)  # (pass, model, tokens in, tokens out) of every call answered
    # a worse first reader (--first-misses): the default, every time it reads them, on these true pairs (frozensets of
    # two fact paths or two spellings): 4 of the 5 dedups and 8 of the labelled alias pairs
    first_misses: set = field(default_factory=set)
    first_down: set = field(default_factory=set)  # sessions (1-based) in which the first reader answers 529
    first_refuses: set = field(default_factory=set)  # true pairs whose questions the first reader refuses
    session_no: int = 0  # the session being run, 1-based
    first_true: dict = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # pass -> [true read, said yes]
    true_seen: dict = field(default_factory=lambda: defaultdict(int))  # true pairs the first reader was asked, by pass
    missed: list = field(default_factory=list)  # (pass, subject) the first reader answered the default on
    alias_pairs: set = field(default_factory=set)  # every alias pair asked, as a frozenset of its two spellings
    described: int = 0  # spellings asked for a line

    def describe(self, req, n):
        m = re.search(r"<evidence>\n(.*)\n</evidence>", req.prompt, re.S)
        asked = [s["spelling"] for s in json.loads(m.group(1))["spellings"]] if m else []
        self.asked["describe"] += 1
        self.described += len(asked)
        answer = {"lines": [{"spelling": s, "mechanism": self.lines[s]} for s in asked if s in self.lines]}
        return self.reply("describe", req, answer)

    def reply(self, kind: str, req, answer: dict):
        chars = len(req.system) + len(req.prompt) + len(json.dumps(req.body.get("tools") or []))
        usage = (chars // 4 + TOOL_OVERHEAD, len(json.dumps(answer)) // 4 + 30)
        self.usage.append((kind, req.body.get("model"), *usage))
        return tool(answer, input_tokens=usage[0], output_tokens=usage[1])

    def refresh(self, corpus: Path) -> None:
        titles = defaultdict(set)
        for fact in load_corpus(corpus, layout=load_config(corpus).corpus).facts.values():
            titles[fact.title].add(fact.path)
        self.titles = titles

    def answer(self, kind: str, ev: dict) -> dict:
        if kind == "alias":
            self.alias_pairs.add(frozenset((ev["motif_a"]["spelling"], ev["motif_b"]["spelling"])))
            same = self.spellings.same(ev["motif_a"]["spelling"], ev["motif_b"]["spelling"])
            return {"same": True, "mechanism": "Both spellings name the same thing."} if same else \
                {"same": False, "mechanism": ""}
        if kind == "prune":
            a, b = (self.titles.get(ev[k]["title"], ()) for k in ("fact_a", "fact_b"))
            if any(frozenset((x, y)) in self.duplicates for x in a for y in b):
                return {"decision": "merge", "rationale": "Both state the same claim."}
            return {"decision": "distinct", "rationale": "They make different claims."}
        return {"entails": False, "fact": None, "rationale": "Nothing new follows from the group."}

    def __call__(self, req, n):
        body = req.body
        kind = ((body.get("tool_choice") or {}).get("name") or "").removesuffix("_reply")
        m = re.search(r"<evidence>\n(.*)\n</evidence>", req.prompt, re.S)
        ev = json.loads(m.group(1)) if m else {}
        if kind not in ("alias", "prune", "discovery"):  # a text-only request: read the pass from the prompt
            kind = "alias" if "motif_a" in ev else "prune" if "fact_a" in ev else "discovery"
        self.asked[kind] += 1
        # one question, whichever order it is asked in: calls per question is what one order saves
        self.questions.add((kind, frozenset(json.dumps(v, sort_keys=True) for v in ev.values())))
        answer = self.answer(kind, ev)
        if req.body.get("model") != FIRST_READER or kind not in ("alias", "prune"):
            return self.reply(kind, req, answer)
        if self.session_no in self.first_down:
            return http_status(529, message="Overloaded")  # a first reader down for the day: the SDK sees overloaded_error
        pair = self.pair_of(kind, ev)
        if pair & self.first_refuses:
            return refusal()
        if answer != DEFAULTS[kind]:
            self.first_true[kind][0] += 1
            if pair & self.first_misses:
                self.missed.append(f"{kind}: {' / '.join(sorted(self.names(kind, ev)))}")
                answer = DEFAULTS[kind]
            else:
                self.first_true[kind][1] += 1
        return self.reply(kind, req, answer)

    def names(self, kind: str, ev: dict) -> list[str]:
        return [ev[k]["spelling" if kind == "alias" else "title"] for k in
                (("motif_a", "motif_b") if kind == "alias" else ("fact_a", "fact_b"))]

    def pair_of(self, kind: str, ev: dict) -> set:
        """The true pairs (as the sets above hold them) this question asks about."""
        if kind == "alias":
            return {frozenset(self.names(kind, ev))}
        a, b = (self.titles.get(t, ()) for t in self.names(kind, ev))
        return {frozenset((x, y)) for x in a for y in b}


# -- the replay ------------------------------------------------------------------------------------------
@dataclass
class Day:
    label: str
    files: dict  # path -> bytes: the writer's whole tree that day
    stamp: str  # git date for the writer's commit
    session_at: datetime  # when that day's review runs: after the writer's day has ended


@dataclass
class Row:
    day: str
    facts: int
    changed: int
    questions: int  # judged, as review --json counts them (reply-cache hits included)
    asked: int  # distinct questions that reached the judge (one or both orders)
    calls: int
    cost: float | None
    states: dict
    resolved: dict
    commits: int
    merged: list
    seconds: float
    applied: dict = field(default_factory=dict)  # decisions committed (a yes whose rewrite was refused resolved nothing)
    lines_written: int = 0  # describe lines written this session
    lines_usd: float | None = 0.0  # what they cost (in `cost`, too)


# The replay runs in minutes what took weeks, so every session must run on its own day, or spend kept per UTC day
# and month (budget.max_usd_per_day / _per_month) would add the whole replay into one day. The CLI runs as its
# console script does, with datetime.now() (and the git dates of its commits) moved to the replayed day.
CLOCK = """
import datetime as _dt, os, sys
_real = _dt.datetime
_shift = _real.fromisoformat(os.environ.get("KNOMIT_BENCH_NOW") or _real.now(_dt.timezone.utc).isoformat()) \
    - _real.now(_dt.timezone.utc)
class _ReplayClock(_real):
    @classmethod
    def now(cls, tz=None):
        t = _real.now(_dt.timezone.utc) + _shift
        return t.astimezone(tz) if tz else t.astimezone().replace(tzinfo=None)
    @classmethod
    def utcnow(cls):
        return (_real.now(_dt.timezone.utc) + _shift).replace(tzinfo=None)
if os.environ.get("KNOMIT_BENCH_NOW"):
    _dt.datetime = _ReplayClock
from knomit_judge.cli import main
sys.exit(main())
"""


def cli(*args: str, env: dict, at: datetime | None = None) -> subprocess.CompletedProcess:
    """The real command line (its console-script entry point) on this tree's code, its clock at `at`."""
    when = {} if at is None else {"KNOMIT_BENCH_NOW": at.isoformat(), "GIT_AUTHOR_DATE": at.isoformat(),
                                  "GIT_COMMITTER_DATE": at.isoformat()}
    return subprocess.run([sys.executable, "-c", CLOCK, *args], capture_output=True, text=True,
                          env={**env, **when})


def apply_settings(text: str, settings) -> str:
    """A knomit-judge.toml init wrote, with each `section.key = value` replacing the line init wrote for it."""
    for setting in settings:
        key, value = (x.strip() for x in setting.split("=", 1))
        section, _, name = key.rpartition(".")  # `section.key = value`: within that section only
        start = re.search(rf"^\[{re.escape(section)}\]", text, re.M) if section else None
        lo = start.end() if start else 0
        end = re.search(r"^\[", text[lo:], re.M) if start else None
        hi = lo + end.start() if end else len(text)
        part, n = re.subn(rf"^{re.escape(name)} = .*$", f"{name} = {value}", text[lo:hi], count=1, flags=re.M)
        text = text[:lo] + part + text[hi:]
        if not n:
            raise SystemExit(f"--set {setting!r}: init wrote no line for {key!r}")
    return text


class Replay:
    """A scratch corpus: a `writer` branch taking each day's state, merged into the reviewed `main`."""

    def __init__(self, work: Path, judge: LabelJudge, server: MessagesServer, motif_keys: list[str] | None,
                 settings: list[str] = (), remote: bool = False, fresh_every: int = 3) -> None:
        self.settings = list(settings) + ['remote = "origin"'] * remote
        self.remote = Served(work, fresh_every) if remote else None
        self.work = work
        self.root, self.wt = work / "corpus", work / "writer"
        self.judge, self.server, self.motif_keys = judge, server, motif_keys
        self.state: dict = {}
        self.exits: list[int] = []  # each review's exit code
        self.handed: list[dict] = []  # each review's questions handed from the first reader, by pass
        self.suspended: list[list] = []  # each review's passes whose first reader was suspended
        self.env = {**os.environ, "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-bench-dummy",
                    "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.env.pop("KNOMIT_JUDGE_MODEL", None)

    def write(self, day: Day) -> int:
        """Commit the day's writer tree on `writer`; return how many files it added or changed."""
        changed = 0
        for path in set(self.state) - set(day.files):
            (self.wt / path).unlink()
        for path, data in day.files.items():
            if self.state.get(path) != data:
                changed += path.endswith(".md") and path.startswith(("kb/", "facts/"))  # facts only
                (self.wt / path).parent.mkdir(parents=True, exist_ok=True)
                (self.wt / path).write_bytes(data)
        self.state = dict(day.files)
        git(self.wt, "add", "-A")
        env = {"GIT_AUTHOR_DATE": day.stamp, "GIT_COMMITTER_DATE": day.stamp}
        git(self.wt, "commit", "-q", "--allow-empty", "-m", f"writer: {day.label}", env=env)
        return changed

    def start(self, day: Day) -> int:
        self.root.mkdir(parents=True)
        git(self.root, "init", "-q", "-b", "main")
        git(self.root, "commit", "-q", "--allow-empty", "-m", "empty")
        git(self.root, "worktree", "add", "-q", "-b", "writer", str(self.wt), "main")
        changed = self.write(day)
        git(self.root, "merge", "-q", "--ff-only", "writer")
        r = cli("init", str(self.root), env=self.env, at=day.session_at)
        if r.returncode:
            raise RuntimeError(f"knomit-judge init: {r.stderr}")
        if self.motif_keys or self.settings:
            toml = self.root / "knomit-judge.toml"
            text = toml.read_text()
            if self.motif_keys:
                text = re.sub(r"^motif_keys = \[[^\]]*\]", "motif_keys = " + json.dumps(self.motif_keys),
                              text, count=1, flags=re.M)
            text = apply_settings(text, self.settings)
            toml.write_text(text)
            git(self.root, "commit", "-q", "-am", "bench: review entity spellings too")
        if self.remote:
            self.remote.start(self.root)
        return changed

    def merge(self, day: Day) -> int:
        """The writer's day merged into the reviewed corpus; a conflict goes the writer's way.

        With a remote the writer merges it into the remote branch as it is now, on its own clone, and pushes
        it while the next session runs (Served.pending)."""
        changed = self.write(day)
        into = self.root
        if self.remote:
            into = self.remote.writer_base(self.root)
        env = {"GIT_AUTHOR_DATE": day.stamp, "GIT_COMMITTER_DATE": day.stamp}
        r = subprocess.run(["git", "-c", "user.name=writer", "-c", "user.email=writer@localhost", "-C",
                            str(into), "merge", "-q", "--no-edit", "-X", "theirs", "writer"],
                           capture_output=True, text=True, env={**os.environ, **env})
        if r.returncode:
            # modify/delete: the reviewer retired a fact the writer then edited; the writer's edit wins
            # (any other conflict left, e.g. a rename against an edit, is settled the same way: the day's file)
            unmerged = {e.split("\t", 1)[1] for e in git(into, "ls-files", "-u", "-z").split("\0") if "\t" in e}
            for path in sorted(unmerged):
                if path in day.files:
                    (into / path).parent.mkdir(parents=True, exist_ok=True)
                    (into / path).write_bytes(day.files[path])
                    git(into, "add", "--", path)
                else:
                    git(into, "rm", "-q", "-f", "--", path)
            git(into, "commit", "-q", "--no-edit", env=env)
        if self.remote:
            self.remote.pending.touch()  # pushed by the reviewer's pre-push hook, or after the session
        return changed

    @property
    def view(self) -> Path:
        """Where the reviewed branch is read: the corpus, or with a remote a clone that follows it."""
        return self.remote.view if self.remote else self.root

    def session(self, label: str, changed: int, pairs: dict, at: datetime, n: int = 0) -> Row:
        root = self.root
        if self.remote and self.remote.fresh_every and n % self.remote.fresh_every == self.remote.fresh_every - 1:
            # every third day (--fresh-every) an ephemeral runner: a fresh clone, no db
            root = self.remote.fresh(self.work / f"runner-{n}")
        elif self.remote:
            self.remote.hook(root)
        # the judge knows the facts by their titles: with a remote, as the remote has them (the clone merges it)
        self.judge.refresh(self.view if self.remote else root)
        self.judge.questions = set()
        self.judge.session_no = n + 1
        before = self.server.calls + len(self.server.describe_requests)
        t0 = time.perf_counter()
        r = cli("review", str(root), "--json", env=self.env, at=at)
        seconds = time.perf_counter() - t0
        if r.returncode not in (0, 1):
            raise RuntimeError(f"knomit-judge review exited {r.returncode}: {r.stderr[-2000:]}")
        self.exits.append(r.returncode)
        out = json.loads(r.stdout)
        self.handed.append({k: p.get("handed_over", 0) for k, p in out["passes"].items() if p.get("handed_over")})
        self.suspended.append([k for k, p in out["passes"].items() if p.get("first_reader_state") == "suspended"])
        if self.remote:
            self.remote.after(out.get("sync") or {}, label, root)
        passes = out["passes"]
        facts = (out.get("corpus") or {}).get("read", 0)
        merged = [name for name, (a, b) in pairs.items() if retired(root / a) or retired(root / b)]
        describe = passes.pop("describe", {})  # the describe step's line: lines, not questions
        if root != self.root:
            shutil.rmtree(root, ignore_errors=True)
        return Row(label, facts, changed, sum(p.get("judged", 0) for p in passes.values()), len(self.judge.questions),
                   self.server.calls + len(self.server.describe_requests) - before,
                   out.get("cost_usd"), {k: p["state"] for k, p in passes.items()},
                   {k: p.get("resolved", 0) for k, p in passes.items()}, len(out.get("commits", [])), merged, seconds,
                   {k: p.get("applied", 0) for k, p in passes.items()}, describe.get("written", 0),
                   describe.get("cost_usd", 0.0))


HOOK = """#!/bin/sh
# bench_living --remote: the writer's day goes out while the reviewer's session is about to push
if [ -e "{pending}" ]; then
  rm -f "{pending}"
  env -u GIT_DIR -u GIT_WORK_TREE -u GIT_INDEX_FILE -u GIT_PREFIX git -C "{writer}" push -q origin HEAD:main >&2
fi
exit 0
"""


class Served:
    """--remote: a bare repository served by git daemon, the writer's clone, and the reviewer's clones."""

    def __init__(self, work: Path, fresh_every: int = 3) -> None:
        self.work, self.fresh_every = work, fresh_every
        self.bare, self.writer, self.view = work / "served" / "kb.git", work / "writer-clone", work / "view"
        self.pending = work / "writer-pending"
        self.daemon = None
        self.url = ""
        self.overridden: list[dict] = []  # {"session", "verdict", "paths"}
        self.states: dict[str, int] = defaultdict(int)

    def start(self, root: Path) -> None:
        """Serve the corpus made on day 1; the reviewer's kept clone is `root` itself, now tracking it."""
        import socket
        self.bare.parent.mkdir(parents=True)
        git(self.bare.parent, "clone", "-q", "--bare", str(root), str(self.bare))
        git(self.bare, "config", "core.logAllRefUpdates", "true")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
                                        f"--base-path={self.bare.parent}", "--listen=127.0.0.1", f"--port={port}",
                                        str(self.bare.parent)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"git://127.0.0.1:{port}/kb.git"
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        git(root, "remote", "add", "origin", self.url)
        git(root, "fetch", "-q", "origin")
        git(root, "branch", "-q", "-u", "origin/main", "main")
        git(self.work, "clone", "-q", self.url, str(self.writer))
        git(self.work, "clone", "-q", self.url, str(self.view))

    def writer_base(self, root: Path) -> Path:
        """The writer's clone at the remote branch as it is now, with the day's `writer` branch fetched."""
        git(self.writer, "fetch", "-q", "origin")
        git(self.writer, "checkout", "-q", "-B", "main", "origin/main")
        git(self.writer, "fetch", "-q", str(root), "+writer:writer")
        return self.writer

    def hook(self, clone: Path) -> None:
        hook = clone / ".git" / "hooks" / "pre-push"
        hook.write_text(HOOK.format(pending=self.pending, writer=self.writer))
        hook.chmod(0o755)

    def fresh(self, where: Path) -> Path:
        git(self.work, "clone", "-q", self.url, str(where))
        self.hook(where)
        return where

    def after(self, sync: dict, label: str, root: Path) -> None:
        """After a session: the writer's day out if the session pushed nothing; the view brought up to date."""
        if self.pending.exists():
            self.pending.unlink()
            git(self.writer, "push", "-q", "origin", "HEAD:main")
        self.states[sync.get("state") or "none"] += 1
        for o in sync.get("overridden", []):
            self.overridden.append({"session": label, **o, **verdict_of(root, o["verdict"])})
        git(self.view, "fetch", "-q", "origin")
        git(self.view, "reset", "-q", "--hard", "origin/main")

    def close(self) -> None:
        if self.daemon:
            self.daemon.terminate()
            self.daemon.wait(10)

    def report(self, layout_root: Path) -> dict:
        """Every branch update a fast-forward; what became of each overridden decision by the end."""
        updates = git(self.bare, "reflog", "show", "--format=%H", "refs/heads/main").split()
        non_ff = sum(subprocess.run(["git", "-C", str(self.bare), "merge-base", "--is-ancestor", old, new]).returncode
                     != 0 for new, old in zip(updates, updates[1:]))
        corpus = load_corpus(self.view, layout=load_config(self.view).corpus)
        for o in self.overridden:
            a, b = o.get("a"), o.get("b")
            if o.get("pass") == "alias":
                both = a in corpus.carriers and b in corpus.carriers
                o["outcome"] = "both spellings stand" if both else "merged again (restated without a call)"
            elif o.get("pass") in ("prune", "exact"):
                gone = [p for p in (a, b) if p and retired(self.view / p)]
                o["outcome"] = f"retired again: {', '.join(gone)}" if gone else "both facts stand"
            else:
                o["outcome"] = "?"
        return {"branch_updates": len(updates), "non_fast_forward": non_ff, "sync_states": dict(self.states),
                "overridden": self.overridden}


def verdict_of(root: Path, vid: str) -> dict:
    """The pass and subject of a journalled verdict."""
    for path in (root / ".knomit" / "verdicts").glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if vid in line:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("id") == vid:
                    subject = record.get("subject") or {}
                    return {"pass": record.get("pass"), "a": subject.get("a"), "b": subject.get("b"),
                            "answer": record.get("answer")}
    return {}


def retired(path: Path) -> bool:
    """Gone (retract = "delete") or marked `status: retracted` in its front matter (retract = "status")."""
    if not path.exists():
        return True
    text = path.read_text(encoding="utf-8", errors="replace")
    front = text[4:].split("\n---\n", 1)[0] if text.startswith("---\n") else ""
    return re.search(r"^status:\s*retracted\s*$", front, re.M) is not None


def as_run(usage: list) -> dict:
    """The replay's calls at list prices as they were made: dollars by pass and model."""
    from knomit_judge.config import Config
    config = Config()
    out = defaultdict(float)
    for kind, model, tin, tout in usage:
        out[f"{kind} {model}"] += config.price(model).usd(tin, tout)
    return {k: round(v, 4) for k, v in sorted(out.items())}


def by_model(usage: list) -> list[dict]:
    """The replay's calls priced with each current model as the judge (first-reader and describe calls at their
    own model's price): by pass, without and with thinking."""
    from knomit_judge.config import Config
    from knomit_judge.models import THINKING_EXPECTED
    config = Config()
    out = []
    for model in JUDGES:
        per, thinking = defaultdict(float), 0.0
        for kind, asked, tin, tout in usage:
            own = kind == "describe" or asked == FIRST_READER
            price = config.price(asked if own else model)
            per[kind] += price.usd(tin, tout)
            # every current model but Sonnet 4.6 thinks unless told not to; describe requests think at the same effort
            if own or model != "claude-sonnet-4-6":
                thinking += price.usd(tin, tout + THINKING_EXPECTED["low"]) - price.usd(tin, tout)
        total = sum(per.values())
        out.append({"judge": model, "usd": round(total, 4), "usd_thinking": round(total + thinking, 4),
                    "by_pass": {k: round(v, 4) for k, v in sorted(per.items())}})
    return out


def replay(days: list[Day], judge: LabelJudge, pairs: dict, extra: int, motif_keys, keep: Path | None,
           settings: list[str] = (), remote: bool = False, fresh_every: int = 3) -> dict:
    """Run the whole replay; print a row per session and the totals; return the figures."""
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="knomit-living-", dir=keep))
    server = MessagesServer(judge).start()
    server.describer = judge.describe
    rows: list[Row] = []
    appeared: dict[str, int] = {}
    merged_at: dict[str, int] = {}
    live_again: set[str] = set()  # merged pairs the writer brought back
    merged_again: dict[str, int] = defaultdict(int)
    rp = None
    ever: set = set()
    try:
        rp = Replay(tmp, judge, server, motif_keys, settings, remote, fresh_every)
        print(f"{'day':<11} {'facts':>5} {'new/ed':>6} {'questions':>9} {'asked':>5} {'calls':>6} {'$':>8}  states "
              "(alias/prune/discovery)   resolved a/p/d  commits", flush=True)
        for i, day in enumerate(days + [None] * extra):
            if day is None:
                label, changed = f"+{i - len(days) + 1} same", 0
                at = days[-1].session_at + timedelta(days=i - len(days) + 1)
            else:
                at = day.session_at
                changed = rp.start(day) if i == 0 else rp.merge(day)
                label = day.label
                for name, (a, b) in pairs.items():
                    if name not in appeared and a in day.files and b in day.files:
                        appeared[name] = i
            # a merged pair whose retired fact a writer then edited is back (the writer's edit wins): watch it again
            back = [k for k in merged_at if k not in live_again and not any(retired(rp.view / p) for p in pairs[k])]
            live_again.update(back)
            live = {k: v for k, v in pairs.items() if k in appeared and (k not in merged_at or k in live_again)}
            row = rp.session(label, changed, live, at, i)
            ever.update(load_corpus(rp.view, layout=load_config(rp.view).corpus).carriers)  # spellings seen carried
            for name in row.merged:
                if name in live_again:
                    live_again.discard(name)
                    merged_again[name] += 1
                else:
                    merged_at[name] = i
            rows.append(row)
            cost = "incompl." if row.cost is None else f"{row.cost:.2f}"
            if row.lines_written:
                usd = "?" if row.lines_usd is None else f"${row.lines_usd:.3f}"
                cost += f" (lines {row.lines_written}: {usd})"
            states = "/".join(row.states.get(p, "-") for p in ("alias", "prune", "discovery"))
            res = "/".join(str(row.resolved.get(p, 0)) for p in ("alias", "prune", "discovery"))
            print(f"{label:<11} {row.facts:>5} {changed:>6} {row.questions:>9} {row.asked:>5} {row.calls:>6} {cost:>8}  "
                  f"{states:<34} {res:>8} {row.commits:>8}{merged_text(row.merged, '  merged ')}"
                  f"{merged_text(back, '  back ')}"
                  + (f"  first reader suspended: {'/'.join(rp.suspended[-1])}" if rp.suspended[-1] else "")
                  + f"  ({row.seconds:.0f}s)", flush=True)
        at = days[-1].session_at + timedelta(days=extra + 1)
        check = rebuild_check(rp, at)
        carried = set(load_corpus(rp.view, layout=load_config(rp.view).corpus).carriers)
        status = cli("status", str(rp.root), "--json", env=rp.env, at=at)
        flips = find_key(json.loads(status.stdout), "flip") if status.returncode == 0 else None
        first_reader = json.loads(status.stdout).get("first_reader") if status.returncode == 0 else None
        exits, handed = rp.exits, rp.handed
        shared = rp.remote.report(rp.root) if rp.remote else None
    finally:
        server.close()
        if rp is not None and rp.remote:
            rp.remote.close()
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}", file=sys.stderr)
    out = totals(rows, len(days), pairs, appeared, merged_at, check, flips, dict(judge.asked), dict(merged_again))
    lines_usd = [r.lines_usd for r in rows[:len(days)]]
    out["lines_usd"] = None if None in lines_usd else round(sum(lines_usd), 6)
    out["lines_written"] = sum(r.lines_written for r in rows)
    out["lines_usd_extra_sessions"] = [r.lines_usd for r in rows[len(days):]]
    out["described_spellings"] = judge.described
    print(f"  describe lines: {out['lines_written']} written over {len(days)} sessions, "
          + ("cost incomplete" if out["lines_usd"] is None else f"${out['lines_usd']:.4f}")
          + f" ({judge.asked.get('describe', 0)} requests, {judge.described} spellings asked; "
          f"{len(judge.lines)} recorded lines available); in the unchanged sessions: {out['lines_usd_extra_sessions']}")
    watch = {}
    for a, b in WATCH:
        pair = frozenset((a, b))
        one = not ({a, b} <= carried)  # one spelling replaced the other (or both are gone) by the end
        watch[f"{a} / {b}"] = {"asked": pair in judge.alias_pairs, "labelled_same": judge.spellings.same(a, b),
                               "merged": one}
        print(f"  {a} / {b}: {'asked' if pair in judge.alias_pairs else 'never asked'} of the judge; the labels say "
              f"{'same' if judge.spellings.same(a, b) else 'not same'}; at the end "
              + ("one spelling carries both" if one else "both still carried"))
    out["watch_pairs"] = watch
    groups = {}
    for spelling in list(judge.spellings.parent):
        groups.setdefault(judge.spellings.find(spelling), set()).add(spelling)
    present = [g for g in groups.values() if len(g & ever) >= 2]  # labelled groups two of whose spellings were carried
    unified = [g for g in present if len(g & carried) <= 1]
    out["alias_groups"] = {"present": len(present), "unified": len(unified)}
    print(f"  labelled alias groups with two spellings carried at some point: {len(present)}; one spelling (or none) "
          f"carries each at the end: {len(unified)}"
          + "".join(f"\n    not unified: {sorted(g & carried)}" for g in present if g not in unified))
    out["as_run"] = as_run(judge.usage)
    print("  as run, at list prices, by pass and model: "
          + ", ".join(f"{k} ${v:.2f}" for k, v in out["as_run"].items()))
    if judge.first_misses:
        out["first_reader_missed"] = len(judge.missed)
        print(f"  the first reader answered the default on {len(judge.missed)} true question(s) (--first-misses):"
              + "".join(f"\n    {m}" for m in judge.missed))
    out["first_true"] = {k: {"true_read": v[0], "said_yes": v[1], "recall": round(v[1] / v[0], 4) if v[0] else None}
                         for k, v in judge.first_true.items()}
    out["first_reader"] = first_reader
    out["exits"] = exits
    out["handed_over"] = handed
    print(f"  the first reader's true recall over the true questions it read: {json.dumps(out['first_true'])}")
    print(f"  status --json first_reader at the end: {json.dumps(first_reader)}")
    print(f"  review exit codes by session: {exits}; questions handed to the judge model: "
          + (", ".join(f"session {i + 1} {h}" for i, h in enumerate(handed) if h) or "none"))
    out["by_model"] = by_model(judge.usage)
    print("  the same calls at list prices, by judge model (lines by claude-haiku-5-5), by pass; thinking at judge.effort "
          "low as assumed (models.THINKING_EXPECTED), not measured:")
    for m in out["by_model"]:
        passes = ", ".join(f"{k} ${v:.2f}" for k, v in m["by_pass"].items())
        print(f"    {m['judge']:<18} ${m['usd']:.2f} ({passes}); with thinking ${m['usd_thinking']:.2f}", flush=True)
    if shared is not None:
        out["remote"] = shared
        print(f"  remote: {shared['branch_updates']} updates of the served branch, {shared['non_fast_forward']} not a "
              f"fast-forward; session sync states {json.dumps(shared['sync_states'])}")
        print(f"  writer edits that overrode a decision: {len(shared['overridden'])}")
        for o in shared["overridden"]:
            print(f"    {o['session']}: {o.get('pass')} {o['verdict']} ({o.get('a')} / {o.get('b')}) in "
                  f"{', '.join(o['paths'])}: {o['outcome']}")
    return out


# An RFC number and the protocol it defines (issue 30): aliases only world knowledge joins
WATCH = [("RFC 7591", "Dynamic Client Registration"), ("RFC 7591", "dynamic client registration"),
         ("RFC 9421", "HTTP Message Signatures")]


def merged_text(names: list, head: str) -> str:
    """The labelled pairs a session merged (or a writer brought back): named when few, counted when many."""
    if not names:
        return ""
    return head + (", ".join(names) if len(names) <= 5 else f"{len(names)} labelled duplicates")


def rebuild_check(rp: Replay, at: datetime) -> str:
    """`knomit-judge rebuild --check` on the replayed corpus, when this CLI has the option."""
    help_text = cli("rebuild", "--help", env=rp.env).stdout
    if "--check" not in help_text:
        return "not available (this CLI's rebuild has no --check)"
    r = cli("rebuild", "--check", str(rp.root), env=rp.env, at=at)
    tail = (r.stdout.strip() or r.stderr.strip()).splitlines()[-3:]
    return f"exit {r.returncode}: " + " | ".join(tail)


def find_key(data, word: str, prefix: str = ""):
    """Every value under a key containing `word` in a JSON document, with its path (the flip rate)."""
    found = {}
    if isinstance(data, dict):
        for k, v in data.items():
            if word in k and not isinstance(v, (dict, list)):
                found[prefix + k] = v
            else:
                found.update(find_key(v, word, f"{prefix}{k}."))
    elif isinstance(data, list) and data:
        found.update(find_key(data[0], word, prefix + "0."))
    return found


def totals(rows: list[Row], n_days: int, pairs: dict, appeared: dict, merged_at: dict, check: str, flips,
           by_pass: dict, again: dict) -> dict:
    days, after = rows[:n_days], rows[n_days:]
    costs = [r.cost for r in days]
    known = None if any(c is None for c in costs) else sum(costs)
    resolved = sum(sum(r.resolved.values()) for r in days)
    alias = sum(r.resolved.get("alias", 0) for r in days)
    calls, questions = sum(r.calls for r in days), sum(r.questions for r in days)
    asked = sum(r.asked for r in days)
    quiet = [r for r in days[1:] if r.changed <= QUIET] + after
    quiet_max = max((r.cost or 0.0 for r in quiet), default=0.0)
    capped = sum(1 for r in days if r.cost is not None and r.cost >= 4.99)
    lags = {name: (merged_at[name] - appeared[name]) if name in merged_at else None
            for name in pairs if name in appeared}
    out = {"days": n_days, "cost_usd": known, "calls": calls, "questions": questions, "resolutions": resolved,
           "alias_resolutions": alias, "prune_resolutions": sum(r.resolved.get("prune", 0) for r in days),
           "alias_applied": sum(r.applied.get("alias", 0) for r in days),
           "usd_per_resolution": (known / resolved) if known is not None and resolved else None,
           "asked": asked, "calls_per_question": calls / asked if asked else None, "sessions_at_cap": capped,
           "dedup_lag_sessions": lags, "dedup_merged_again": again, "calls_unchanged_after": [r.calls for r in after],
           "quiet_day_max_usd": quiet_max, "quiet_days": [r.day for r in quiet], "rebuild_check": check,
           "flip_rate": flips, "calls_by_pass": by_pass,
           "rows": [r.__dict__ for r in rows]}
    print("\ntotal:")
    print(f"  ${known:.2f}" if known is not None else "  $ incomplete", f"over {n_days} sessions; {questions} questions "
          f"judged, {asked} asked of the judge in {calls} calls ({out['calls_per_question'] or 0:.2f} calls per question "
          f"asked); {capped} session(s) at the $5 session cap; calls by pass, extra sessions included "
          f"{json.dumps(by_pass)}")
    print(f"  resolutions {resolved} (alias {alias}, of them {out['alias_applied']} merges committed; prune "
          f"{out['prune_resolutions']}); $ per resolution "
          + (f"{out['usd_per_resolution']:.2f}" if out["usd_per_resolution"] is not None else "-"))
    if len(pairs) > 10:  # the synthetic corpus: a distribution, not a line per pair
        lagged = [lag for lag in lags.values() if lag is not None]
        spread = defaultdict(int)
        for lag in lagged:
            spread[lag] += 1
        print(f"  planted duplicates: {len(lags)} both present, {len(lagged)} merged; sessions from both present to "
              f"merged: {dict(sorted(spread.items()))}; never merged {len(lags) - len(lagged)}; merged again after a "
              f"writer's edit {sum(again.values())}")
    for name in pairs if len(pairs) <= 10 else ():
        if name in appeared:
            lag = lags[name]
            print(f"  duplicate {name}: both facts from session {appeared[name] + 1}, "
                  + (f"merged in session {merged_at[name] + 1}: {lag} session(s) later" if lag is not None
                     else "never merged")
                + (f"; brought back by a writer's edit and merged again {again[name]} time(s)" if again.get(name) else ""))
        else:
            print(f"  duplicate {name}: never both present")
    print(f"  calls on the unchanged corpus after the last day: {out['calls_unchanged_after']}")
    print(f"  quiet days (writer touched <= {QUIET} facts, and the unchanged sessions): max ${quiet_max:.2f}")
    print(f"  flip rate in `status --json`: {flips or 'not reported'}")
    print(f"  rebuild --check: {check}", flush=True)
    return out


# -- the real history ------------------------------------------------------------------------------------
def real_days(bundle: Path, work: Path, limit: int | None) -> tuple[list[Day], dict]:
    """Each day's writer tree from the bundle's agent branch, the reviewer's standing dedups taken out."""
    repo = work / "aekb"
    subprocess.run(["git", "clone", "-q", str(bundle), str(repo)], check=True)
    log = git(repo, "log", "--reverse", "--format=%H %ad %s", "--date=iso", AGENT).splitlines()
    commits = []  # (sha, day in the writer's own time zone, git date, subject)
    for line in log:
        sha, day, clock, tz, subject = line.split(" ", 4)
        commits.append((sha, day, f"{day} {clock} {tz}", subject))
    order = {sha: i for i, (sha, *_) in enumerate(commits)}
    dedups = []  # (loser, survivor, index of the merge commit, index of the remove commit)
    for i, (sha, day, stamp, subject) in enumerate(commits):
        m = re.match(r"dedup: merge (\S+) into (\S+)", subject)
        if m:
            remove = next(j for j in range(i + 1, len(commits))
                          if commits[j][3].startswith(f"dedup: remove duplicate {m.group(1)} "))
            dedups.append((m.group(1), m.group(2), i, remove))
    standing = []
    for loser, survivor, i, remove in dedups:
        folder = loser.rsplit("/", 1)[0] + "/"
        undone = any(s.startswith("learn: Restore") and any(p.startswith(folder) for p in
                     git(repo, "show", "--name-only", "--format=", sha).split())
                     for sha, _, _, s in commits[remove + 1:])
        if not undone:
            standing.append((loser, survivor, i, remove))
    pairs = {f"{Path(a).stem}>{Path(b).stem}": (a, b) for a, b, _, _ in standing}
    last: dict[str, tuple[str, str]] = {}
    for sha, day, stamp, _ in commits:
        last[day] = (sha, stamp)
    blob = lambda sha, path: git(repo, "show", f"{sha}:{path}").encode()  # noqa: E731
    days = []
    for day, (sha, stamp) in list(last.items())[:limit]:
        files = tree_files(repo, sha)
        for loser, survivor, i, remove in standing:
            if order[sha] < i:
                continue
            if order[sha] >= remove and loser not in files:
                files[loser] = blob(commits[remove][0] + "^", loser)
            if survivor in files:
                files[survivor] = unmerged(files[survivor], blob(commits[i][0] + "^", survivor),
                                           blob(commits[i][0], survivor))
        # a daily cron after the writer's day has ended in its own zone (-0400): 04:30 UTC the next day
        at = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(days=1, hours=4, minutes=30)
        days.append(Day(day, files, stamp, at))
    return days, pairs


def tree_files(repo: Path, sha: str) -> dict:
    """Every file of a commit, path -> bytes (one `git cat-file --batch` for the lot)."""
    entries = [line.split("\t", 1) for line in git(repo, "ls-tree", "-r", "--full-tree", sha).splitlines()]
    blobs = [(meta.split()[2], path) for meta, path in entries if meta.split()[1] == "blob"]
    r = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], input="".join(b + "\n" for b, _ in blobs).encode(),
                       capture_output=True, check=True)
    data, pos, files = r.stdout, 0, {}
    for _, path in blobs:
        header_end = data.index(b"\n", pos)
        size = int(data[pos:header_end].split()[2])
        files[path] = data[header_end + 1:header_end + 1 + size]
        pos = header_end + 1 + size + 1
    return files


def unmerged(now: bytes, pre: bytes, post: bytes) -> bytes:
    """The survivor without the front-matter lines its dedup merge wrote, where the writer left them as merged."""
    key = lambda line: line.split(b":", 1)[0]  # noqa: E731
    pre_lines = {key(l): l for l in pre.split(b"\n---\n", 1)[0].splitlines()}
    post_lines = {key(l): l for l in post.split(b"\n---\n", 1)[0].splitlines()}
    out = []
    for line in now.split(b"\n"):
        k = key(line)
        if post_lines.get(k) == line and pre_lines.get(k) != line:
            if k in pre_lines:
                out.append(pre_lines[k])
            continue  # a key the merge added
        out.append(line)
    return b"\n".join(out)


# -- the synthetic living corpus -------------------------------------------------------------------------
def synthetic_days(facts: int, n_days: int, seed: int, work: Path) -> tuple[list[Day], dict, list]:
    """gen_corpus's corpus grown by 1% a day: half new facts (planted duplicates among them), half edits."""
    from gen_corpus import generate

    per_day = max(2, round(0.01 * facts))
    pool = facts + (per_day // 2 + 1) * (n_days - 1)
    truth = generate(pool, seed, work / "pool", git=False)
    every = {p.relative_to(work / "pool").as_posix(): p.read_bytes() for p in (work / "pool" / "facts").rglob("*.md")}
    rng = random.Random(seed)
    dup_pairs = [tuple(p) for p in truth["duplicate_pairs"]]
    # half the planted duplicates are there on day 1 (the backlog), the second facts of the others arrive later
    late_dups = [b for _, b in dup_pairs[len(dup_pairs) // 2:]]
    others = [p for p in every if p not in set(late_dups)]
    rng.shuffle(others)
    n_late = (per_day // 2) * (n_days - 1)
    late_plain = others[:max(0, n_late - len(late_dups))]
    arrivals = late_dups + late_plain
    rng.shuffle(arrivals)
    state = {p: every[p] for p in every if p not in set(arrivals)}
    start = datetime(2026, 9, 1, 12, tzinfo=UTC)
    days = [Day("day 1", dict(state), start.isoformat(), start + timedelta(hours=15))]
    for d in range(1, n_days):
        for p in arrivals[(d - 1) * (per_day // 2): d * (per_day // 2)]:
            state[p] = every[p]
        for p in rng.sample(sorted(state), per_day - per_day // 2):
            state[p] = state[p].rstrip(b"\n") + f" Revised on day {d + 1}.\n".encode()
        when = start + timedelta(days=d)
        days.append(Day(f"day {d + 1}", dict(state), when.isoformat(), when + timedelta(hours=15)))
    pairs = {f"{Path(a).stem[:18]}~{i}": (a, b) for i, (a, b) in enumerate(dup_pairs)}
    return days, pairs, [tuple(p) for p in truth["alias_pairs"]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--synthetic", action="store_true", help="the generated living corpus instead of the bundle")
    ap.add_argument("--facts", type=int, default=10000, help="--synthetic: facts on day 1")
    ap.add_argument("--days", type=int, default=None, help="days to replay (real: all 17; synthetic: 4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extra", type=int, default=2, help="sessions on the unchanged corpus after the last day")
    ap.add_argument("--bundle", type=Path, default=BUNDLE)
    ap.add_argument("--keep", type=Path, help="keep the scratch corpus under this directory")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON object")
    ap.add_argument("--lines", type=Path, default=ROOT / "benchmarks" / "data" / "aekb-describe-replies.jsonl",
                    help="recorded describe lines the judge answers describe requests with (real history)")
    ap.add_argument("--no-lines", action="store_true",
                    help="no describe step (describe.enabled = false), as before lines")
    ap.add_argument("--remote", action="store_true",
                    help="through a served bare repository: the writer pushes during each session (issue 28)")
    ap.add_argument("--fresh-every", type=int, default=3,
                    help="--remote: the reviewer runs in a fresh clone every N-th day (0: always its kept clone)")
    ap.add_argument("--set", action="append", default=[], metavar="'KEY = VALUE'",
                    help="replace the line init wrote for KEY (e.g. 'questions_per_resolution = 20'); repeatable")
    ap.add_argument("--first-misses", action="store_true",
                    help="a worse first reader: the default, every time it reads them, on 4 of the 5 dedups and 8 of "
                         "the labelled alias pairs")
    ap.add_argument("--first-down", default="", metavar="N,N,...",
                    help="sessions (1-based) in which the first reader answers every call 529 overloaded")
    ap.add_argument("--first-refuses", action="store_true",
                    help="the first reader refuses every question of one true dedup (the first, by name)")
    ap.add_argument("--no-first-reader", action="store_true", help="judge.first_reader = \"\": the judge model alone")
    args = ap.parse_args(argv)
    if args.no_first_reader:
        os.environ["KNOMIT_JUDGE_FIRST_READER"] = ""
    work = Path(tempfile.mkdtemp(prefix="knomit-living-src-"))
    try:
        if args.synthetic:
            days, pairs, alias = synthetic_days(args.facts, args.days or 4, args.seed, work)
            judge = LabelJudge(Spellings(alias), {frozenset(p) for p in pairs.values()})
            print(f"synthetic living corpus: {args.facts} facts, {len(days)} days, {len(pairs)} planted duplicates, "
                  f"{len(alias)} alias pairs (seed {args.seed})", flush=True)
            keys = None
        else:
            if not args.bundle.exists():
                print(f"skipped: {args.bundle} not found (the real history lives in ../shared/data)")
                return 0
            days, pairs = real_days(args.bundle, work, args.days)
            labelled = read_alias_labels(ALIASES)
            judge = LabelJudge(Spellings(labelled), {frozenset(p) for p in pairs.values()})
            dedups = [frozenset(pairs[name]) for name in sorted(pairs)]
            if args.first_misses:  # 4 of the 5 dedups, 8 of the labelled alias pairs (every other one, in file order)
                judge.first_misses = set(dedups[1:]) | {frozenset(p) for p in labelled[::2][:8]}
            if args.first_refuses:
                judge.first_refuses = {dedups[0]}
            judge.first_down = {int(n) for n in args.first_down.split(",") if n.strip()}
            if args.no_lines:  # as before lines existed: no describe step at all
                args.set.append("describe.enabled = false")
            if not args.no_lines and args.lines.is_file():
                from knomit_judge.passes.registry import answered
                from knomit_judge.scripted import ScriptedBackend
                judge.lines = dict(ScriptedBackend(args.lines, answered()).lines)
                print(f"describe lines: {len(judge.lines)} recorded ({args.lines.relative_to(ROOT)})", flush=True)
            else:
                print("describe lines: none (the judge gives every spelling no line)", flush=True)
            print(f"aekb history: {len(days)} days, {len(pairs)} standing dedups, "
                  f"{len(read_alias_labels(ALIASES))} labelled alias pairs", flush=True)
            keys = ["motifs", "entities"]
        figures = replay(days, judge, pairs, args.extra, keys, args.keep, args.set, args.remote, args.fresh_every)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({k: v for k, v in figures.items() if k != "rows"} | {"rows": figures["rows"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
