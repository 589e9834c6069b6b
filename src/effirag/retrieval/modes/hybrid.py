"""Mode ``hybrid``: RouteRAG eq. 1, Reciprocal Rank Fusion of the passage and graph components.

Each component ranks ``max(depth, fusion_depth)`` items (so a deep page sees the same fused list as the first);
the fused list keeps the fused RRF score. Timings: the components' (``semantic``, ``graph``) and ``fusion``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, ClassVar

from effirag.retrieval.fusion import rrf
from effirag.retrieval.modes.base import ModeComponent
from effirag.types import RetrievedItem

FUSED = ("passage", "graph")  # the component rankings fused, in RRF tie-break order


class HybridMode(ModeComponent):
    name: ClassVar[str] = "hybrid"
    needs: ClassVar[frozenset[str]] = frozenset({"dense", "kg"})
    rerankable: ClassVar[bool] = True

    def rank(
        self, query: str, depth: int, entities: list[str], timings: dict[str, float], extras: dict[str, Any]
    ) -> list[RetrievedItem]:
        n = min(max(depth, self.ctx.config.fusion_depth), self.ctx.max_k)
        rankings = []
        for name in FUSED:
            res = self.ctx.component(name).retrieve(query, name, n)
            for key, secs in res.timings.items():
                timings[key] = timings.get(key, 0.0) + secs
            rankings.append(res.items)
        t0 = time.perf_counter()
        by_id = {it.id: it for ranking in reversed(rankings) for it in ranking}
        fused = rrf([[it.id for it in ranking] for ranking in rankings], k=self.ctx.config.rrf_k)
        timings["fusion"] = time.perf_counter() - t0
        return [replace(by_id[i], score=s) for i, s in fused[:depth]]
