"""Sentence embeddings (all-MiniLM-L6-v2, shipped offline), cached in sqlite by (model and backend, text hash).

A text's vector does not depend on the texts embedded with it (encoders.py runs each alone), so a vector
cached by one session equals the one a full `rebuild` computes, bit for bit.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from typing import TYPE_CHECKING, Literal

import numpy as np

from . import interrupts
from .encoders import DIM, MODEL_NAME, Encoder, cache_key, keyed_backend, load_encoder, wanted_backend
from .shortlist import NeighbourMemory, Searcher
from .store import Store

if TYPE_CHECKING:
    from rich.progress import Progress as Bar
    from rich.progress import TaskID

# a progress bar only when embedding will take longer than this
SHOW_PROGRESS_AFTER_S = 3.0
log = logging.getLogger(__name__)


def text_hash(text: str) -> str:
    """The embedding cache's key of a text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


class Embedder:
    """Embeds texts, computing only those whose hash is not cached; loads the model on first use, or load().

    Its `searcher` finds the vectors' nearest neighbours for whoever holds it (a session, rebuild, a test),
    keeping the lists in `memory` between sessions when given one (neighbours.Memory).
    """

    # texts encoded and stored at a time, so an interrupted first embedding resumes
    CHUNK = 1024

    def __init__(
        self, store: Store, batch_size: int = 32, backend: str | None = None, *, memory: NeighbourMemory | None = None
    ) -> None:
        # batch_size: texts per progress step and per write
        self.store, self.batch_size = store, batch_size
        self.backend, self.model_name = keyed_backend(backend or wanted_backend())
        self._encoder: Encoder | None = None
        # texts actually encoded this session
        self.computed = 0
        # prune and discovery embed the same fact texts
        self._last: tuple[list[str], np.ndarray] | None = None
        self.searcher = Searcher(memory)

    @property
    def encoder(self) -> Encoder:
        """The encoder, loaded on first use."""
        if self._encoder is None:
            log.info("loading embedding model %s (%s)", MODEL_NAME, self.backend)
            self._encoder = load_encoder(self.backend)
            # fell back: never store its vectors under the other key
            if self._encoder.backend != self.backend:
                self.backend, self.model_name = self._encoder.backend, cache_key(self._encoder.backend)
        return self._encoder

    def load(self) -> None:
        """Load the model now, so a model that cannot be loaded stops a session before its first change."""
        self.encoder  # noqa: B018  the property loads it

    @property
    def model_loaded(self) -> bool:
        return self._encoder is not None

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
        if missing:
            key = self.model_name
            encoder = self.encoder
            # the backend fell back to PyTorch: look again under its key
            if self.model_name != key:
                known = self.store.embeddings(self.model_name, list(text_of))
                missing = [h for h in text_of if h not in known]
            self._compute([(h, text_of[h]) for h in missing], encoder, known)
        for i, h in enumerate(hashes):
            out[i] = known[h]
        self._last = (hashes, out.copy())
        return out

    def _compute(self, missing: list[tuple[str, str]], encoder: Encoder, known: dict[str, np.ndarray]) -> None:
        """Encode the missing (hash, text) pairs into `known`, storing them CHUNK at a time.

        A stop (Ctrl-C, SIGTERM, the daemon's SIGTERM) is looked at before each text starts: the texts in flight
        finish, what was computed is stored, and Interrupted is raised, so the next run embeds only the rest.
        """
        stop = interrupts.watcher()
        fresh: dict[str, np.ndarray] = {}
        try:
            with Progress(len(missing)) as progress:
                for i in range(0, len(missing), self.batch_size):
                    batch = missing[i : i + self.batch_size]
                    vectors = progress.step(encoder.encode([t for _, t in batch], self.batch_size, stop))
                    fresh.update(zip([h for h, _ in batch], vectors.astype(np.float32)))
                    if len(vectors) < len(batch):
                        raise interrupts.Interrupted()
                    if len(fresh) >= self.CHUNK:
                        self._keep(fresh, known)
        # an interruption or a failure keeps what was computed before it
        finally:
            self._keep(fresh, known)

    def _keep(self, fresh: dict[str, np.ndarray], known: dict[str, np.ndarray]) -> None:
        if fresh:
            # a copy: a dry run's store keeps the dict
            self.store.put_embeddings(self.model_name, dict(fresh))
            known.update(fresh)
            self.computed += len(fresh)
            fresh.clear()


class Progress:
    """A rich progress bar (texts/s, ETA) on a terminal, once the first batch says the rest takes a while."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self.bar: Bar | None = None
        self.task: TaskID | None = None
        self.started = time.perf_counter()

    def __enter__(self) -> Progress:
        return self

    def step(self, vectors: np.ndarray) -> np.ndarray:
        """Count a batch of vectors done (shown once the rest is slow enough to show), and pass them on."""
        self.done += len(vectors)
        rate = self.done / max(time.perf_counter() - self.started, 1e-9)
        if (
            self.bar is None
            and self.done < self.total
            and sys.stderr.isatty()
            and log.isEnabledFor(logging.INFO)
            and (self.total - self.done) / rate > SHOW_PROGRESS_AFTER_S
        ):  # -q (warnings only): no bar
            self._show()
        if self.bar is not None and self.task is not None:  # set together by _show
            self.bar.update(self.task, completed=self.done, rate=f"{rate:.1f} texts/s")
        return vectors

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as Bar

        self.bar = Bar(
            TextColumn("embedding"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(file=sys.stderr),
            transient=True,
        )
        self.task = self.bar.add_task("embedding", total=self.total, completed=self.done, rate="")
        self.bar.start()

    def __exit__(self, *exc: object) -> Literal[False]:
        if self.bar is not None:
            self.bar.stop()
            elapsed = time.perf_counter() - self.started
            log.info("embedded %d texts in %.0f s (%.1f texts/s)", self.done, elapsed, self.done / max(elapsed, 1e-9))
        return False
