"""A start policy's inefficiencies as SFT data: how often a trajectory wastes what the papers' methods later remove.

The five papers start RL or DPO from instruct LLMs that over-search (HiPRAG §1: an over-search rate above 27%), write
long reasoning (TeaRAG §1, Fig. 2: 61% of output tokens removable), re-search what they already found, page deeper
than needed (Dynamic Search-R1 §3) and route wastefully (RouteRAG §3.3). A policy trained only on gold paths never
samples the efficient alternative, so a trainer has nothing to select. :class:`BehaviourConfig` sets each behaviour's
rate; :func:`behaviour_plan` draws a trajectory's steps from them and :func:`elaborator` writes its long-winded
reasoning (announcing, planning, hedging, reviewing: text a model learns, not noise). The protocol's own writer
lays both out (:class:`~effirag.agent.protocols.writing.TrajectoryScript`), so every format shows the same behaviour in
its own grammar.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from effirag.agent.protocols import Move, protocol_class
from effirag.config import check, option
from effirag.train.gold_paths import GoldPath

# One wording per sentence: greedy decoding follows the most likely continuation at each point where the long-winded
# and the short trajectory part, so a long-winded rate above one half makes the long-winded text the greedy path (as
# the papers' instruct models write it by default), where several wordings would split that mass and leave the short
# text most likely.
# No sentence restates the question itself: the 5M demo policy cannot copy a whole question (at step 150 of a run whose
# sentences did, it wrote "The question was: What is the first of the birthes </answer>" and broke its format).
OPENING = "Let me think about how to answer this question step by step, one fact at a time."
PLAN = "First I should work out: {first} {rest}"
HEDGE = "I think this is right, but I am not completely sure, so I will keep it in mind and check that it fits."
PROGRESS = "So far I have found: {found}."
CHECK = "Let me go over what I found once more before I answer, to make sure that everything fits together."
# The fixed opening words of each sentence (up to its first slot or comma), by which a trajectory's text is recognised
# as long-winded (:func:`long_winded`): a sampled sentence that starts right and then drifts still counts.
MARKERS = tuple(s.split("{")[0].split(",")[0].strip() for s in (OPENING, PLAN, HEDGE, PROGRESS, CHECK))
# What the plan says of the hops after the first: their sub-questions name earlier answers, which a plan written
# before any search cannot know.
LATER = {
    0: "That alone should answer it.",
    1: "Then I will use that answer for one more step.",
}


@dataclass(frozen=True)
class BehaviourConfig:
    """Rates of a start policy's inefficiencies in an SFT mixture (all off by default: the gold-path plan)."""

    known_search: dict[str, float] = option(
        factory=dict,
        help="Per protocol: probability that each hop the policy knows is searched (over-search); the rest are "
        "answered from memory in the format's own way (HiPRAG's non-search step, a Search-R1 hop stated in <think>, "
        "ReasonRAG's reasoning, TeaRAG's memory step). A protocol absent keeps SFTDataConfig.search_known's rule.",
    )
    repeat_rate: dict[str, float] = option(
        factory=dict,
        help="Per protocol: probability that a trajectory searches one already searched sub-question again (a "
        "re-check right after the search it repeats). Per protocol because the re-search rows cost the small policy "
        "accuracy in every format they are written in (docs/demo_policy.md), so a start carries them only where a "
        "method is measured on removing them (RouteRAG's retrieval turns).",
    )
    repeat_position: str = option(
        "uniform",
        help="Which search a repeat follows: 'uniform' (any search, drawn uniformly) or 'last' (the trajectory's last "
        "search). With 'last', every point where the policy chooses between searching again and going on sees the "
        "repeat as the majority continuation at a rate above one half; with 'uniform' on a two-search path the first "
        "choice sees it at half the rate, below one half, so the greedy path goes on.",
    )
    more_info_rate: float = option(
        0.0,
        help="Formats with a deep-paging action (Dynamic Search-R1's <more info>): probability that each search is "
        "followed by a request for more results that the hop does not need.",
    )
    verbose_rate: dict[str, float] = option(
        factory=dict,
        help="Per protocol: probability that a trajectory is written long-windedly (it announces a step-by-step "
        "answer and plans its first hop, hedges after each piece of evidence and reviews before answering). Per "
        "protocol because the long-winded sentences are the same in every format: a small policy trained on them in "
        "several formats loses track of which format it is writing after them.",
    )
    memory_pairs: dict[str, float] = option(
        factory=dict,
        help="Per protocol: probability that a trajectory whose path has a known hop is followed by a contrast row of "
        "the same path in which every known hop is answered from memory (its other draws as usual). The pair shows "
        "the memory step beside the search it replaces, tied to a fact the policy was taught; without it the step is "
        "as rare as 1 - known_search per known hop (6.9% of TeaRAG rows at 0.8).",
    )
    memory_steps: bool = option(
        True,
        help="Formats whose grammar has a step answered without retrieval (TeaRAG's memory step) write each hop "
        "answered from memory as such a step; off, TeaRAG leaves it unwritten (recalled in the next step).",
    )
    question_first: bool = option(
        False,
        help="Formats whose step reasoning names the sub-question (HiPRAG) write it before the choice to search or "
        "answer from memory ('Q I know the answer.' instead of 'I know the answer to: Q'), so that the choice is "
        "made after the fact in question is written, not before.",
    )

    def __post_init__(self) -> None:
        for name, rate in self.known_search.items():
            protocol_class(name)  # unknown names fail here, naming the known ones
            check(0.0 <= rate <= 1.0, self, "known_search", f"{name}: {rate} is not in [0, 1]")
        for field_name in ("verbose_rate", "memory_pairs", "repeat_rate"):
            for name, rate in getattr(self, field_name).items():
                protocol_class(name)
                check(0.0 <= rate <= 1.0, self, field_name, f"{name}: {rate} is not in [0, 1]")
        check(self.repeat_position in ("uniform", "last"), self, "repeat_position", "must be 'uniform' or 'last'")
        check(0.0 <= self.more_info_rate <= 1.0, self, "more_info_rate", f"{self.more_info_rate} is not in [0, 1]")

    @property
    def active(self) -> bool:
        """Whether any behaviour is set (else the mixture keeps the gold-path plan and its random draws)."""
        return bool(
            self.known_search or self.verbose_rate or self.memory_pairs or self.repeat_rate or self.more_info_rate
        )


