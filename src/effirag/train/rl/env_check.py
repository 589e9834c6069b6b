"""Checks of the environment fields that the GRPO and PPO run configs share (same names, same meaning)."""

from __future__ import annotations

from typing import Any

from effirag.config import check


def check_environment(cfg: Any) -> None:
    """``max_questions`` ≥ 0; the retrieval source is an index folder or an ``http(s)://`` retriever URL, not both;
    a reranker only with the index in-process."""
    check(cfg.max_questions >= 0, cfg, "max_questions", "must be >= 0")
    check(not (cfg.index and cfg.retriever), cfg, "retriever", "give index or retriever, not both")
    check(
        not (cfg.reranker and cfg.retriever),
        cfg,
        "reranker",
        "a reranker needs the index in-process, not a retriever URL",
    )
    check(
        not cfg.retriever or cfg.retriever.startswith(("http://", "https://")),
        cfg,
        "retriever",
        "must be an http:// or https:// URL",
    )
