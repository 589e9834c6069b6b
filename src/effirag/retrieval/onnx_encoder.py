"""ONNX Runtime and OpenVINO inference for sentence-transformers bi-encoders, exported from the local weights.

sentence-transformers' own ``backend="onnx"``/``"openvino"`` go through Optimum, whose releases pin transformers below
the version EffiRAG runs on (or pull a CUDA build of torch). This module needs only the runtimes: it exports the
transformer once with torch's TorchScript-based ONNX exporter (needs the ``onnx`` package), optionally quantises the
weights to int8 with ONNX Runtime's dynamic quantiser, caches the files per model, and runs them with the model's own
tokenizer, pooling (mean or CLS, from the model's ``1_Pooling/config.json``) and L2 normalisation, exactly the steps
sentence-transformers performs. Texts are batched by token length (:mod:`effirag.retrieval.length_batches`), so
padding stays small.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from effirag.errors import ConfigError
from effirag.retrieval.length_batches import plan_length_batches

log = logging.getLogger(__name__)

# backend → (runtime module, pip requirement of the extra that provides it)
RUNTIMES = {"onnx": ("onnxruntime", "onnxruntime"), "openvino": ("openvino", "openvino")}
EXPORT_VERSION = "1"  # bump when the export recipe changes (cached files are keyed by it)


def require_runtime(backend: str) -> None:
    """Fail with one line naming the extra to install when ``backend``'s runtime (or ``onnx``) is missing."""
    base = backend.split("-")[0]
    for module, req in (RUNTIMES[base], ("onnx", "onnx")):
        try:
            __import__(module)
        except ImportError:
            raise ConfigError(
                "EncoderConfig",
                "backend",
                backend,
                f"needs the Python package {req}: pip install {req} (the effirag extra {base!r}), or choose "
                "backend=torch",
            ) from None


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "effirag" / "onnx"


def _model_key(model_dir: Path) -> str:
    """Hash of the model's config and weights (what the export depends on) and of the export recipe."""
    h = hashlib.sha256(EXPORT_VERSION.encode())
    for name in ("config.json", "model.safetensors", "pytorch_model.bin"):
        f = model_dir / name
        if f.is_file():
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:16]


def export_onnx(model_dir: Path, int8: bool, cache: Path | None = None) -> Path:
    """``model.onnx`` (or ``model_int8.onnx``) of the transformer in ``model_dir``, exported once and cached."""
    folder = (cache or cache_root()) / f"{model_dir.name}-{_model_key(model_dir)}"
    fp32 = folder / "model.onnx"
    if not fp32.is_file():
        _export_fp32(model_dir, fp32)
    if not int8:
        return fp32
    q8 = folder / "model_int8.onnx"
    if not q8.is_file():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = q8.with_suffix(f".{os.getpid()}.tmp.onnx")  # a unique name: parallel processes may export at once
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # the quantiser advises "pre-processing" through the root logger on every call
        try:
            quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.setLevel(level)
        tmp.replace(q8)
        log.info("quantised %s to int8: %s", fp32, q8)
    return q8


def _export_fp32(model_dir: Path, path: Path) -> None:
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir)).eval()

    class _Hidden(torch.nn.Module):  # the last hidden state only: pooling runs in numpy after the runtime
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    path.parent.mkdir(parents=True, exist_ok=True)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dummy = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.onnx")
    # the tracer warns about Python-side branches of the attention code; the graph is checked against torch's vectors
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Hidden(),
            dummy,
            str(tmp),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={**{n: {0: "batch", 1: "seq"} for n in names}, "last_hidden_state": {0: "batch", 1: "seq"}},
            opset_version=17,
            dynamo=False,
        )
    tmp.replace(path)
    log.info("exported %s to ONNX: %s", model_dir, path)


