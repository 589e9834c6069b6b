"""SFT data construction (TeaRAG §4.3.1) for every protocol: one gold path → one complete trajectory per protocol.

For each gold path (see :mod:`effirag.train.gold_paths`) a *plan* says which hops are searched and which are answered
from memory (HiPRAG's non-search steps for known facts); with probability ``redundant_step_rate`` the plan gets
realistic waste — a repeated search, a search for a known fact, or (Dynamic Search-R1) a needless ``<more info>`` —
so the SFT policy over-searches like the baselines the later preference/RL stages start from. Each planned turn is
written with the protocol's own ``render_*`` helpers, observations are simulated (:mod:`effirag.train.context_sim`),
and the turns are *replayed through the protocol's parser*: a turn the parser would not accept is a bug here, raised
at once. The result is a list of (prompt, completion) segment lists with every inserted span marked untrained.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from effirag.agent.protocols import EpisodeState, Protocol, get_protocol
from effirag.config import check, option
from effirag.metrics import normalize_answer
from effirag.train.context_sim import ContextSimulator, SimConfig, answer_sentence, render_observation
from effirag.train.gold_paths import GoldHop, GoldPath
from effirag.train.masking import Segment, encode_segments
from effirag.train.rename import EntityPool, draw_renaming, path_names, rename_pairs
from effirag.types import Action, Step

AGENT_PROTOCOLS = ("tearag", "searchr1", "routerag", "dsr1", "hiprag", "reasonrag")
BASELINES = ("zeroshot", "naive", "single-con", "single-ppr")
SUMMARY_TRIPLET = (
    "The fact {t} implies the answer: {a}.",
    "The reference gives {t}, so the answer is {a}.",
    "From {t}, the answer to this step is {a}.",
)
SUMMARY_TEXT = (
    'The passage says: "{s}" This implies the answer: {a}.',
    'According to the reference, "{s}" So the answer is {a}.',
    "The reference states that {a} answers it: {s}",
)
# Ends of a TeaRAG summary with `hop_aware_summary`: what is still needed (the next search's sub-question) or that the
# question is answered, so the stop decision is written out in the summary, not left to the token after it.
SUMMARY_NEXT = ("Next I need: {q}", "Still to find: {q}", "The question also needs: {q}")
SUMMARY_LAST = ("That answers the question.", "Nothing else is needed.", "This completes the question.")


@dataclass(frozen=True)
class SFTDataConfig:
    """What SFT data is built from each gold path."""

    protocols: tuple[str, ...] = option(AGENT_PROTOCOLS + BASELINES, help="Protocols to write trajectories for.")
    weights: dict[str, float] = option(
        factory=dict, help="Per-protocol copies per path (default 1.0; a fraction is a sampling probability)."
    )
    redundant_step_rate: float = option(0.3, help="Probability that a trajectory carries one wasted step.")
    single_hop_rate: float = option(1.0, help="Share of the hops of multi-hop paths also written as own questions.")
    k: int = option(3, help="Items per simulated retrieval (the engine's k).")
    max_inserted_tokens: int = option(512, help="Token budget of one observation (the engine's).")
    seed: int = option(0, help="Seed of plans, templates and distractors.")
    max_completions: int = option(
        0,
        help="Keep only each trajectory's first N trained completions (no EOS after them): a curriculum stage that "
        "teaches the first step alone, e.g. 1 for TeaRAG's copy of the question's entity; 0 keeps whole trajectories.",
    )
    rename_rate: float = option(
        0.0,
        help="Share of trajectories that search every hop whose entity names are swapped for other names of the same "
        "type, consistently in question, context and targets, so names must be copied, not recalled (needs the "
        "world's entity pool; effirag.train.rename).",
    )

    hop_aware_summary: bool = option(
        False,
        help="TeaRAG: end each summary with the next search's sub-question, or with a note that the question is "
        "answered, so whether to search again is written out before </summary> (BENCHMARKS.md, item 25).",
    )

    def __post_init__(self) -> None:
        from effirag.agent.protocols import PROTOCOLS

        for p in self.protocols:
            check(p in PROTOCOLS, self, "protocols", f"{p!r} is not a protocol; known: {PROTOCOLS}")
        check(0.0 <= self.redundant_step_rate <= 1.0, self, "redundant_step_rate", "must be in [0, 1]")
        check(all(w >= 0 for w in self.weights.values()), self, "weights", "must be >= 0")
        check(self.k >= 1, self, "k", "must be >= 1")
        check(0.0 <= self.single_hop_rate <= 1.0, self, "single_hop_rate", "must be in [0, 1]")
        check(self.max_completions >= 0, self, "max_completions", "must be >= 0")
        check(0.0 <= self.rename_rate <= 1.0, self, "rename_rate", "must be in [0, 1]")


@dataclass
class SFTExample:
    """One trajectory: its (prompt, completion) segment lists (several for ReasonRAG's staged prompts)."""

    id: str
    protocol: str
    pairs: list[list[Segment]]
    waste: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    complete: bool = True  # False when cut after its first completions: no EOS is trained after it

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "protocol": self.protocol,
            "waste": self.waste,
            "pairs": [[{"text": s.text, "trained": s.trained} for s in pair] for pair in self.pairs],
        }


