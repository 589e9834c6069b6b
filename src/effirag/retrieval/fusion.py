"""Reciprocal Rank Fusion (RouteRAG eq. 1; Cormack et al. 2009): merge ranked lists from several retrievers."""

from __future__ import annotations

from collections.abc import Sequence


def rrf(rankings: Sequence[Sequence[str]], k: int = 60) -> list[tuple[str, float]]:
    """RRF(d) = Σ_m 1 / (k + rank_m(d)) over the rankings m that contain d; ranks are 1-based (RouteRAG eq. 1).

    Returns ``(id, score)`` sorted by score descending. Ties are broken deterministically: the better best rank
    first, then the earlier ranking in which that best rank occurs, then the id. A ranking that repeats an id is
    an error (it would count the document twice).
    """
    if k < 0:
        raise ValueError(f"k={k!r}: must be >= 0")
    scores: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}  # id → (best rank, index of the ranking where it occurs first)
    for m, ranking in enumerate(rankings):
        seen: set[str] = set()
        for rank, doc in enumerate(ranking, start=1):
            if doc in seen:
                raise ValueError(f"ranking {m} lists {doc!r} twice")
            seen.add(doc)
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
            if doc not in best or (rank, m) < best[doc]:
                best[doc] = (rank, m)
    return sorted(scores.items(), key=lambda kv: (-kv[1], best[kv[0]], kv[0]))
