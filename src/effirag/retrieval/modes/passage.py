"""Mode ``passage``: dense FAISS search over the passages (timing ``semantic``)."""

from __future__ import annotations

from typing import Any, ClassVar

from effirag.retrieval.context import timed
from effirag.retrieval.modes.base import ModeComponent
from effirag.types import RetrievedItem


class PassageMode(ModeComponent):
    name: ClassVar[str] = "passage"
    needs: ClassVar[frozenset[str]] = frozenset({"dense"})
    rerankable: ClassVar[bool] = True

    def rank(
        self, query: str, depth: int, entities: list[str], timings: dict[str, float], extras: dict[str, Any]
    ) -> list[RetrievedItem]:
        return timed(timings, "semantic", self.ctx.dense_search, query, depth)
