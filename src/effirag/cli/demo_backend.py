"""The policy backend of ``effirag demo``: the ``--backend`` choice as a backend spec, checked before any work, and
the checkpoint described from its files (whichever backend runs it)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from effirag.cli.common import fail


def demo_backend(choice: str, model: Path) -> str:
    """The backend spec of the policy ``model`` (``--backend``: hf on the CPU by default); vllm fails here, before
    any work, where vLLM is not installed."""
    from effirag.errors import BackendError
    from effirag.llm.factory import policy_backend, vllm_missing

    try:
        spec = policy_backend(choice, str(model), {"hf": "device=cpu"})
    except BackendError as e:
        fail(f"--backend: {e}")
    why = vllm_missing() if spec.startswith("vllm:") else ""
    if why:
        fail(f"--backend {choice}: {why}")
    if not (model / "config.json").is_file():
        raise FileNotFoundError(f"policy checkpoint not found: {model} (train it: effirag train sft --config …)")
    return spec


def describe_checkpoint(model: Path) -> str:
    """The checkpoint's model type and parameter count, read from its files (whichever backend runs it)."""
    from safetensors import safe_open

    kind = json.loads((model / "config.json").read_text("utf-8")).get("model_type", "?")
    n = 0
    for file in sorted(model.glob("*.safetensors")):
        with safe_open(str(file), framework="np") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                n += math.prod(f.get_slice(name).get_shape())
    return f"{kind}, {n / 1e6:.2f}M parameters"
