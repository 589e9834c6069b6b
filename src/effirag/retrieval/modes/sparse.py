"""Mode ``sparse``: BM25 over the passages (timing ``sparse``)."""

from __future__ import annotations

from typing import Any, ClassVar

from effirag.retrieval.context import timed
from effirag.retrieval.modes.base import ModeComponent
from effirag.types import RetrievedItem


class SparseMode(ModeComponent):
    name: ClassVar[str] = "sparse"
    needs: ClassVar[frozenset[str]] = frozenset({"sparse"})
    rerankable: ClassVar[bool] = True

    def rank(
        self, query: str, depth: int, entities: list[str], timings: dict[str, float], extras: dict[str, Any]
    ) -> list[RetrievedItem]:
        return timed(timings, "sparse", self.ctx.sparse_search, query, depth)
