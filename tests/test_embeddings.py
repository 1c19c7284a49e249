"""Embedding backends: ONNX exported from the shipped model, cached apart from PyTorch's, PyTorch as fallback."""

from __future__ import annotations

import io
import logging
import sys

import numpy as np

from knomit_judge import embeddings
from knomit_judge.embeddings import Embedder
from knomit_judge.encoders import CACHE_ENV, MODEL_NAME, cache_key, exported, load_encoder
from knomit_judge.store import Store

TEXTS = [
    "A penalty that blocks its own recovery latches the system off\nThe fine is paid from the budget that repairs.",
    "Retry storms amplify an outage\nEvery client retries at once and the recovering service is flooded again.",
    "Seed banks hedge against crop failure\nStored varieties replant a region after a drought.",
    "Alarm fatigue makes operators ignore real alerts\nToo many false alarms teach people to silence them.",
]


def test_onnx_vectors_match_pytorch_and_are_cached_under_their_own_key(tmp_path):
    store = Store(tmp_path / "judge.db")
    onnx = Embedder(store, backend="onnx-int8")
    v_onnx = onnx.embed(TEXTS)
    assert onnx.backend == "onnx-int8" and onnx.computed == len(TEXTS)
    torch = Embedder(store, backend="torch")
    v_torch = torch.embed(TEXTS)
    assert torch.computed == len(TEXTS)  # the int8 vectors were not taken for PyTorch's
    assert not (v_onnx == v_torch).all()
    cos = (v_onnx * v_torch).sum(axis=1)
    assert cos.min() > 0.98
    np.testing.assert_allclose(np.linalg.norm(v_onnx, axis=1), 1.0, atol=1e-5)
    models = {r[0]: r[1] for r in store.db.execute("SELECT model, count(*) FROM embeddings GROUP BY model")}
    assert models == {MODEL_NAME: len(TEXTS), cache_key("onnx-int8"): len(TEXTS)}
    again = Embedder(store, backend="onnx-int8")
    assert (again.embed(TEXTS) == v_onnx).all() and again.computed == 0 and not again.model_loaded
    store.close()


def test_fp32_onnx_equals_pytorch_to_the_last_digits():
    a = load_encoder("onnx").encode(TEXTS, 2)
    b = load_encoder("torch").encode(TEXTS, 2)
    np.testing.assert_allclose(a, b, atol=1e-4)


def test_the_export_is_made_once_and_reused():
    first = exported("onnx-int8")
    stamp = first.stat().st_mtime_ns
    assert exported("onnx-int8") == first and first.stat().st_mtime_ns == stamp
    assert (first.parent / "model.onnx").exists()  # both files come from one export


def test_an_export_that_fails_falls_back_to_pytorch_under_its_key(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    store = Store(tmp_path / "judge.db")
    embedder = Embedder(store, backend="onnx-int8")
    with caplog.at_level(logging.WARNING):
        vectors = embedder.embed(TEXTS)
    assert embedder.backend == "torch" and embedder.model_name == MODEL_NAME
    assert "using PyTorch" in caplog.text
    models = [r[0] for r in store.db.execute("SELECT DISTINCT model FROM embeddings")]
    assert models == [MODEL_NAME]
    assert vectors.shape == (len(TEXTS), 384)
    store.close()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_long_embedding_shows_a_progress_bar_on_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "SHOW_PROGRESS_AFTER_S", 0.0)
    err = _Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    store = Store(tmp_path / "judge.db")
    Embedder(store, batch_size=4).embed([f"{t} ({i})" for i in range(5) for t in TEXTS])
    shown = err.getvalue()
    assert "texts/s" in shown and "ETA" in shown and "/20" in shown
    store.close()


def test_no_progress_bar_off_a_terminal_or_when_quick(tmp_path, monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    store = Store(tmp_path / "judge.db")
    monkeypatch.setattr(embeddings, "SHOW_PROGRESS_AFTER_S", 0.0)
    Embedder(store, batch_size=4).embed([f"{t} [{i}]" for i in range(3) for t in TEXTS])  # not a terminal
    monkeypatch.setattr(sys, "stderr", _Terminal())
    monkeypatch.setattr(embeddings, "SHOW_PROGRESS_AFTER_S", 3600.0)
    Embedder(store, batch_size=4).embed([f"{t} <{i}>" for i in range(3) for t in TEXTS])  # quick
    for shown in (err.getvalue(), sys.stderr.getvalue()):  # log lines may be there, a bar never
        assert "texts/s" not in shown and "ETA" not in shown and "━" not in shown
    store.close()
