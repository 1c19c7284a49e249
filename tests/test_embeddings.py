"""Embedding backends: ONNX exported from the shipped model, cached apart from PyTorch's, PyTorch as fallback."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from knomit_judge import embeddings
from knomit_judge.embeddings import Embedder
from knomit_judge.encoders import (
    BACKEND_ENV,
    BACKENDS,
    CACHE_ENV,
    cache_dir,
    cache_key,
    exported,
    int8_files,
    int8_tag,
    load_encoder,
    shipped,
)
from knomit_judge.store import Store

TEXTS = [
    "A penalty that blocks its own recovery latches the system off\nThe fine is paid from the budget that repairs.",
    "Retry storms amplify an outage\nEvery client retries at once and the recovering service is flooded again.",
    "Seed banks hedge against crop failure\nStored varieties replant a region after a drought.",
    "Alarm fatigue makes operators ignore real alerts\nToo many false alarms teach people to silence them.",
]


# slow: PyTorch against ONNX, and fresh interpreters that load the encoder
pytestmark = pytest.mark.slow


def test_onnx_vectors_match_pytorch_and_are_cached_under_their_own_key(tmp_path):
    store = Store(tmp_path / "judge.db")
    onnx = Embedder(store, backend="onnx-int8")
    v_onnx = onnx.embed(TEXTS)
    assert onnx.backend == "onnx-int8" and onnx.computed == len(TEXTS)
    torch = Embedder(store, backend="torch")
    v_torch = torch.embed(TEXTS)
    # the int8 vectors were not taken for PyTorch's
    assert torch.computed == len(TEXTS)
    assert not (v_onnx == v_torch).all()
    cos = (v_onnx * v_torch).sum(axis=1)
    assert cos.min() > 0.98
    np.testing.assert_allclose(np.linalg.norm(v_onnx, axis=1), 1.0, atol=1e-5)
    models = {r[0]: r[1] for r in store.db.execute("SELECT model, count(*) FROM embeddings GROUP BY model")}
    assert models == {cache_key("torch"): len(TEXTS), cache_key("onnx-int8"): len(TEXTS)}
    again = Embedder(store, backend="onnx-int8")
    assert (again.embed(TEXTS) == v_onnx).all() and again.computed == 0 and not again.model_loaded
    store.close()


def test_fp32_onnx_equals_pytorch_to_the_last_digits():
    a = load_encoder("onnx").encode(TEXTS, 2)
    b = load_encoder("torch").encode(TEXTS, 2)
    np.testing.assert_allclose(a, b, atol=1e-4)


def test_the_shipped_int8_model_is_the_export_byte_for_byte_so_both_share_one_key():
    """`make install` writes the int8 model the wheel ships (encoders.ship): this clone's is what an export makes."""
    folder = shipped()
    assert folder is not None, "run `make install`: it writes knomit_judge/data/model"
    # the shipped files come first
    assert int8_files() == (folder / "model-int8.onnx", folder / "tokenizer.json")
    export = exported("onnx-int8")
    assert export.read_bytes() == (folder / "model-int8.onnx").read_bytes()
    assert int8_tag(export, folder / "tokenizer.json") == int8_tag(*int8_files())
    assert cache_key("onnx-int8").startswith("all-MiniLM-L6-v2+onnx-int8/v2-")


def test_the_export_is_made_once_and_reused():
    first = exported("onnx-int8")
    stamp = first.stat().st_mtime_ns
    assert exported("onnx-int8") == first and first.stat().st_mtime_ns == stamp
    # both files come from one export
    assert (first.parent / "model.onnx").exists()


