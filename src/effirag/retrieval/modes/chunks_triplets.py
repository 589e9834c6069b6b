"""Mode ``chunks_triplets``: the Single-Con baseline (TeaRAG's), the passage component's top-k chunks followed by the
top-k two-stage triplets for the query and key entities (timings ``semantic``, ``triplets``). Its k items are laid out
by kind, not ranked as one list, so ``offset`` does not page them."""

from __future__ import annotations

from typing import Any, ClassVar

from effirag.retrieval.context import timed
from effirag.retrieval.modes.base import ModeComponent
from effirag.retrieval.triplets import TripletStage
from effirag.types import RetrievedItem


class ChunksTripletsMode(ModeComponent):
    name: ClassVar[str] = "chunks_triplets"
    needs: ClassVar[frozenset[str]] = frozenset({"dense", "kg"})
    uses_entities: ClassVar[bool] = True
    pages: ClassVar[bool] = False

    def rank(
        self, query: str, depth: int, entities: list[str], timings: dict[str, float], extras: dict[str, Any]
    ) -> list[RetrievedItem]:
        chunks = self.ctx.component("passage").retrieve(query, "passage", depth)
        for key, secs in chunks.timings.items():
            timings[key] = timings.get(key, 0.0) + secs
        pairs = timed(timings, "triplets", self.ctx.two_stage().search, entities, query, TripletStage(k_t=depth))
        return [*chunks.items, *[item for item, _ in pairs][:depth]]
