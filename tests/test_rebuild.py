"""`rebuild` reproduces the derived state sessions keep (so the next review asks nothing), and `rebuild --check`
names every place where it would not, writing nothing."""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import RANDOM_MOTIFS, RANDOM_TOPICS, REPO, git, scripted, tree_digest
from helpers import fact_text as fact_file

from knomit_judge.cli import cli
from knomit_judge.config import load_config
from knomit_judge.corpus import load_corpus
from knomit_judge.embeddings import Embedder, text_hash
from knomit_judge.errors import KnomitError
from knomit_judge.init import init_corpus
from knomit_judge.nominate import name_text
from knomit_judge.passes.prune import fact_text
from knomit_judge.rebuild import Derivation, check, rebuild
from knomit_judge.revert import revert
from knomit_judge.session.review import ReviewOptions, review
from knomit_judge.store import Store
from knomit_judge.survivors import fact_survivor

sys.path.insert(0, str(REPO / "benchmarks"))
from gen_corpus import generate  # noqa: E402

# slow: random session histories replayed, then rebuilt and compared
pytestmark = pytest.mark.slow


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)], catch_exceptions=False)


def calls(result) -> int:
    return sum(r.judge_calls for r in result.passes.values())


def drop_db(root: Path) -> None:
    for f in (root / ".knomit").glob("judge.db*"):
        f.unlink()


