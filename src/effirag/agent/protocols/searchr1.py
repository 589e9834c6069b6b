"""The Search-R1 family: Search-R1, RouteRAG (retrieval-mode prefixes) and Dynamic Search-R1 (``<more info> k``).

Turn grammar (Search-R1, Jin et al. 2025): free reasoning in ``<think> … </think>``, then exactly one action:
``<search> query </search>`` (the engine answers with ``<information> … </information>``) or ``<answer> … </answer>``.
RouteRAG (2025) lets the query start with ``[passage]`` (dense), ``[graph]`` (HippoRAG-style PPR) or
``[graph][passage]`` (both, fused by RRF); no prefix means passage. Dynamic Search-R1 adds
``<more info> k </more info>``: the next k results of the last query (deep paging). An unparsable turn is answered with
"My action is not correct. Let me rethink." and counts against the step budget.
"""

from __future__ import annotations

import re
from typing import ClassVar

from effirag.agent.parsing import TagStatus, cut_after_first, extract_tag
from effirag.agent.protocols.base import EpisodeState, ParseResult, Protocol, invalid
from effirag.types import Action

_PREFIX_RE = re.compile(r"^\s*((?:\[\s*[A-Za-z]+\s*\]\s*)+)(.*)$", re.DOTALL)
_ROUTES = {("passage",): "passage", ("graph",): "graph", ("graph", "passage"): "hybrid"}
_ROUTE_PREFIX = {"passage": "[passage] ", "graph": "[graph] ", "hybrid": "[graph][passage] "}

_CORE = (
    "Reason inside <think> </think> whenever you receive new information. "
    "When you lack a fact, search for it with <search> query </search>; the results come back between "
    "<information> and </information>. Search as often as you need. "
    "When you are sure, write only the final answer inside <answer> </answer>, for example <answer> Paris </answer>."
)


class SearchR1Protocol(Protocol):
    """Search-R1: ``<think>`` reasoning, ``<search>`` actions, ``<information>`` results, one ``<answer>``."""

    name: ClassVar[str] = "searchr1"
    stop: ClassVar[tuple[str, ...]] = ("</search>", "</answer>")
    title: ClassVar[str] = "Search-R1"

    def instructions(self) -> str:
        return _CORE

    def build_prompt(self, question: str, context: str | None = None) -> str:
        return f"You are a search agent using the {self.title} protocol. {self.instructions()}\nQuestion: {question}\n"

    # --- parsing ---------------------------------------------------------------------------------------------
    def parse_turn(self, text: str, state: EpisodeState) -> ParseResult:
        kept, closer = cut_after_first(text, self.stop)
        think = extract_tag(kept, "think")
        extras = {"think": think.value or ""} if think.status is TagStatus.OK else {}
        actions = {c[2:-1]: extract_tag(kept, c[2:-1]) for c in self.stop}
        if closer is None:
            opened = [t.describe() for t in actions.values() if t.status is not TagStatus.MISSING]
            return invalid(kept, "no action tag closed" + (f" ({', '.join(opened)})" if opened else ""), **extras)
        tag = closer[2:-1]
        found = actions[tag]
        others = [t.describe() for name, t in actions.items() if name != tag and t.status is not TagStatus.MISSING]
        if others:
            return invalid(kept, f"more than one action: {', '.join(others)}", **extras)
        if not found.ok:
            return invalid(kept, found.describe(), **extras)
        assert found.value is not None
        if tag == "answer":
            return ParseResult(Action.ANSWER, kept, answer=found.value, extras=extras)
        if tag == "search":
            return self.parse_query(kept, found.value, extras)
        return self.parse_more(kept, found.value, extras)

    def parse_query(self, kept: str, query: str, extras: dict[str, str]) -> ParseResult:
        return ParseResult(Action.SEARCH, kept, query=query, mode=self.default_mode, extras=extras)

    def parse_more(self, kept: str, value: str, extras: dict[str, str]) -> ParseResult:
        return invalid(kept, "<more info> is not part of this protocol", **extras)

    # --- what a perfect model writes (SFT data) ---------------------------------------------------------------
    def render_search(self, think: str, query: str, mode: str | None = None) -> str:
        """One search turn: ``<think> … </think>\\n<search> query </search>``."""
        return f"<think> {think} </think>\n<search> {self.route_prefix(mode)}{query} </search>"

    def render_answer(self, think: str, answer: str) -> str:
        """The answering turn: ``<think> … </think>\\n<answer> answer </answer>``."""
        return f"<think> {think} </think>\n<answer> {answer} </answer>"

    def route_prefix(self, mode: str | None) -> str:
        return ""


class RouteRAGProtocol(SearchR1Protocol):
    """RouteRAG: the search query carries its retrieval route as a prefix ([passage], [graph], [graph][passage])."""

    name: ClassVar[str] = "routerag"
    mode_choice: ClassVar[str] = "model"
    title: ClassVar[str] = "RouteRAG"

    def instructions(self) -> str:
        return (
            _CORE + " Begin each query with its route: [passage] searches text passages, [graph] searches the "
            "knowledge graph, [graph][passage] searches both; without a route, passages are searched."
        )

    def parse_query(self, kept: str, query: str, extras: dict[str, str]) -> ParseResult:
        m = _PREFIX_RE.match(query)
        if m is None:
            return ParseResult(Action.SEARCH, kept, query=query, mode="passage", extras=extras)
        route = tuple(p.strip().lower() for p in re.findall(r"\[([^\]]*)\]", m.group(1)))
        mode = _ROUTES.get(route)
        if mode is None:
            return invalid(kept, f"<search>: malformed route {m.group(1).strip()!r}", **extras)
        rest = m.group(2).strip()
        if not rest:
            return invalid(kept, "<search>: empty query after route", **extras)
        return ParseResult(Action.SEARCH, kept, query=rest, mode=mode, extras=extras)

    def route_prefix(self, mode: str | None) -> str:
        return _ROUTE_PREFIX.get(mode or "", "")


class DynamicSearchR1Protocol(SearchR1Protocol):
    """Dynamic Search-R1: Search-R1 plus ``<more info> k </more info>`` for the next k results of the last query."""

    name: ClassVar[str] = "dsr1"
    stop: ClassVar[tuple[str, ...]] = ("</search>", "</answer>", "</more info>")
    title: ClassVar[str] = "Dynamic Search-R1"

    def __init__(self, max_more_info_k: int = 10) -> None:
        self.max_more_info_k = max_more_info_k

    def instructions(self) -> str:
        return (
            _CORE + " If the results of your last search were not enough, ask for its next k results with "
            "<more info> k </more info>."
        )

    def parse_more(self, kept: str, value: str, extras: dict[str, str]) -> ParseResult:
        if not re.fullmatch(r"\d{1,6}", value):
            return invalid(kept, f"<more info>: malformed k {value!r}", **extras)
        k = int(value)
        if not 1 <= k <= self.max_more_info_k:
            return invalid(kept, f"<more info>: k={k} outside 1..{self.max_more_info_k}", **extras)
        return ParseResult(Action.MORE_INFO, kept, k=k, extras=extras)

    def render_more_info(self, think: str, k: int) -> str:
        """A deep-paging turn: ``<think> … </think>\\n<more info> k </more info>``."""
        return f"<think> {think} </think>\n<more info> {k} </more info>"
