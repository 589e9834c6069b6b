"""The Search-R1 family: Search-R1, RouteRAG (retrieval-mode prefixes) and Dynamic Search-R1 (``<more info> k``).

Turn grammar (Search-R1, Jin et al. 2025): free reasoning in ``<think> … </think>``, then exactly one action:
``<search> query </search>`` (the engine answers with ``<information> … </information>``) or ``<answer> … </answer>``.
RouteRAG (2025) lets the query start with ``[passage]`` (dense), ``[graph]`` (HippoRAG-style PPR) or
``[graph][passage]`` (both, fused by RRF); no prefix means passage. Dynamic Search-R1 adds
``<more info> k </more info>``: the next k results of the last query (deep paging). An unparsable turn is answered with
"My action is not correct. Let me rethink." and counts against the step budget.
"""

from __future__ import annotations

import random
import re
from typing import ClassVar

from effirag.agent.parsing import TagStatus, cut_after_first, extract_tag
from effirag.agent.protocols.base import AgentProtocol, EpisodeState, ParseResult, invalid
from effirag.agent.protocols.writing import TrajectoryScript, Turn
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


class SearchR1Protocol(AgentProtocol):
    """Search-R1: ``<think>`` reasoning, ``<search>`` actions, ``<information>`` results, one ``<answer>``."""

    name: ClassVar[str] = "searchr1"
    stop: ClassVar[tuple[str, ...]] = ("</search>", "</answer>")
    title: ClassVar[str] = "Search-R1"

    def instructions(self) -> str:
        return _CORE

    fewshot: ClassVar[bool] = True

    def build_prompt(self, question: str, context: str | None = None) -> str:
        head = f"You are a search agent using the {self.title} protocol. {self.instructions()}\n"
        return head + self.shots() + self.question_block(question, context)

    def question_block(self, question: str, context: str | None = None) -> str:
        return f"Question: {question}\n"

    # --- parsing ---------------------------------------------------------------------------------------------
    def parse_turn(self, text: str, state: EpisodeState) -> ParseResult:
        kept, closer = cut_after_first(text, self.stop)
        found_think = extract_tag(kept, "think")
        think = (found_think.value or "") if found_think.status is TagStatus.OK else None
        actions = {c[2:-1]: extract_tag(kept, c[2:-1]) for c in self.stop}
        if closer is None:
            opened = [t.describe() for t in actions.values() if t.status is not TagStatus.MISSING]
            return invalid(kept, "no action tag closed" + (f" ({', '.join(opened)})" if opened else ""), think=think)
        tag = closer[2:-1]
        found = actions[tag]
        others = [t.describe() for name, t in actions.items() if name != tag and t.status is not TagStatus.MISSING]
        if others:
            return invalid(kept, f"more than one action: {', '.join(others)}", think=think)
        if not found.ok:
            return invalid(kept, found.describe(), think=think)
        assert found.value is not None
        if tag == "answer":
            return ParseResult(Action.ANSWER, kept, answer=found.value, think=think)
        if tag == "search":
            return self.parse_query(kept, found.value, think)
        return self.parse_more(kept, found.value, think)

    def parse_query(self, kept: str, query: str, think: str | None) -> ParseResult:
        return ParseResult(Action.SEARCH, kept, query=query, mode=self.default_mode, think=think)

    def parse_more(self, kept: str, value: str, think: str | None) -> ParseResult:
        return invalid(kept, "<more info> is not part of this protocol", think=think)

    # --- what a perfect model writes (SFT data) ---------------------------------------------------------------
    def render_search(self, think: str, query: str, mode: str | None = None) -> str:
        """One search turn: ``<think> … </think>\\n<search> query </search>``."""
        return f"<think> {think} </think>\n<search> {self.route_prefix(mode)}{query} </search>"

    def render_answer(self, think: str, answer: str) -> str:
        """The answering turn: ``<think> … </think>\\n<answer> answer </answer>``."""
        return f"<think> {think} </think>\n<answer> {answer} </answer>"

    def route_prefix(self, mode: str | None) -> str:
        return ""

    def turn_format_error(self, result: ParseResult) -> str | None:
        """Search-R1's state machine passes through one ``<think>`` block in every turn, before its action."""
        return "<think>: not exactly one non-empty block in the turn" if result.think is None else None

    def write_turns(self, script: TrajectoryScript, rng: random.Random) -> list[Turn]:
        """A ``<think>`` + action turn per searched hop: the think holds the script's ``opening`` (first turn only),
        the previous observation's evidence and its ``after_evidence`` elaboration, the known hops since ("I already
        know that …") and why it searches; the last turn's think ends with the ``before_answer`` elaboration and the
        script's ``reason`` before ``<answer>``. ``rng`` draws only a route where the format has routes (RouteRAG)."""
        notes: list[str] = []
        turns: list[Turn] = []
        opened = False

        def opening() -> list[str]:
            nonlocal opened
            first, opened = not opened, True
            return script.extra("opening") if first else []

        for m in script.moves:
            hop = script.hops[m.hop]
            if m.kind == "known":
                notes.append(f"I already know that {hop.known_text}")
                continue
            if m.kind == "more":
                think = " ".join([*opening(), *notes, "These results are not enough; I want more of them."])
                obs = script.observe(m.hop, self.default_mode)
                turns.append((self.write_more_info(think), obs))
                notes = [script.evidence(m.hop, obs), *script.extra("after_evidence", m.hop)]
                continue
            mode = self.draw_route(rng)
            lead = "Let me check it again:" if m.repeat else "I need to find out:"
            think = " ".join([*opening(), *notes, f"{lead} {hop.question}"])
            obs = script.observe(m.hop, mode)
            turns.append((self.render_search(think, hop.question, mode), obs))
            notes = [script.evidence(m.hop, obs), *script.extra("after_evidence", m.hop)]
        think = " ".join([*opening(), *notes, *script.extra("before_answer"), script.reason])
        turns.append((self.render_answer(think, script.answer), None))
        return turns

    def draw_route(self, rng: random.Random) -> str:
        """The retrieval mode a written search uses (no draw: the format has no routes)."""
        return self.default_mode

    def write_more_info(self, think: str) -> str:
        raise ValueError(f"{self.name}: the format has no <more info> action to write")


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

    def parse_query(self, kept: str, query: str, think: str | None) -> ParseResult:
        m = _PREFIX_RE.match(query)
        if m is None:
            return ParseResult(Action.SEARCH, kept, query=query, mode="passage", think=think)
        route = tuple(p.strip().lower() for p in re.findall(r"\[([^\]]*)\]", m.group(1)))
        mode = _ROUTES.get(route)
        if mode is None:
            return invalid(kept, f"<search>: malformed route {m.group(1).strip()!r}", think=think)
        rest = m.group(2).strip()
        if not rest:
            return invalid(kept, "<search>: empty query after route", think=think)
        return ParseResult(Action.SEARCH, kept, query=rest, mode=mode, think=think)

    def route_prefix(self, mode: str | None) -> str:
        return _ROUTE_PREFIX.get(mode or "", "")

    def draw_route(self, rng: random.Random) -> str:
        """A route drawn uniformly, so written searches teach every prefix."""
        return rng.choice(("passage", "graph", "hybrid"))


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

    def parse_more(self, kept: str, value: str, think: str | None) -> ParseResult:
        if not re.fullmatch(r"\d{1,6}", value):
            return invalid(kept, f"<more info>: malformed k {value!r}", think=think)
        k = int(value)
        if not 1 <= k <= self.max_more_info_k:
            return invalid(kept, f"<more info>: k={k} outside 1..{self.max_more_info_k}", think=think)
        return ParseResult(Action.MORE_INFO, kept, k=k, think=think)

    def render_more_info(self, think: str, k: int) -> str:
        """A deep-paging turn: ``<think> … </think>\\n<more info> k </more info>``."""
        return f"<think> {think} </think>\n<more info> {k} </more info>"

    more_info_waste: ClassVar[bool] = True

    def write_more_info(self, think: str) -> str:
        """A written deep-paging turn asks for a third of the largest k (at least 1)."""
        return self.render_more_info(think, self.max_more_info_k // 3 or 1)
