"""The base of a retrieval-mode component: one mode behind the ``Retriever`` protocol over a :class:`ModeContext`."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar

from effirag.errors import ConfigError
from effirag.retrieval.base import RetrievalMode, RetrievalResult
from effirag.retrieval.context import ModeContext
from effirag.retrieval.rerank import rerank_top
from effirag.types import RetrievedItem


class ModeComponent(abc.ABC):
    """One retrieval mode. Subclasses set ``name`` and what they need, and implement :meth:`rank`.

    ``retrieve`` serves items ``offset … offset+k−1`` of the mode's ranking (``pages``) with the stage timings; token
    counts, query validation and the index checks are the facade's (:class:`~effirag.retrieval.facade.EffiRetriever`).
    With ``rerank`` (the facade's top-level call, never a composing mode's) and a reranker in the context, a
    ``rerankable`` mode's first ``rerank_depth`` candidates are reordered by it (timing ``rerank``) before paging.
    """

    name: ClassVar[str]
    needs: ClassVar[frozenset[str]] = frozenset()  # parts of the index the mode reads: "dense", "sparse", "kg"
    uses_entities: ClassVar[bool] = False  # the mode seeds its search with the caller's key entities
    pages: ClassVar[bool] = True  # False: the mode lays out its own k items (offset does not apply)
    rerankable: ClassVar[bool] = False  # the context's reranker reorders the top of this mode's ranking

    def __init__(self, ctx: ModeContext) -> None:
        self.ctx = ctx

    @abc.abstractmethod
    def rank(
        self, query: str, depth: int, entities: list[str], timings: dict[str, float], extras: dict[str, Any]
    ) -> list[RetrievedItem]:
        """The first ``depth`` items of the ranking for ``query``; stage timings and outputs go to the dicts."""

    def retrieve(
        self,
        query: str,
        mode: RetrievalMode | str | None = None,
        k: int = 5,
        entities: Sequence[str] | None = None,
        offset: int = 0,
        rerank: bool = False,
    ) -> RetrievalResult:
        if mode is not None and str(mode) != self.name:
            raise ConfigError("retrieve", "mode", mode, f"this component serves mode {self.name!r}")
        timings: dict[str, float] = {}
        extras: dict[str, Any] = {"mode": self.name}
        depth = min(offset + k, self.ctx.max_k)
        scorer = self.ctx.reranker if rerank and self.rerankable else None
        if scorer is not None:
            top = min(self.ctx.config.rerank_depth, self.ctx.max_k)
            items = self.rank(query, max(depth, top), list(entities or []), timings, extras)
            items, timings["rerank"] = rerank_top(scorer, query, items, top)
            extras["reranked"] = top
        else:
            items = self.rank(query, depth, list(entities or []), timings, extras)
        if self.pages:
            items = items[offset : offset + k]
        return RetrievalResult(items, timings, extras)
