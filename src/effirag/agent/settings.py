"""A policy's inference settings: the settings a checkpoint was measured with, stored next to its weights.

A checkpoint folder may hold ``inference.yaml`` (:data:`SETTINGS_FILE`), loaded into :class:`InferenceSettings`.
Commands that run the policy (``effirag ask``, ``eval qa``, ``demo``, ``serve``) start from these settings, so a
policy is run the way its figures were measured; a key the user sets on the command line wins. A field left out (or
``null``) keeps the engine's own default, and a checkpoint without the file behaves as before.

Paths in the file (the folder of ``reranker``, a spec of :mod:`effirag.retrieval.rerank`) are relative to the
checkpoint folder, so the folder and what it names move together whatever the working directory; an absolute path
is kept as is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from effirag.agent.config import EngineConfig
from effirag.agent.protocols import PROTOCOLS
from effirag.config import check, load_config, option
from effirag.errors import ConfigError
from effirag.retrieval.rerank import RerankerSpec, parse_reranker

SETTINGS_FILE = "inference.yaml"
# the EngineConfig fields a checkpoint may fix (sampling and run bookkeeping stay the caller's)
ENGINE_KEYS = (
    "k",
    "max_steps",
    "max_new_tokens",
    "max_total_tokens",
    "max_inserted_tokens",
    "frequency_penalty",
    "presence_penalty",
    "mode",
)


@dataclass(frozen=True)
class InferenceSettings:
    """What a policy was measured with; every field is optional (None: the command's own default)."""

    protocol: str | None = option(None, help="Default agent protocol (a command's --protocol wins).")
    reranker: str | None = option(
        None,
        help="Reranker spec: cross-encoder:DIR (every mode), bilinear:DIR or a bare DIR (KAG's scorer), DIR relative "
        "to the checkpoint folder (or absolute); None or none: bi-encoder cosines, no reranking.",
    )
    k: int | None = option(None, help="Items retrieved per search.")
    max_steps: int | None = option(None, help="Most model turns per episode.")
    max_new_tokens: int | None = option(None, help="Most tokens generated per turn.")
    max_total_tokens: int | None = option(None, help="Most tokens in an episode's context.")
    max_inserted_tokens: int | None = option(None, help="Most tokens one observation may insert.")
    frequency_penalty: float | None = option(None, help="OpenAI-style frequency penalty per turn.")
    presence_penalty: float | None = option(None, help="OpenAI-style presence penalty per turn.")
    mode: str | None = option(None, help="Retrieval mode of every search; None: each protocol's own.")

    def __post_init__(self) -> None:
        check(self.protocol is None or self.protocol in PROTOCOLS, self, "protocol", f"must be one of {PROTOCOLS}")
        check(self.reranker is None or bool(self.reranker.strip()), self, "reranker", "must be a spec or null")
        parse_reranker(self.reranker, type(self).__name__)
        try:  # the engine's own rules (k >= 1, penalties in [-2, 2], known mode, …), reported under this class
            EngineConfig(**self.engine_values())
        except ConfigError as e:
            raise ConfigError(type(self).__name__, e.field, e.value, str(e).split(": ", 1)[-1]) from e

    def engine_values(self) -> dict[str, Any]:
        """The engine fields this file sets (None fields left out)."""
        return {k: getattr(self, k) for k in ENGINE_KEYS if getattr(self, k) is not None}

    def engine_overrides(self) -> list[str]:
        """The engine fields as ``key=value`` strings, to be placed before the user's own ``--set`` overrides."""
        return [f"{k}={v}" for k, v in self.engine_values().items()]

    def reranker_spec(self, checkpoint: Path) -> RerankerSpec | None:
        """The reranker with its folder resolved against ``checkpoint`` (normalised, so it prints as the user would
        type); None when the file names none."""
        spec = parse_reranker(self.reranker, type(self).__name__)
        return None if spec is None else spec.resolved(checkpoint)

    def shown(self) -> dict[str, Any]:
        """The fields that are set, for the one-line report of which settings a run used."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


def load_settings(checkpoint: Path) -> InferenceSettings | None:
    """The settings of a checkpoint folder (``checkpoint/inference.yaml``) or of a settings file given directly;
    None when a folder holds no settings file. A malformed file fails with its path, field and value named."""
    path = checkpoint if checkpoint.is_file() else checkpoint / SETTINGS_FILE
    if not path.is_file():
        return None
    return load_config(InferenceSettings, path)


def settings_folder(path: Path) -> Path:
    """The folder that relative paths of the settings at ``path`` (a folder or a settings file) are resolved from."""
    return path.parent if path.is_file() else path


def overridden(settings: InferenceSettings, user_sets: Sequence[str], **explicit: Any) -> list[str]:
    """Names of the settings' fields that the user set: ``key=value`` overrides plus explicit options not None."""
    keys = {s.split("=", 1)[0].strip() for s in user_sets}
    keys |= {k for k, v in explicit.items() if v is not None}
    return sorted(k for k in settings.shown() if k in keys)


def carry_settings(start: Path, dest: Path) -> Path | None:
    """Write the settings of checkpoint ``start`` into ``dest``, a policy trained from it, so that commands run the
    trained policy the way its start was measured; the reranker folder is made absolute (``dest`` sits elsewhere,
    usually in a run folder). Returns the file written, or None when ``start`` has no settings (nothing written),
    also when it is no folder: a hub id, or a model file that :func:`load_settings` would read as a settings file."""
    found = load_settings(start) if start.is_dir() else None
    if found is None:
        return None
    values = found.shown()
    spec = found.reranker_spec(start)
    if spec is not None:
        values["reranker"] = str(spec.absolute())
    path = dest / SETTINGS_FILE
    header = f"# Inference settings carried over from the start policy {start.resolve()}.\n"
    path.write_text(header + yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    return path