def behaviour_plan(
    path: GoldPath, rng: random.Random, cfg: BehaviourConfig, protocol: str, *, search_known: bool = False
) -> tuple[list[Move], str]:
    """The steps of one trajectory and its waste label (comma-separated kinds, '' for none).

    Each hop the policy does not know is searched; each known hop is searched with probability
    ``cfg.known_search[protocol]`` (absent: always when ``search_known``, never otherwise), else answered from memory.
    Then, where the format has deep paging, each search is followed by a ``more`` step with probability
    ``more_info_rate``; last, with probability ``repeat_rate[protocol]``, one search (drawn uniformly, or the last one
    under ``repeat_position`` 'last') is repeated right after itself (after its paging, if any). Draws, in order: one
    per known hop (when its rate is set), one per search (when paging applies), one for the repeat (when its rate is
    set) and, when it happens and its position is uniform, one for its position."""
    rate = cfg.known_search.get(protocol)
    moves: list[Move] = []
    waste: list[str] = []
    for i, hop in enumerate(path.hops):
        searched = not hop.known or (search_known if rate is None else rng.random() < rate)
        moves.append(Move("search" if searched else "known", i))
        if searched and hop.known and "known_search" not in waste:
            waste.append("known_search")
    if cfg.more_info_rate and protocol_class(protocol).more_info_waste:
        paged: list[Move] = []
        for m in moves:
            paged.append(m)
            if m.kind == "search" and rng.random() < cfg.more_info_rate:
                paged.append(Move("more", m.hop, repeat=True))
                waste += [] if "more" in waste else ["more"]
        moves = paged
    repeat = cfg.repeat_rate.get(protocol, 0.0)
    if repeat and rng.random() < repeat:
        at = [j for j, m in enumerate(moves) if m.kind == "search"]
        if at:
            j = at[-1] if cfg.repeat_position == "last" else rng.choice(at)
            k = j + 1
            while k < len(moves) and moves[k].kind == "more":
                k += 1
            moves.insert(k, Move("search", moves[j].hop, repeat=True))
            waste.append("repeat")
    return moves, ",".join(waste)


def elaborator(path: GoldPath, rng: random.Random) -> Callable[[str, int | None], str]:
    """The long-winded reasoning of one trajectory of ``path``, slot by slot
    (:data:`~effirag.agent.protocols.writing.ELABORATION_SLOTS`): the opening announces a step-by-step answer and
    plans the first hop's sub-question and how many steps follow (never a later hop's sub-question, which names
    answers not yet found); after each hop's evidence, a hedge and the answers found so far; before the answer, a
    review. One wording each (see :data:`OPENING`): ``rng`` is not drawn from."""
    found: list[str] = []

    def elaborate(slot: str, hop: int | None) -> str:
        if slot == "opening":
            n = len(path.hops) - 1
            rest = LATER.get(n, f"Then I will use each answer for the next step, {n} more steps in all.")
            return f"{OPENING} {PLAN.format(first=path.hops[0].question, rest=rest)}"
        if slot == "after_evidence":
            assert hop is not None
            if path.hops[hop].answer not in found:
                found.append(path.hops[hop].answer)
            return f"{HEDGE} {PROGRESS.format(found='; '.join(found))}"
        return CHECK

    return elaborate


def long_winded(text: str) -> bool:
    """Whether ``text`` (a trajectory's generated text) holds any of :func:`elaborator`'s five sentences, by their
    fixed opening words (:data:`MARKERS`): how a start's or a trained policy's sampled trajectories are counted as
    long-winded, the text TeaRAG's IP-DPO is to remove (TeaRAG §1, Fig. 2)."""
    return any(marker in text for marker in MARKERS)