def test_a_review_right_after_rebuild_asks_nothing_on_a_planted_corpus(tmp_path):
    """The promise as a new user meets it: 55 planted facts, budget off, a judge that answers."""
    root = tmp_path / "corpus"
    generate(55, 0, root)
    init_corpus(root)
    (root / "knomit-judge.toml").write_text("[budget]\nenabled = false\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "knomit-judge")
    judge = f"scripted:{tmp_path / 'corpus.replies.jsonl'}"
    first = review(root, ReviewOptions(judge=judge))
    assert first.commits and calls(first) > 100 and sum(r.applied for r in first.passes.values()) >= 3
    second = review(root, ReviewOptions(judge=judge))
    assert calls(second) == 0 and all(second.passes[n].state == "caught-up" for n in ("alias", "prune", "discovery"))
    assert check(root).equal
    drop_db(root)
    out = run("rebuild", root)
    assert out.exit_code == 0 and out.stdout.startswith("rebuilt: verdicts ")
    # one thing counted, named one way: the lists the passes search, each kept
    lists = r"neighbour lists (\d+), candidate lists (\d+)"
    kept = re.search(lists, out.stdout).groups()
    assert kept == re.search(lists, run("rebuild", root, "--check").stdout).groups()
    assert json.loads(run("rebuild", root, "--json").stdout)["neighbour_sets"] == int(kept[0])
    again = review(root, ReviewOptions(judge=judge))
    assert calls(again) == 0, again.text_lines()
    assert all(again.passes[n].state == "caught-up" for n in ("alias", "prune", "discovery")), again.text_lines()
    assert again.commits == []


def test_check_says_equal_after_sessions_and_names_each_tampered_table_changing_nothing(corpus_repo, tmp_path):
    root = corpus_repo.root
    review(root, ReviewOptions(judge=scripted(tmp_path)))
    before = tree_digest(root)
    out = run("rebuild", root, "--check")
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[-1] == "equal: the db's derived state is what a fresh rebuild computes"
    assert re.search(
        r"compared: verdicts \d+, lines \d+, files 4, embeddings \d+, neighbour lists \d+, candidate lists 4",
        out.stdout,
    ), out.stdout
    assert tree_digest(root) == before

    store = Store.for_corpus(root)
    # a spelling's vector: the fact vectors stay as they are
    name = text_hash(name_text("queue-amplifies-latency"))
    v = np.frombuffer(
        store.db.execute("SELECT vector FROM embeddings WHERE text_hash = ?", [name]).fetchone()[0], dtype=np.float32
    ).copy()
    # one last bit: a batch-dependent vector looked like this
    v[0] = np.nextafter(v[0], np.float32(2))
    store.db.execute("UPDATE embeddings SET vector = ? WHERE text_hash = ?", [v.tobytes(), name])
    vid = store.db.execute("SELECT id FROM verdicts LIMIT 1").fetchone()[0]
    store.db.execute("UPDATE verdicts SET reverted = 1 WHERE id = ?", [vid])
    row = store.db.execute("SELECT digest, scores FROM candidate_lists WHERE pass = 'prune'").fetchone()
    scores = np.frombuffer(row[1], dtype=np.float64).copy()
    scores[-1] += 0.25
    store.db.execute("UPDATE candidate_lists SET scores = ? WHERE pass = 'prune'", [scores.tobytes()])
    store.db.conn.commit()
    store.close()
    before = tree_digest(root)

    out = run("rebuild", root, "--check")
    assert out.exit_code == 1, out.output
    said = [line for line in out.stdout.splitlines() if line.startswith("differs: ")]
    assert any(line.startswith("differs: embeddings: 1 of ") and "kept vectors differ" in line for line in said), said
    assert f"differs: verdicts: {vid}: reverted is 1 in the db, 0 from the journal and git" in said
    assert any(
        line.startswith("differs: candidate lists: prune (read back): 1 with another fingerprint or score")
        for line in said
    ), said
    assert (
        "differs: neighbour lists: the kept state never searches the 3 rows a fresh rebuild does "
        "(their vectors differ: see embeddings)" in said
    )  # the spellings, one of whose vectors was changed
    assert out.stdout.splitlines()[-1] == f"not equal: {len(said)} difference(s) from a fresh rebuild"
    as_json = json.loads(run("rebuild", root, "--check", "--json").stdout)
    assert as_json["equal"] is False and len(as_json["differences"]) == len(said)
    # db, corpus and git untouched, even when it differs
    assert tree_digest(root) == before

    assert run("rebuild", root).exit_code == 0
    assert run("rebuild", root, "--check").exit_code == 0

    store = Store.for_corpus(root)
    for set_id, idx in store.db.execute("SELECT id, neighbours FROM neighbour_sets").fetchall():
        idx = np.frombuffer(idx, dtype=np.int64).copy()
        # the first row's two nearest, swapped
        idx[[0, 1]] = idx[[1, 0]]
        store.db.execute("UPDATE neighbour_sets SET neighbours = ? WHERE id = ?", [idx.tobytes(), set_id])
    store.db.conn.commit()
    store.close()
    out = run("rebuild", root, "--check")
    assert out.exit_code == 1
    assert re.search(
        r"^differs: neighbour lists: 1 of \d+ rows' kept neighbours are not their exact nearest "
        r"\(search of depth 10\): rows 0$",
        out.stdout,
        re.M,
    ), out.stdout


def test_check_names_vectors_made_in_batches_as_the_earlier_encoder_made_them(corpus_repo, tmp_path):
    """The measured cause: an int8 vector made in a padded batch differs from the same text's made alone."""
    review(corpus_repo.root, ReviewOptions(judge=scripted(tmp_path)))
    store = Store.for_corpus(corpus_repo.root)
    embedder = Embedder(store)
    if embedder.backend != "onnx-int8":
        pytest.skip("the batch effect was measured with onnx-int8")
    texts = [fact_text(f) for f in load_corpus(corpus_repo.root).active()]
    store.put_embeddings(embedder.model_name, dict(zip(map(text_hash, texts), _batched(embedder.encoder, texts))))
    store.close()
    result = check(corpus_repo.root)
    assert any(d.startswith(f"embeddings: {len(texts)} of ") for d in result.differences), result.differences


def _batched(encoder, texts: list[str]) -> np.ndarray:
    """The encoder before issue 22: the texts padded into one batch, one quantisation scale for all of them."""
    tok = encoder.tokenizer
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    try:
        enc = tok.encode_batch(texts)
    finally:
        tok.no_padding()
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    hidden = encoder.session.run(
        None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    )[0]
    m = mask[:, :, None].astype(np.float32)
    v = (hidden * m).sum(axis=1) / m.sum(axis=1)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


# Random session histories ------------------------------------------------------------------------------------

WRITER = ("edit", "add", "delete", "motifs", "edit-retired", "revert")


class History:
    """One corpus and a seeded stream of what happens to it: a writer's changes, then a session, again and again.

    `layout` is ours (retraction = `status: retracted`) or knomit's (kb/, `# ` titles, retraction = deletion).
    The judge is scripted afresh each session, answering yes to a few random pairs and groups of the facts then.
    """

    def __init__(self, root: Path, seed: int, layout: str):
        self.root, self.rng, self.layout, self.n = root, random.Random(seed), layout, 0
        # operations that really happened: writer's, and decisions applied
        self.done: set[str] = set()

    def start(self, facts: int) -> None:
        self.root.mkdir(parents=True)
        git(self.root, "init", "-q", "-b", "main")
        for _ in range(facts):
            self.add()
        init_corpus(self.root)
        toml = self.root / "knomit-judge.toml"
        text = toml.read_text(encoding="utf-8")
        assert "\nk = 5 " in text
        toml.write_text(text.replace("\nk = 5 ", "\nk = 3 ", 1), encoding="utf-8")  # the k-th moves often
        self.commit("facts")

    def commit(self, message: str) -> None:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "--allow-empty", "-m", message)

    def text(self, i: int) -> str:
        rng = self.rng
        topic = rng.choice(RANDOM_TOPICS)
        title = f"On {topic}" + (f" ({rng.randrange(3)})" if rng.random() < 0.5 else "")
        body = f"{topic.capitalize()}: observed in system {rng.randrange(4)}, case {rng.randrange(3)}."
        motifs, confidence = rng.sample(RANDOM_MOTIFS, rng.randint(1, 2)), rng.choice([0.5, 0.6, 0.7])
        if self.layout == "facts":
            return fact_file(title, motifs, confidence, [f"s{i}"], body)
        return (
            f"---\nmotifs: {json.dumps(motifs)}\nconfidence: {confidence}\nsources: 1\nrefs: []\n---\n"
            f"# {title}\n\n{body}\n"
        )

    def write(self, path: str, text: str) -> None:
        full = self.root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text, encoding="utf-8")

    def add(self, paths=()) -> bool:
        path = f"facts/f{self.n:03d}.md" if self.layout == "facts" else f"kb/part/f{self.n:03d}.md"
        self.write(path, self.text(self.n))
        self.n += 1
        return True

    def paths(self) -> list[str]:
        top = self.root / ("facts" if self.layout == "facts" else "kb")
        return sorted(p.relative_to(self.root).as_posix() for p in top.rglob("*.md"))

    def plan(self, steps: int) -> list[list[str]]:
        """The writer's changes before each session after the first: every kind at least once, in a random order."""
        ops = [*WRITER, *self.rng.choices(WRITER, k=steps)]
        self.rng.shuffle(ops)
        return [ops[i::steps] for i in range(steps)]

    def writer(self, ops: list[str]) -> None:
        for op in ops:
            if getattr(self, op.replace("-", "_"))(self.paths()):
                self.done.add(op)
        self.commit("writer")

    def edit(self, paths) -> bool:
        path = self.rng.choice(paths)
        self.write(path, (self.root / path).read_text(encoding="utf-8").rstrip("\n") + f" Seen again {self.n}.\n")
        self.n += 1
        return True

    def delete(self, paths) -> bool:
        if len(paths) > 6:
            (self.root / self.rng.choice(paths)).unlink()
            return True
        return False

    def motifs(self, paths) -> bool:
        path = self.rng.choice(paths)
        text = (self.root / path).read_text(encoding="utf-8")
        self.write(
            path,
            re.sub(
                r"^motifs: .*$", f"motifs: {json.dumps(self.rng.sample(RANDOM_MOTIFS, 2))}", text, count=1, flags=re.M
            ),
        )
        return True

    def edit_retired(self, paths) -> bool:
        """A writer's edit of a fact the reviewer retired: edited in place, or (knomit) saved again once deleted."""
        if self.layout == "facts":
            retired = [p for p in paths if "status: retracted" in (self.root / p).read_text(encoding="utf-8")]
            if not retired:
                return False
            path = self.rng.choice(retired)
            self.write(path, (self.root / path).read_text(encoding="utf-8").rstrip("\n") + " The writer adds a line.\n")
            return True
        deleted = sorted(
            {
                p
                for p in git(self.root, "log", "--diff-filter=D", "--name-only", "--format=").split()
                if not (self.root / p).exists()
            }
        )
        if not deleted:
            return False
        path = self.rng.choice(deleted)
        sha = git(self.root, "log", "-1", "--format=%H", "--", path).strip()
        self.write(path, git(self.root, "show", f"{sha}^:{path}").rstrip("\n") + " Saved again by the writer.\n")
        return True

    def revert(self, paths) -> bool:
        """Revert the newest applied decision (a revert of an older one is refused when its files changed since)."""
        store = Store.for_corpus(self.root)
        try:
            row = store.db.execute(
                "SELECT id FROM verdicts WHERE commit_sha IS NOT NULL AND reverted = 0 "
                "AND pass != 'exact' ORDER BY created_at DESC LIMIT 1"
            ).fetchone()
        finally:
            store.close()
        if row is None:
            return False
        # revert needs a clean tree
        self.commit("writer")
        try:
            revert(row[0], self.root)
        except KnomitError:
            return False
        return True

    def judge(self, path: Path) -> str:
        """A scripted judge that says yes to a few random pairs of facts and of spellings, and to one group."""
        rng = self.rng
        corpus = load_corpus(self.root, layout=load_config(self.root).corpus)
        facts, spellings = [f.path for f in corpus.active()], list(corpus.carriers)

        def reply(a: str, b: str, decision: str) -> dict:
            """A retract names the fact the fixed rules would not keep, so the histories stay the seeds' own."""
            if decision != "retract":
                return {"decision": decision, "rationale": "Both state one claim."}
            keep = fact_survivor([corpus.facts[a], corpus.facts[b]], corpus)
            return {
                "decision": decision,
                "redundant": "A" if keep.path == b else "B",
                "rationale": "Both state one claim.",
            }

        entries = [
            {"pass": "prune", "a": a, "b": b, "reply": reply(a, b, d)}
            for a, b, d in (rng.sample(facts, 2) + [rng.choice(["merge", "retract"])] for _ in range(8))
        ]
        entries += [
            {"pass": "alias", "a": a, "b": b, "reply": {"same": True, "mechanism": "One mechanism."}}
            for a, b in (rng.sample(spellings, 2) for _ in range(3 if len(spellings) > 1 else 0))
        ]
        entries.append(
            {
                "pass": "discovery",
                "contains": [rng.choice(facts)],
                "reply": {
                    "entails": True,
                    "rationale": "It follows from the group.",
                    "fact": {
                        "title": f"A claim derived in session {self.n}",
                        "body": "It follows.",
                        "motifs": ["derived"],
                    },
                },
            }
        )
        self.n += 1
        path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
        return f"scripted:{path}"

    def session(self, tmp: Path) -> None:
        result = review(self.root, ReviewOptions(judge=self.judge(tmp / f"replies-{self.n}.jsonl")))
        for name, r in result.passes.items():
            if r.applied:
                self.done.add(name)
        store = Store.for_corpus(self.root)
        try:
            self.done.update(
                r[0]
                for r in store.db.execute(
                    "SELECT DISTINCT answer FROM verdicts WHERE commit_sha IS NOT NULL AND pass = 'prune'"
                )
            )
        finally:
            store.close()


