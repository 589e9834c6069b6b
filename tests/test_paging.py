"""Deep paging (Dynamic Search-R1 ``<more info> k``): disjoint consecutive pages, lazy deeper fetches."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from effirag.errors import ConfigError
from effirag.retrieval.base import RetrievalMode, RetrievalResult
from effirag.retrieval.paging import DeepPager
from effirag.types import ItemKind, RetrievedItem


class RankedList:
    """A retriever over a fixed ranking of ``n`` items per query; records every k it was asked for."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.asked: list[int] = []

    def retrieve(
        self,
        query: str,
        mode: RetrievalMode | str = RetrievalMode.PASSAGE,
        k: int = 5,
        entities: Sequence[str] | None = None,
        offset: int = 0,
    ) -> RetrievalResult:
        self.asked.append(k)
        items = [RetrievedItem(ItemKind.CHUNK, f"{query}-{i}", f"text {i}", 1.0 / (i + 1)) for i in range(self.n)]
        return RetrievalResult(items[offset : offset + k], {"semantic": 0.0})


def test_pages_are_disjoint_and_consecutive() -> None:
    r = RankedList(100)
    pager = DeepPager(r, depth=8)
    pages = [pager.search("q", "passage", 3).items]
    pages += [pager.more(3).items for _ in range(5)]
    ids = [it.id for page in pages for it in page]
    assert ids == [f"q-{i}" for i in range(18)]  # the ranking's first 18 items, in order, none twice
    # depth 8 serves items 0–5; page 3 (items 6–8) needs 9 > 8 → fetch 16; pages 4–5 come from the cache;
    # page 6 (items 15–17) needs 18 > 16 → fetch 32.
    assert r.asked == [8, 16, 32]


def test_cache_serves_without_searching_and_reports_offsets() -> None:
    r = RankedList(100)
    pager = DeepPager(r, depth=10)
    first = pager.search("q", "passage", 5)
    second = pager.more(5)
    assert first.extras["offset"] == 0 and second.extras["offset"] == 5
    assert second.extras["from_cache"] is True
    assert pager.fetches == 1


def test_end_of_ranking_gives_empty_pages() -> None:
    pager = DeepPager(RankedList(7), depth=5)
    assert len(pager.search("q", "sparse", 5).items) == 5
    last = pager.more(5)
    assert [it.id for it in last.items] == ["q-5", "q-6"]
    assert last.extras["exhausted"] is True
    assert pager.more(5).items == []


def test_queries_are_cached_separately_and_reset() -> None:
    r = RankedList(50)
    pager = DeepPager(r, depth=4)
    pager.search("a", "passage", 2)
    pager.search("b", "passage", 2)
    assert [it.id for it in pager.more(2).items] == ["b-2", "b-3"]  # the last query
    assert [it.id for it in pager.more(2, query="a").items] == ["a-2", "a-3"]
    pager.reset()
    with pytest.raises(ConfigError, match="no earlier search"):
        pager.more(2)


def test_bad_input() -> None:
    pager = DeepPager(RankedList(5))
    with pytest.raises(ConfigError, match="no earlier search"):
        pager.more(3)
    pager.search("q", "passage", 2)
    with pytest.raises(ConfigError, match="k=0"):
        pager.more(0)
    with pytest.raises(ConfigError, match="unknown retrieval mode"):
        pager.search("q", "telepathy", 2)
    with pytest.raises(ConfigError, match="depth"):
        DeepPager(RankedList(5), depth=0)
