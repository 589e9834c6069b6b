"""Which real models ``effirag models prepare`` knows, where their cached folders live, and the prepare entry point."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from effirag.errors import BackendError

ProgressFn = Callable[[str, int, int], None]
"""``progress(step_description, step_index, total_steps)``: called before each step of a preparation."""


class MissingExtraError(BackendError):
    """The optional extra that ships a model's weights is not installed."""


@dataclass(frozen=True)
class PreparedModel:
    """A model ready to load: ``hf_dir`` for the HF backend, ``gguf`` for llama.cpp (None where none ships)."""

    name: str
    hf_dir: Path
    gguf: Path | None
    reused: bool


def default_cache_dir() -> Path:
    """``$EFFIRAG_CACHE/models`` when set, else ``~/.cache/effirag/models``."""
    root = os.environ.get("EFFIRAG_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "effirag") / "models"


def _gemma(out: Path, progress: ProgressFn | None) -> PreparedModel:
    from effirag.llm.models.gemma import prepare_gemma

    return prepare_gemma(out, progress)


def _smollm2(out: Path, progress: ProgressFn | None) -> PreparedModel:
    from effirag.llm.models.smollm2 import prepare_smollm2

    return prepare_smollm2(out, progress)


KNOWN_MODELS: dict[str, Callable[[Path, ProgressFn | None], PreparedModel]] = {
    "gemma-3-270m": _gemma,
    "smollm2-135m-instruct": _smollm2,
}


def prepare(name: str, out: str | Path | None = None, progress: ProgressFn | None = None) -> PreparedModel:
    """Prepare model ``name`` into ``out`` (default: ``default_cache_dir() / name``), or reuse it if already there."""
    if name not in KNOWN_MODELS:
        raise BackendError(f"unknown model {name!r}; known: {sorted(KNOWN_MODELS)}")
    folder = Path(out) if out is not None else default_cache_dir() / name
    return KNOWN_MODELS[name](folder, progress)