def kept_lists(root: Path) -> dict[str, list]:
    """Every pass's candidates as the next session would get them from the db (a copy in memory: nothing written)."""
    config = load_config(root)
    store = Store.read_only(root)
    try:
        corpus = load_corpus(root, config.corpus.max_fact_bytes, None, config.corpus)
        return Derivation(corpus, store, config).run().lists
    finally:
        store.close()


@pytest.mark.parametrize("layout,seed", [("facts", 5), ("knomit", 5)])
def test_after_random_session_histories_the_kept_state_equals_a_fresh_rebuild(tmp_path, layout, seed):
    """Writers edit, add, delete, change motifs, edit retired facts and revert; sessions merge, retract
    (knomit: delete), rename spellings and propose facts. After every session the db equals a fresh
    computation, and at the end a rebuild from nothing makes the very lists the sessions kept."""
    history = History(tmp_path / "corpus", seed, layout)
    history.start(facts=12)
    plan = history.plan(4)
    for step in range(5):
        if step:
            history.writer(plan[step - 1])
        history.session(tmp_path)
        result = check(history.root)
        assert result.equal, f"after session {step} ({sorted(history.done)}): {result.differences}"
    kept = kept_lists(history.root)
    drop_db(history.root)
    rebuild(history.root)
    assert kept_lists(history.root) == kept
    # each kind of change really happened in this history (a seed that stops exercising one fails here)
    assert {"merge", "retract", "alias", "discovery", *WRITER} <= history.done, sorted(history.done)


