"""Deep paging for Dynamic Search-R1's ``<more info> k``: the next k results of a query without searching again.

One :class:`DeepPager` lives for one trajectory. The first page of a query fetches a ranked list ``depth`` deep (at
least k) and caches it; each ``more(k)`` serves the next k items from the cache. When the cache runs out the pager
fetches a list twice as deep (lazily, only then) and serves from it, skipping items already served, so pages are
always disjoint and consecutive. A list shorter than what was asked for is the end of the ranking: later pages are
empty.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from effirag.errors import ConfigError
from effirag.retrieval.base import RetrievalMode, RetrievalResult, Retriever
from effirag.retrieval.modes import parse_mode
from effirag.types import RetrievedItem

PageKey = tuple[str, str, tuple[str, ...]]  # (mode, query, entities)


@dataclass
class _Ranked:
    items: list[RetrievedItem]
    depth: int  # how deep the cached list was requested
    pos: int = 0  # scan position in ``items``: everything before it was served or skipped
    served_ids: set[tuple[str, str]] = field(default_factory=set)  # (kind, id) of served items

    def unserved(self) -> int:
        return sum(1 for it in self.items[self.pos :] if (it.kind.value, it.id) not in self.served_ids)

    @property
    def exhausted(self) -> bool:
        return len(self.items) < self.depth


class DeepPager:
    """Per-trajectory cache of ranked lists over a :class:`Retriever`.

    ``depth``: how deep the first fetch of a query goes (≥ the first page's k). ``max_depth``: the deepest list ever
    fetched (defaults to the retriever's ``max_k`` when it has one, else 1000).
    """

    def __init__(self, retriever: Retriever, depth: int = 20, max_depth: int | None = None) -> None:
        if depth <= 0:
            raise ConfigError("DeepPager", "depth", depth, "must be > 0")
        self.retriever = retriever
        self.depth = depth
        self.max_depth = max_depth or int(getattr(retriever, "max_k", 1000))
        self._cache: dict[PageKey, _Ranked] = {}
        self._last: PageKey | None = None
        self.fetches = 0  # retriever calls made (for accounting and tests)

    def reset(self) -> None:
        """Forget every cached list (a new trajectory)."""
        self._cache.clear()
        self._last = None

    def _fetch(self, key: PageKey, depth: int) -> tuple[list[RetrievedItem], dict[str, float]]:
        mode, query, entities = key
        self.fetches += 1
        res = self.retriever.retrieve(query, mode=mode, k=depth, entities=list(entities) or None)
        return res.items, res.timings

    def search(
        self, query: str, mode: RetrievalMode | str = RetrievalMode.PASSAGE, k: int = 5, entities: Sequence[str] = ()
    ) -> RetrievalResult:
        """First page (items 0…k−1) of ``query``; a repeated identical search starts over from the top."""
        key: PageKey = (parse_mode(mode), query, tuple(entities))
        depth = min(max(k, self.depth), self.max_depth)
        items, timings = self._fetch(key, depth)
        self._cache[key] = _Ranked(items, depth)
        self._last = key
        return self._serve(key, k, timings, from_cache=False)

    def more(self, k: int, query: str | None = None, mode: RetrievalMode | str | None = None) -> RetrievalResult:
        """The next ``k`` items of the last query (or of ``query``/``mode`` searched earlier in this trajectory)."""
        if k <= 0:
            raise ConfigError("more_info", "k", k, "must be > 0")
        key = self._last
        if query is not None:
            matches = [c for c in self._cache if c[1] == query and (mode is None or c[0] == parse_mode(mode))]
            key = matches[-1] if matches else None
        if key is None:
            raise ConfigError("more_info", "query", query, "no earlier search in this trajectory to continue")
        self._last = key
        ranked = self._cache[key]
        timings: dict[str, float] = {}
        from_cache = True
        if ranked.unserved() < k and not ranked.exhausted and ranked.depth < self.max_depth:
            depth = min(max(2 * ranked.depth, len(ranked.served_ids) + k), self.max_depth)
            ranked.items, timings = self._fetch(key, depth)
            ranked.depth, ranked.pos = depth, 0  # rescan the deeper list; served items are skipped by id
            from_cache = False
        return self._serve(key, k, timings, from_cache)

    def _serve(self, key: PageKey, k: int, timings: dict[str, float], from_cache: bool) -> RetrievalResult:
        t0 = time.perf_counter()
        ranked = self._cache[key]
        page: list[RetrievedItem] = []
        i = ranked.pos
        while len(page) < k and i < len(ranked.items):
            it = ranked.items[i]
            i += 1
            if (it.kind.value, it.id) in ranked.served_ids:
                continue
            ranked.served_ids.add((it.kind.value, it.id))
            page.append(it)
        offset = len(ranked.served_ids) - len(page)
        ranked.pos = i
        t = dict(timings)
        t["paging"] = time.perf_counter() - t0
        return RetrievalResult(
            page,
            t,
            {"offset": offset, "from_cache": from_cache, "exhausted": ranked.exhausted and i >= len(ranked.items)},
        )
