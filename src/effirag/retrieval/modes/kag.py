"""Mode ``kag``: TeaRAG §4.2, composed of the passage component and the two-stage triplet retriever, filtered by PPR.

The passage component's top ``semantic_top`` chunks are reranked to k_d (timing ``rerank``), the two-stage triplet
retrieval keeps k_t triplets around the key entities (``triplets``; without key entities the subquery alone seeds it),
and the KAG + PPR filter keeps the call's k (``kag_ppr``, with its own stages as ``kag_*``). The KAG and its PPR
scores go to ``extras["kag"]`` for the viewer.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, ClassVar

from effirag.retrieval.context import rendered, timed
from effirag.retrieval.kag import KAGFilter
from effirag.retrieval.modes.base import ModeComponent
from effirag.retrieval.similarity import BiEncoderSimilarity
from effirag.types import RetrievedItem


class KAGMode(ModeComponent):
    name: ClassVar[str] = "kag"
    needs: ClassVar[frozenset[str]] = frozenset({"dense", "kg"})
    uses_entities: ClassVar[bool] = True

    def rank(
        self, query: str, depth: int, entities: list[str], timings: dict[str, float], extras: dict[str, Any]
    ) -> list[RetrievedItem]:
        ctx, c = self.ctx, self.ctx.config.kag
        sim = ctx.similarity
        assert sim is not None
        found = ctx.component("passage").retrieve(query, "passage", min(max(c.semantic_top, depth), ctx.max_k))
        for key, secs in found.timings.items():
            timings[key] = timings.get(key, 0.0) + secs
        chunks = found.items
        # With the index's own bi-encoder as the similarity, sim(query, chunk) and sim(query, triplet) are exactly the
        # inner products the dense and triplet searches already returned as item scores (same encoder, same texts:
        # `title\ntext` as indexed, the triplet text as embedded in the KG); scoring again would re-encode ~30 texts
        # per query (about 1.5 s with MiniLM on 2 CPU cores).
        reuse = isinstance(sim, BiEncoderSimilarity) and sim.encoder is ctx.encoder
        t0 = time.perf_counter()
        sims = [it.score for it in chunks] if reuse else sim.score(query, [rendered(it) for it in chunks])
        order = sorted(range(len(chunks)), key=lambda i: (-sims[i], i))[: max(c.k_d, depth)]
        chunks = [replace(chunks[i], score=float(sims[i])) for i in order]
        timings["rerank"] = time.perf_counter() - t0
        triplets = timed(timings, "triplets", ctx.two_stage().search, entities, query, c.triplet_stage)
        t0 = time.perf_counter()
        kag = KAGFilter(replace(c, k_f=depth))
        if reuse:
            scores = ([it.score for it in chunks], [it.score for it, _ in triplets])
            result = kag.filter_scored(entities, chunks, triplets, *scores)
        else:
            result = kag.filter(query, entities, chunks, triplets, sim)
        timings["kag_ppr"] = time.perf_counter() - t0
        for name, secs in result.timings.items():
            timings[f"kag_{name}"] = secs
        extras["kag"] = {"graph": result.graph.to_dict(), "scores": result.scores}
        return list(result.items)