def test_rebuild_says_when_the_embedding_cache_key_is_new_and_keeps_only_the_new_one(corpus_repo):
    """An install that keys its vectors otherwise (the int8 model shipped in the wheel, issue #45) embeds again."""
    rebuild(corpus_repo.root)
    # the key of a torch export before the model shipped
    old = "all-MiniLM-L6-v2+onnx-int8/v2-c937e091"
    store = Store.for_corpus(corpus_repo.root)
    texts = store.db["embeddings"].count
    store.db.execute("UPDATE embeddings SET model = ?", [old])
    store.db.conn.commit()
    store.close()
    done = CliRunner().invoke(cli, ["rebuild", str(corpus_repo.root)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    store = Store.for_corpus(corpus_repo.root)
    # what a session of this install keys its vectors by
    new = Embedder(store).model_name
    assert new != old
    assert f"embeddings: the cache key is new ({new}; the db held {old}): every text was embedded again" in done.stderr
    assert [tuple(r) for r in store.db.execute("SELECT model, count(*) FROM embeddings GROUP BY model")] == [
        (new, texts)
    ]
    store.close()
    again = CliRunner().invoke(cli, ["rebuild", str(corpus_repo.root)], catch_exceptions=False)
    # same key: nothing to say
    assert again.exit_code == 0 and "cache key is new" not in again.stderr
