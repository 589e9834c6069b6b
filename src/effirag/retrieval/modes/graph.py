"""Mode ``graph``: HippoRAG-style Personalized PageRank over the knowledge graph (timing ``graph``)."""

from __future__ import annotations

from typing import Any, ClassVar

from effirag.retrieval.context import timed
from effirag.retrieval.modes.base import ModeComponent
from effirag.types import RetrievedItem


class GraphMode(ModeComponent):
    name: ClassVar[str] = "graph"
    needs: ClassVar[frozenset[str]] = frozenset({"kg"})
    rerankable: ClassVar[bool] = True

    def rank(
        self, query: str, depth: int, entities: list[str], timings: dict[str, float], extras: dict[str, Any]
    ) -> list[RetrievedItem]:
        return list(timed(timings, "graph", self.ctx.hippo().retrieve, query, depth))