# --- plans ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Move:
    """One planned step: ``search`` hop i, answer hop i from memory (``known``), or ``more`` results for hop i."""

    kind: str
    hop: int
    repeat: bool = False


def make_plan(path: GoldPath, rng: random.Random, rate: float, protocol: str) -> tuple[list[Move], str]:
    """The steps of a trajectory: a search per unknown hop, memory for known hops, plus maybe one wasted step."""
    moves = [Move("known" if h.known else "search", i) for i, h in enumerate(path.hops)]
    if rng.random() >= rate:
        return moves, ""
    kinds = ["repeat"]
    if any(m.kind == "known" for m in moves) and protocol not in ("tearag",):
        kinds.append("known_search")
    if protocol == "dsr1":
        kinds.append("more")
    kind = rng.choice(kinds)
    searched = [i for i, m in enumerate(moves) if m.kind == "search"]
    if kind == "known_search":
        i = rng.choice([i for i, m in enumerate(moves) if m.kind == "known"])
        moves[i] = Move("search", moves[i].hop)
    elif searched:
        i = rng.choice(searched)
        moves.insert(i + 1, Move("more" if kind == "more" else "search", moves[i].hop, repeat=True))
    else:
        return moves, ""
    return moves, kind


# --- texts ----------------------------------------------------------------------------------------------------
def statement(hop: GoldHop, rng: random.Random, observation: str | None = None) -> str:
    """What the evidence of a hop says, from a varied template over what the observation really shows: a gold
    triplet, or the passage sentence naming the answer (``observation`` None: anything of the hop's gold)."""

    def shown(text: str) -> bool:
        return observation is None or text in observation

    triplets = [t for t in hop.triplets if shown(t.text)]
    sentence = answer_sentence(hop.passage, hop.answer)
    if sentence is not None and not shown(sentence):
        sentence = None
    if triplets and (sentence is None or rng.random() < 0.6):
        return rng.choice(SUMMARY_TRIPLET).format(t=triplets[0].text, a=hop.answer)
    if sentence is not None:
        return rng.choice(SUMMARY_TEXT).format(s=sentence, a=hop.answer)
    return f"The reference answers it: {hop.answer}."


def final_reason(path: GoldPath) -> str:
    if path.qtype == "comparison" and len(path.hops) == 2:
        a, b = path.hops[0].answer, path.hops[1].answer
        return f"The two answers are {a} and {b}, so the answer is {path.answer}."
    return f"So the final answer is {path.answer}."


# --- trajectories: (turn text, observation or None) per protocol --------------------------------------------------
Turn = tuple[str, "str | None"]
Observe = Callable[[GoldHop, str], str]  # (hop, mode) → observation text