def test_an_export_that_fails_falls_back_to_pytorch_under_its_key(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    store = Store(tmp_path / "judge.db")
    # fp32 is always exported (int8 ships in the package)
    embedder = Embedder(store, backend="onnx")
    # whatever level an earlier `-q` left it at
    with caplog.at_level(logging.WARNING, logger="knomit_judge"):
        vectors = embedder.embed(TEXTS)
    assert embedder.backend == "torch" and embedder.model_name == cache_key("torch")
    assert "using PyTorch" in caplog.text
    models = [r[0] for r in store.db.execute("SELECT DISTINCT model FROM embeddings")]
    assert models == [cache_key("torch")]
    assert vectors.shape == (len(TEXTS), 384)
    store.close()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_long_embedding_shows_a_progress_bar_on_a_terminal(tmp_path, monkeypatch, caplog):
    # the CLI's level, without -q
    caplog.set_level(logging.INFO, logger="knomit_judge")
    monkeypatch.setattr(embeddings, "SHOW_PROGRESS_AFTER_S", 0.0)
    err = _Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    store = Store(tmp_path / "judge.db")
    Embedder(store, batch_size=4).embed([f"{t} ({i})" for i in range(5) for t in TEXTS])
    shown = err.getvalue()
    assert "texts/s" in shown and "ETA" in shown and "/20" in shown
    store.close()


def test_no_progress_bar_off_a_terminal_or_when_quick_or_quiet(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="knomit_judge")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    store = Store(tmp_path / "judge.db")
    monkeypatch.setattr(embeddings, "SHOW_PROGRESS_AFTER_S", 0.0)
    Embedder(store, batch_size=4).embed([f"{t} [{i}]" for i in range(3) for t in TEXTS])  # not a terminal
    quick = _Terminal()
    monkeypatch.setattr(sys, "stderr", quick)
    monkeypatch.setattr(embeddings, "SHOW_PROGRESS_AFTER_S", 3600.0)
    Embedder(store, batch_size=4).embed([f"{t} <{i}>" for i in range(3) for t in TEXTS])  # quick
    quiet = _Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    monkeypatch.setattr(embeddings, "SHOW_PROGRESS_AFTER_S", 0.0)
    caplog.set_level(logging.WARNING, logger="knomit_judge")  # -q
    Embedder(store, batch_size=4).embed([f"{t} {{{i}}}" for i in range(3) for t in TEXTS])
    # log lines may be there, a bar never
    for shown in (err.getvalue(), quick.getvalue(), quiet.getvalue()):
        assert "texts/s" not in shown and "ETA" not in shown and "━" not in shown
    store.close()


# Lengths from 3 to ~300 tokens (cut at 256), so batches of them were padded, and a batch's activations spread.
MIXED = [
    *TEXTS,
    "retry storm",
    "cache stampede on expiry",
    "NHI",
    "Agent-to-Agent protocol (A2A)",
    *(
        f"Fact {i}: " + " ".join(f"clause {j} of a body about queues and penalties" for j in range(i * i))
        for i in (1, 3, 5, 7)
    ),
]
FRESH = """
import sys
import numpy as np
from knomit_judge.encoders import load_encoder
texts = sys.stdin.read().split("\\x1e")
np.savez(sys.argv[1], **{b: load_encoder(b).encode(texts, 32) for b in sys.argv[2:]})
"""


@pytest.fixture(scope="module")
def fresh_process(tmp_path_factory):
    """MIXED embedded by every backend in another process, whose HOME is an empty directory."""
    tmp = tmp_path_factory.mktemp("fresh")
    home = tmp / "home"
    home.mkdir()
    out = tmp / "vectors.npz"
    env = {**os.environ, "HOME": str(home), CACHE_ENV: str(cache_dir())}
    env.pop("XDG_CACHE_HOME", None)
    # the tool must set it itself
    env.pop("ORT_DISABLE_TELEMETRY", None)
    subprocess.run(
        [sys.executable, "-c", FRESH, str(out), *BACKENDS],
        input="\x1e".join(MIXED),
        text=True,
        env=env,
        check=True,
        capture_output=True,
    )
    return home, dict(np.load(out))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_text_gets_the_same_vector_bit_for_bit_alone_in_any_batch_order_or_process(backend, fresh_process):
    encoder = load_encoder(backend)
    assert encoder.backend == backend
    alone = np.stack([encoder.encode([t], 32)[0] for t in MIXED])
    assert alone.dtype == np.float32
    assert (encoder.encode(MIXED, 32) == alone).all(), "in one batch"
    assert (encoder.encode(MIXED[::-1], 3)[::-1] == alone).all(), "in batches of 3, in reverse order"
    assert (fresh_process[1][backend] == alone).all(), "in a fresh process"


def test_vectors_cached_a_few_at_a_time_equal_a_full_embedding_in_an_empty_db(tmp_path):
    """What sessions do (embed the changed texts only) and what rebuild does (embed all at once) agree."""
    store = Store(tmp_path / "kept.db")
    for start in range(0, len(MIXED), 5):
        Embedder(store).embed(MIXED[start : start + 5])
    kept = Embedder(store)
    vectors = kept.embed(MIXED[::-1])
    assert kept.computed == 0
    fresh = Embedder(Store(tmp_path / "fresh.db"), batch_size=32).embed(MIXED[::-1])
    assert (vectors == fresh).all()


def test_loading_the_encoder_writes_nothing_in_home_and_turns_onnxruntime_telemetry_off(fresh_process):
    home, _ = fresh_process
    assert [p.relative_to(home).as_posix() for p in home.rglob("*")] == []  # no .cache/Microsoft/DeveloperTools
    load_encoder("onnx-int8")
    assert os.environ["ORT_DISABLE_TELEMETRY"] == "1"


def test_the_run_that_exports_the_model_logs_each_decision_once(tmp_path):
    """The exporters give the root logger a stderr handler of its own; left there, every line printed twice."""
    from helpers import DEMO, demo_repo

    repo = demo_repo(tmp_path / "demo")
    # a cache with no export yet
    env = {
        **os.environ,
        CACHE_ENV: str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "1",
        # fp32: always exported (int8 ships in the package)
        BACKEND_ENV: "onnx",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from knomit_judge.cli import main; main()",
            "review",
            str(repo.root),
            "--judge",
            f"scripted:{DEMO / 'judge-replies.jsonl'}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "exporting the embedding model to ONNX" in done.stderr
    decisions = [line for line in done.stderr.splitlines() if "alias: merge" in line]
    assert decisions and all(line.startswith("knomit-judge: ") for line in decisions), done.stderr
    assert len(set(decisions)) == len(decisions) and "INFO:knomit_judge" not in done.stderr


# A plain install: no torch, so nothing to fall back to; the shipped model read from `folder` (a copy).
PLAIN_INSTALL = (
    "import sys; from pathlib import Path; sys.modules['torch'] = None; "
    "import knomit_judge.encoders as e; e.SHIPPED = Path(sys.argv.pop(1)); "
    "from knomit_judge.cli import main; main()"
)


def test_a_corrupt_embedding_model_stops_a_session_before_it_changes_anything(tmp_path):
    """Issue 51: a corrupt model was found only when the first text was embedded, after the exact duplicates'
    commits. The model is loaded before the session's first change: exit 2, naming the file, nothing changed."""
    from helpers import GIT_ENV, SMALL, fact_text, git, make_repo, tree_digest

    folder = tmp_path / "model"
    folder.mkdir()
    shipped_model, tokenizer = int8_files()
    (folder / "model-int8.onnx").write_bytes(shipped_model.read_bytes()[:1_000_000])  # cut short: no model
    (folder / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    twin = fact_text("Twins are retracted without a judge", ["twin"], body="The same body.")
    repo = make_repo(tmp_path / "corpus", {**SMALL, "facts/a.md": twin, "facts/b.md": twin})
    head, before = git(repo.root, "rev-parse", "HEAD"), tree_digest(repo.root / "facts")
    replies = tmp_path / "replies.jsonl"
    replies.write_text("", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", PLAIN_INSTALL, str(folder), "review", str(repo.root), "--judge", f"scripted:{replies}"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **GIT_ENV},
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "knomit-judge: the embedding model cannot be loaded" in done.stderr
    # the file it could not load
    assert str(folder / "model-int8.onnx") in done.stderr
    # no retraction was made first
    assert "exact:" not in done.stderr
    assert git(repo.root, "rev-parse", "HEAD") == head and repo.status() == ""
    assert tree_digest(repo.root / "facts") == before