def _pooling_mode(model_dir: Path) -> str:
    """'mean' or 'cls' from the sentence-transformers pooling config (mean when the folder has none)."""
    modules = model_dir / "modules.json"
    if not modules.is_file():
        return "mean"
    for m in json.loads(modules.read_text("utf-8")):
        if m.get("type", "").endswith("Pooling"):
            cfg = json.loads((model_dir / m["path"] / "config.json").read_text("utf-8"))
            if cfg.get("pooling_mode_mean_tokens"):
                return "mean"
            if cfg.get("pooling_mode_cls_token"):
                return "cls"
            raise ConfigError("EncoderConfig", "backend", str(model_dir), f"pooling {cfg} is not mean or CLS")
    return "mean"


def _max_length(model_dir: Path, override: int | None) -> int:
    if override is not None:
        return override
    cfg = model_dir / "sentence_bert_config.json"
    if cfg.is_file():
        return int(json.loads(cfg.read_text("utf-8")).get("max_seq_length", 512))
    return 512


def _ort_runner(path: Path, threads: int) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")  # spinning threads starve a shared CPU
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in sess.get_inputs()}
    return lambda feeds: sess.run(None, {k: v for k, v in feeds.items() if k in wanted})[0]


def _ov_runner(path: Path, threads: int) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    import openvino as ov

    core = ov.Core()
    model = core.read_model(str(path))
    wanted = {p.get_any_name() for p in model.inputs}
    props: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "f32"}  # no silent bf16 on CPUs that have it
    if threads:
        props["INFERENCE_NUM_THREADS"] = threads
    compiled = core.compile_model(model, "CPU", props)
    return lambda feeds: compiled({k: v for k, v in feeds.items() if k in wanted})[0]


class OnnxSentenceEncoder:
    """Runs an exported sentence-transformers model; ``encode`` returns L2-normalised (n, dim) float32 rows."""

    MIN_BATCH = 4  # rows a length bucket takes before padding may close it: one pass costs ~2 ms beyond its tokens

    def __init__(
        self,
        model_dir: Path,
        backend: str,
        threads: int = 0,
        max_seq_length: int | None = None,
        max_padding: float = 0.2,
    ) -> None:
        from transformers import AutoTokenizer

        require_runtime(backend)
        runtime, _, quant = backend.partition("-")
        path = export_onnx(model_dir, int8=quant == "int8")
        self.run = (_ort_runner if runtime == "onnx" else _ov_runner)(path, threads)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.pooling = _pooling_mode(model_dir)
        self.max_length = _max_length(model_dir, max_seq_length)
        self.max_padding = max_padding
        self.dim = int(json.loads((model_dir / "config.json").read_text("utf-8"))["hidden_size"])

    def encode(self, texts: Sequence[str], batch_size: int, step: Callable[[int], None] | None = None) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)  # (n, dim)
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        rows = {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
        lengths = [len(ids) for ids in rows["input_ids"]]
        for idx in plan_length_batches(lengths, batch_size, self.max_padding, self.MIN_BATCH):
            feeds = _padded(rows, idx, self.tokenizer.pad_token_id or 0, self.tokenizer.padding_side)
            hidden = np.asarray(self.run(feeds), dtype=np.float32)  # (b, seq, dim)
            if self.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                mask = feeds["attention_mask"][:, :, None].astype(np.float32)  # (b, seq, 1)
                pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[idx] = pooled / np.clip(norms, 1e-12, None)
            if step is not None:
                step(len(idx))
        return out


def _padded(rows: dict[str, list[list[int]]], idx: list[int], pad_id: int, side: str) -> dict[str, np.ndarray]:
    """The rows ``idx`` of the unpadded encodings as (b, longest) int64 arrays, padded on the tokenizer's side."""
    longest = max(len(rows["input_ids"][i]) for i in idx)
    feeds = {}
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        arr = np.full((len(idx), longest), pad_id if key == "input_ids" else 0, dtype=np.int64)  # (b, longest)
        for r, i in enumerate(idx):
            vals = rows[key][i] if key in rows else [0] * len(rows["input_ids"][i])
            if side == "left":
                arr[r, longest - len(vals) :] = vals
            else:
                arr[r, : len(vals)] = vals
        feeds[key] = arr
    return feeds