def render_turns(
    protocol: Protocol,
    path: GoldPath,
    moves: Sequence[Move],
    observe: Observe,
    rng: random.Random,
    *,
    hop_aware: bool = False,
) -> list[Turn]:
    """The turns a perfect model writes for ``moves`` under ``protocol`` (with the observations that follow).

    ``hop_aware`` (TeaRAG only) ends each summary with the next search's sub-question or, after the last search, a
    note that the question is answered."""
    name = protocol.name
    hops = path.hops
    turns: list[Turn] = []
    if name == "tearag":
        summary: str | None = None
        searches = [m for m in moves if m.kind == "search"]
        for i, m in enumerate(searches):
            hop = hops[m.hop]
            obs = observe(hop, "kag")
            turns.append((protocol.render_turn(summary=summary, entities=hop.entities, subquery=hop.question), obs))  # type: ignore[attr-defined]
            summary = statement(hop, rng, obs)
            if hop_aware:
                after = searches[i + 1] if i + 1 < len(searches) else None
                end = (
                    rng.choice(SUMMARY_LAST)
                    if after is None
                    else rng.choice(SUMMARY_NEXT).format(q=hops[after.hop].question)
                )
                summary = f"{summary} {end}"
        turns.append((protocol.render_turn(summary=summary, answer=path.answer), None))  # type: ignore[attr-defined]
        return turns
    if name in ("searchr1", "routerag", "dsr1"):
        notes: list[str] = []
        for m in moves:
            hop = hops[m.hop]
            if m.kind == "known":
                notes.append(f"I already know that {hop.known_text}")
                continue
            if m.kind == "more":
                think = " ".join([*notes, "These results are not enough; I want more of them."])
                obs = observe(hop, "passage")
                turns.append((protocol.render_more_info(think, protocol.max_more_info_k // 3 or 1), obs))  # type: ignore[attr-defined]
                notes = [statement(hop, rng, obs)]
                continue
            mode = rng.choice(("passage", "graph", "hybrid")) if name == "routerag" else "passage"
            lead = "Let me check it again:" if m.repeat else "I need to find out:"
            think = " ".join([*notes, f"{lead} {hop.question}"])
            obs = observe(hop, mode)
            turns.append((protocol.render_search(think, hop.question, mode), obs))  # type: ignore[attr-defined]
            notes = [statement(hop, rng, obs)]
        turns.append((protocol.render_answer(" ".join([*notes, final_reason(path)]), path.answer), None))  # type: ignore[attr-defined]
        return turns
    if name == "hiprag":
        conclusion: str | None = None
        steps: list[tuple[str, str]] = []
        first = True
        for m in moves:
            hop = hops[m.hop]
            if m.kind == "known":
                steps.append((f"I know the answer to: {hop.question}", hop.known_text))
                continue
            lead = "I should verify:" if m.repeat else "I need to search for:"
            text = protocol.render_turn(  # type: ignore[attr-defined]
                first=first, conclusion=conclusion, steps=steps, search=(f"{lead} {hop.question}", hop.question)
            )
            obs = observe(hop, "passage")
            turns.append((text, obs))
            first, steps, conclusion = False, [], statement(hop, rng, obs)
        if first and not steps:
            steps = [(f"I know the answer to: {path.question}", final_reason(path))]
        turns.append((protocol.render_turn(first=first, conclusion=conclusion, steps=steps, answer=path.answer), None))  # type: ignore[attr-defined]
        return turns
    if name == "reasonrag":
        notes = []
        for m in moves:
            hop = hops[m.hop]
            if m.kind == "known":
                notes.append(f"I know that {hop.known_text}")
                continue
            lead = "Let me double-check" if m.repeat else "The evidence is not enough yet. I need"
            reasoning = " ".join([*notes, f"{lead}: {hop.question}"])
            obs = observe(hop, "passage")
            turns.append((protocol.render_reasoning(reasoning, query=hop.question), obs))  # type: ignore[attr-defined]
            turns.append((protocol.render_grounding(statement(hop, rng, obs)), None))  # type: ignore[attr-defined]
            notes = [f"The evidence shows {hop.answer}."]
        reasoning = " ".join([*notes, "The evidence is enough.", final_reason(path)])
        turns.append((protocol.render_reasoning(reasoning, answer=path.answer), None))  # type: ignore[attr-defined]
        return turns
    if name in BASELINES:
        return [(protocol.render_answer(path.answer), None)]  # type: ignore[attr-defined]
    raise ValueError(f"no SFT renderer for protocol {name!r}")


def replay(protocol: Protocol, question: str, turns: Sequence[Turn], context: str | None = None) -> list[list[Segment]]:
    """Run ``turns`` through the protocol exactly as the engine does and cut them into (prompt, completion) pairs.

    Every turn must parse to a valid action with its text kept whole; otherwise ValueError names the turn and why.
    Append-only protocols give one pair; ReasonRAG, whose prompt is rebuilt per stage, gives one pair per turn.
    """
    state = EpisodeState(question, protocol.build_prompt(question, context))
    pairs: list[list[Segment]] = []
    pending_obs: str | None = None
    for i, (text, obs) in enumerate(turns):
        prompt = protocol.prompt(state)
        cur = pairs[-1] if pairs else None
        if cur is not None and pending_obs is not None and prompt == "".join(s.text for s in cur) + pending_obs:
            cur.append(Segment(pending_obs, False))
        elif cur is None or prompt != "".join(s.text for s in cur):
            pairs.append([Segment(prompt, False)])
        result = protocol.parse_turn(text, state)
        if result.action is Action.INVALID or result.text != text:
            raise ValueError(f"{protocol.name}: turn {i} does not parse ({result.error or 'text cut'}): {text!r}")
        if result.carry and state.pending is not None:
            state.pending = None
        state.steps += [Step(Action.REASON, text=s.text) for s in result.substeps]
        step = Step(result.action, text=text, query=result.query)
        state.steps.append(step)
        pairs[-1].append(Segment(text, True))
        pending_obs = None
        if result.action in (Action.SEARCH, Action.MORE_INFO):
            if obs is None:
                raise ValueError(f"{protocol.name}: turn {i} searches but no observation was given")
            step.observation = obs
            state.n_retrievals += 1
            state.last_query = result.query or state.last_query
            if protocol.followup:
                state.pending = len(state.steps) - 1
            protocol.advance(state, result, obs)
            pending_obs = obs
        else:
            protocol.advance(state, result, "")
    return pairs


class SFTDataBuilder:
    """Builds :class:`SFTExample` s from gold paths for every configured protocol."""

    def __init__(
        self,
        passages: Sequence[Any],
        triplets: Sequence[Any],
        count_tokens: Callable[[str], int],
        config: SFTDataConfig,
        entity_pool: EntityPool | None = None,
    ) -> None:
        if config.rename_rate and entity_pool is None:
            raise ValueError(f"sft_data.rename_rate={config.rename_rate} needs the world's entity pool; none was given")
        self.config = config
        self.entity_pool = entity_pool
        self.count_tokens = count_tokens
        self.sim = ContextSimulator(passages, triplets, SimConfig(config.k, config.max_inserted_tokens))
        self.protocols = {name: get_protocol(name) for name in config.protocols}

    def build(self, paths: Sequence[GoldPath]) -> list[SFTExample]:
        rng = random.Random(self.config.seed)
        todo = list(paths)
        todo += [
            GoldPath(f"{p.id}#h{i + 1}", h.question, (h.answer,), (h,), "single-hop")
            for p in paths
            if len(p.hops) > 1
            for i, h in enumerate(p.hops)
            if rng.random() < self.config.single_hop_rate
        ]
        out: list[SFTExample] = []
        for path in todo:
            for name, protocol in self.protocols.items():
                w = self.config.weights.get(name, 1.0)
                copies = int(w) + (1 if rng.random() < w - int(w) else 0)
                for c in range(copies):
                    ex = self.build_one(path, protocol, rng)
                    if ex is not None and self.config.rename_rate:
                        ex = self.maybe_rename(ex, path, rng)
                    if ex is not None and self.config.max_completions:
                        ex = first_completions(ex, self.config.max_completions)
                    if ex is not None:
                        ex.id = f"{ex.id}~{c}" if copies > 1 else ex.id
                        out.append(ex)
        return out

    def maybe_rename(self, example: SFTExample, path: GoldPath, rng: random.Random) -> SFTExample:
        """``example`` with its entity names swapped (``rename_rate`` of the paths that search every hop)."""
        assert self.entity_pool is not None  # checked in __init__
        if any(h.known for h in path.hops) or rng.random() >= self.config.rename_rate:
            return example
        text = "".join(s.text for pair in example.pairs for s in pair)
        mapping = draw_renaming(path_names(path, self.entity_pool), self.entity_pool, text, rng)
        pairs = rename_pairs(example.pairs, mapping, self.entity_pool)
        return replace(example, pairs=pairs, meta={**example.meta, "renamed": mapping})

    def build_one(self, path: GoldPath, protocol: Protocol, rng: random.Random) -> SFTExample | None:
        """One trajectory of ``path`` under ``protocol`` (None for zero-shot when a hop is unknown)."""

        def observe(hop: GoldHop, mode: str) -> str:
            items = self.sim.items(path, [hop], mode, rng)
            obs = render_observation(items, protocol, self.count_tokens, self.config.max_inserted_tokens)
            if not evidence_shown(hop, obs):
                # The budget cut the gold evidence away (the answer string alone is not enough: a distractor may name
                # it without stating the hop's fact). Keep the draw but put gold items first: SFT shows found evidence.
                items = sorted(items, key=lambda it: not _is_gold(it, hop))
                obs = render_observation(items, protocol, self.count_tokens, self.config.max_inserted_tokens)
            return obs

        name = protocol.name
        if name in BASELINES:
            if name == "zeroshot" and not all(h.known for h in path.hops):
                return None  # answering unknown facts without retrieval would teach hallucination
            context = None
            if protocol.pre_retrieval_mode is not None:
                items = self.sim.items(path, list(path.hops), protocol.pre_retrieval_mode, rng)
                context = render_observation(items, protocol, self.count_tokens, self.config.max_inserted_tokens)
            turns = render_turns(protocol, path, [], observe, rng)
            return SFTExample(f"{path.id}/{name}", name, replay(protocol, path.question, turns, context))
        moves, waste = make_plan(path, rng, self.config.redundant_step_rate, name)
        turns = render_turns(protocol, path, moves, observe, rng, hop_aware=self.config.hop_aware_summary)
        return SFTExample(f"{path.id}/{name}", name, replay(protocol, path.question, turns), waste)


def first_completions(example: SFTExample, n: int) -> SFTExample:
    """``example`` cut after its first ``n`` trained segments (later pairs and segments dropped; marked incomplete
    when anything was cut, so that no EOS is trained where the trajectory does not end)."""
    pairs: list[list[Segment]] = []
    seen = 0
    for pair in example.pairs:
        kept: list[Segment] = []
        for seg in pair:
            if seen == n:
                break
            kept.append(seg)
            seen += seg.trained
        if any(s.trained for s in kept):
            pairs.append(kept)
        if seen == n:
            break
    cut = sum(len(p) for p in pairs) < sum(len(p) for p in example.pairs)
    return replace(example, pairs=pairs, complete=example.complete and not cut)


def evidence_shown(hop: GoldHop, observation: str) -> bool:
    """Whether ``observation`` states the hop's fact: one of its gold triplets, or the gold passage's sentence that
    names the answer (a hop without either counts as shown when the answer string appears)."""
    if any(t.text in observation for t in hop.triplets):
        return True
    sentence = answer_sentence(hop.passage, hop.answer)
    if sentence is not None:
        return sentence in observation
    if hop.triplets:
        return False
    return normalize_answer(hop.answer) in normalize_answer(observation)


def _is_gold(item: Any, hop: GoldHop) -> bool:
    return (hop.passage is not None and item.id == hop.passage.id) or any(item.text == t.text for t in hop.triplets)


def tokenize_examples(examples: Sequence[SFTExample], tokenizer: Any, max_length: int) -> list[dict[str, list[int]]]:
    """input_ids/labels rows for SFT: one row per pair, EOS (trained) after each complete example's last pair."""
    rows = []
    for ex in examples:
        for j, pair in enumerate(ex.pairs):
            eos = tokenizer.eos_token_id if ex.complete and j == len(ex.pairs) - 1 else None
            ids, labels = encode_segments(pair, tokenizer, eos_id=eos)
            rows.append({"input_ids": ids[:max_length], "labels": labels[:max_length]})
    return rows
