"""Shared steps of turning a GGUF file into a plain HF folder (:func:`gguf_to_folder`): the completeness marker,
de-quantised loading, and the logits check of a written folder against the GGUF-loaded model.

A marker file written last records the GGUF's SHA-256: a folder without it (an interrupted conversion) is converted
again. The check reloads the written folder as any user would (``from_pretrained(folder)``, no ``gguf`` involved) and
compares its next-token logits with those of the model loaded from the GGUF on a few prompts, so a folder that would
load differently (a config key lost, a tokenizer that splits text differently, a weight not written) is refused
before the marker is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effirag.llm.models.registry import ProgressFn

MARKER = "effirag-prepared.json"
NEEDED = ("config.json", "model.safetensors", "tokenizer.json")
CONVERT_STEPS = 3
"""Progress steps :func:`gguf_to_folder` reports (tokenizer, de-quantising, writing), one more with a ``check``."""

FolderCheck = Callable[[Any, Any, Path], dict[str, Any]]
"""``check(model, tokenizer, folder)``, given the GGUF-loaded model and tokenizer once ``folder`` is written: raises
where the folder is not faithful to them, else returns fields to record in the marker."""


def is_prepared(folder: Path, sha256: str) -> bool:
    """Whether ``folder`` holds a complete conversion of the GGUF with this ``sha256``."""
    marker = folder / MARKER
    if not marker.is_file() or not all((folder / f).is_file() for f in NEEDED):
        return False
    try:
        return bool(json.loads(marker.read_text()).get("gguf_sha256") == sha256)
    except json.JSONDecodeError:
        return False


def write_marker(folder: Path, **fields: Any) -> None:
    """Write the marker (last: it says the folder is complete)."""
    (folder / MARKER).write_text(json.dumps(fields, indent=2) + "\n")


def gguf_to_folder(
    gguf_path: Path,
    folder: Path,
    name: str,
    sha256: str,
    step: ProgressFn,
    first: int,
    total: int,
    check: FolderCheck | None = None,
) -> None:
    """Convert ``gguf_path`` (whose SHA-256 the caller checked) into an HF folder at ``folder``: the tokenizer built
    from the GGUF vocabulary, the float32 de-quantised weights as safetensors, then ``check`` where given, and the
    marker last. Reports steps ``first`` … ``first + CONVERT_STEPS - 1`` (one more with ``check``) of ``total``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).unlink(missing_ok=True)
    from transformers import AutoTokenizer

    step("building the tokenizer from the GGUF vocabulary", first, total)
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    tok.save_pretrained(str(folder))
    step("de-quantising the weights to float32", first + 1, total)
    model = load_dense(gguf_path)
    step("writing safetensors", first + 2, total)
    model.save_pretrained(str(folder), safe_serialization=True)
    checked: dict[str, Any] = {}
    if check is not None:
        step("checking the written folder against the GGUF-loaded model", first + 3, total)
        checked = check(model, tok, folder)
    write_marker(folder, model=name, gguf=gguf_path.name, gguf_sha256=sha256, dtype="float32", **checked)


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


@dataclass(frozen=True)
class LogitCheck:
    """The largest absolute next-token logit difference over the prompts' positions, and the share of positions
    whose arg-max token agrees."""

    max_abs_diff: float
    argmax_agreement: float
    positions: int


def compare_logits(reference: Any, candidate: Any, ids: Sequence[Sequence[int]]) -> LogitCheck:
    """Run both models on each prompt's ``ids`` (one at a time, no padding) and compare every position's logits."""
    import torch

    worst, agree, total = 0.0, 0, 0
    with torch.no_grad():
        for row in ids:
            x = torch.tensor([list(row)])  # [1, T]
            a = reference(input_ids=x).logits[0].float()  # [T, V]
            b = candidate(input_ids=x).logits[0].float()  # [T, V]
            if a.shape != b.shape:
                raise ValueError(f"logits of shape {tuple(b.shape)} where the reference has {tuple(a.shape)}")
            worst = max(worst, float((a - b).abs().max()))
            agree += int((a.argmax(-1) == b.argmax(-1)).sum())
            total += a.shape[0]
    return LogitCheck(worst, agree / max(total, 1), total)


def check_folder(
    reference: Any, reference_tokenizer: Any, folder: Path, prompts: Sequence[str], tolerance: float
) -> LogitCheck:
    """Load ``folder`` as a user would and compare it with the GGUF-loaded ``reference`` on ``prompts``: the folder's
    tokenizer must encode every prompt to the reference tokenizer's ids, and every logit must lie within
    ``tolerance`` of the reference's with the same arg-max. ValueError names the prompt or the difference."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    ids = []
    for p in prompts:
        mine, theirs = tok.encode(p), reference_tokenizer.encode(p)
        if list(mine) != list(theirs):
            raise ValueError(f"{folder}: the written tokenizer encodes {p[:60]!r} differently from the GGUF's")
        ids.append(mine)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    result = compare_logits(reference.eval(), model, ids)
    if result.max_abs_diff > tolerance or result.argmax_agreement < 1.0:
        raise ValueError(
            f"{folder}: logits differ from the GGUF-loaded model's: max |diff| {result.max_abs_diff:.3g} "
            f"(tolerance {tolerance:g}), arg-max agreement {result.argmax_agreement:.3f} over {result.positions} "
            "positions"
        )
    return result
