"""SFT data construction (TeaRAG §4.3.1) for every protocol: one gold path → one complete trajectory per protocol.

For each gold path (see :mod:`effirag.train.gold_paths`) a *plan* says which hops are searched and which are answered
from memory (HiPRAG's non-search steps for known facts); with probability ``redundant_step_rate`` the plan gets
realistic waste — a repeated search, a search for a known fact, or (Dynamic Search-R1) a needless ``<more info>`` —
so the SFT policy over-searches like the baselines the later preference/RL stages start from. Each planned turn is
written with the protocol's own ``render_*`` helpers (:mod:`effirag.train.trajectories`), observations are simulated
(:mod:`effirag.train.context_sim`), and the turns are *replayed through the protocol's parser*: a turn the parser
would not accept is a bug here, raised at once. The result is a list of (prompt, completion) segment lists with
every inserted span marked untrained.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from effirag.agent.protocols import AgentProtocol, get_protocol
from effirag.config import check, option
from effirag.metrics import normalize_answer
from effirag.train.behaviour import BehaviourConfig, behaviour_plan, elaborator
from effirag.train.context_sim import ContextSimulator, SimConfig, answer_sentence, render_observation
from effirag.train.data_source import DataSource
from effirag.train.gold_paths import GoldHop, GoldPath
from effirag.train.masking import Segment, encode_segments
from effirag.train.trajectories import BASELINES, make_plan, render_turns, replay

# A rewrite of one built example (the builder passes its path and random generator), e.g. a recipe's renaming.
Transform = Callable[["SFTExample", GoldPath, random.Random], "SFTExample | None"]

AGENT_PROTOCOLS = ("tearag", "searchr1", "routerag", "dsr1", "hiprag", "reasonrag")


@dataclass(frozen=True)
class SFTDataConfig:
    """Where the gold paths come from and how the SFT mixture is drawn from them."""

    source: DataSource = option(factory=DataSource, help="The gold decompositions and their corpus.")
    protocols: tuple[str, ...] = option(AGENT_PROTOCOLS + BASELINES, help="Protocols to write trajectories for.")
    weights: dict[str, float] = option(
        factory=dict, help="Per-protocol copies per path (default 1.0; a fraction is a sampling probability)."
    )
    qtype_weights: dict[str, float] = option(
        factory=dict,
        help="Per-question-type factor on every protocol's copies of a path, e.g. {comparison: 4.0} (types as the "
        "questions' metadata names them; single hops split off multi-hop paths are 'single-hop'; default 1.0). A key "
        "'N-hop TYPE' (as the eval's by_type names them, e.g. '3-hop compositional') applies to the paths of N hops "
        "of that type only, on top of the type's own factor.",
    )
    redundant_step_rate: float = option(0.3, help="Probability that a trajectory carries one wasted step.")
    single_hop_rate: float = option(1.0, help="Share of the hops of multi-hop paths also written as own questions.")
    k: int = option(3, help="Items per simulated retrieval (the engine's k).")
    max_inserted_tokens: int = option(512, help="Token budget of one observation (the engine's).")
    seed: int = option(0, help="Seed of plans, templates and distractors.")
    search_known: tuple[str, ...] = option(
        (),
        help="Protocols whose trajectories search every hop, known facts too, as TeaRAG §4.3.1 does (one retrieval "
        "per gold sub-question); the others answer known hops from memory (HiPRAG's non-search steps). A policy whose "
        "data skips known hops never writes their recall, and may stop with hops left or recall them wrongly.",
    )
    behaviour: BehaviourConfig = option(
        factory=BehaviourConfig,
        help="A start policy's inefficiencies (over-search, re-searches, deep paging, long reasoning) as rates; when "
        "any is set it replaces redundant_step_rate's plan (effirag.train.behaviour).",
    )
    gold_triplet_rate: float = option(
        1.0,
        help="Graph-mode searches: probability that the simulated observation holds the hop's gold triplet; the gold "
        "passage is always shown when it does not. Below 1 the policy must also read the fact out of passages, as "
        "behind a KAG retrieval whose top item is often a passage.",
    )

    chat: bool = option(
        False,
        help="Wrap each trajectory's prompt in the start model's chat template (its tokenizer's), as a chat backend "
        "(hf:DIR?chat=1, vllm:DIR?chat=1) wraps an episode's prompt at inference: for instruct models. Protocols "
        "whose prompt is rebuilt between turns (reasonrag) are refused.",
    )

    def __post_init__(self) -> None:
        from effirag.agent.protocols import PROTOCOLS

        for p in self.protocols:
            check(p in PROTOCOLS, self, "protocols", f"{p!r} is not a protocol; known: {PROTOCOLS}")
        check(0.0 <= self.redundant_step_rate <= 1.0, self, "redundant_step_rate", "must be in [0, 1]")
        for p in self.search_known:
            check(p in PROTOCOLS, self, "search_known", f"{p!r} is not a protocol; known: {PROTOCOLS}")
        check(all(w >= 0 for w in self.weights.values()), self, "weights", "must be >= 0")
        check(all(w >= 0 for w in self.qtype_weights.values()), self, "qtype_weights", "must be >= 0")
        check(0.0 <= self.gold_triplet_rate <= 1.0, self, "gold_triplet_rate", "must be in [0, 1]")
        check(self.k >= 1, self, "k", "must be >= 1")
        check(0.0 <= self.single_hop_rate <= 1.0, self, "single_hop_rate", "must be in [0, 1]")
        check(not self.chat or "reasonrag" not in self.protocols, self, "chat", "reasonrag rebuilds its prompt")


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


class SFTDataBuilder:
    """Builds :class:`SFTExample` s from gold paths for every configured protocol."""

    def __init__(
        self,
        passages: Sequence[Any],
        triplets: Sequence[Any],
        count_tokens: Callable[[str], int],
        config: SFTDataConfig,
        *,
        render_options: Mapping[str, bool] | None = None,
        transform: Transform | None = None,
    ) -> None:
        """``render_options``: keyword switches of :func:`~effirag.train.trajectories.render_turns` (how the agent
        protocols write their steps, e.g. ``evidence_first``); ``transform(example, path, rng)`` rewrites each built
        example (a recipe's renaming or cutting), drawing from the builder's own generator."""
        self.config = config
        self.render_options = dict(render_options or {})
        self.transform = transform
        self.count_tokens = count_tokens
        self.sim = ContextSimulator(
            passages,
            triplets,
            SimConfig(config.k, config.max_inserted_tokens, gold_triplet_rate=config.gold_triplet_rate),
        )
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
                w = self.config.weights.get(name, 1.0) * qtype_factor(self.config.qtype_weights, path)
                copies = int(w) + (1 if rng.random() < w - int(w) else 0)
                for c in range(copies):
                    ex = self.build_one(path, protocol, rng)
                    if ex is not None and self.transform is not None:
                        ex = self.transform(ex, path, rng)
                    if ex is not None:
                        ex.id = f"{ex.id}~{c}" if copies > 1 else ex.id
                        out.append(ex)
                    pair = self.config.behaviour.memory_pairs.get(name, 0.0)
                    if pair and any(h.known for h in path.hops) and rng.random() < pair:
                        twin = self.build_one(path, protocol, rng, from_memory=True)
                        if twin is not None:
                            twin.id = f"{twin.id}~{c}~memory"
                            out.append(twin)
        return out

    def build_one(
        self, path: GoldPath, protocol: AgentProtocol, rng: random.Random, *, from_memory: bool = False
    ) -> SFTExample | None:
        """One trajectory of ``path`` under ``protocol`` (None for zero-shot when a hop is unknown); ``from_memory``:
        every known hop answered from memory (``BehaviourConfig.memory_pairs``' contrast row)."""

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
        search_known = name in self.config.search_known
        behaviour = self.config.behaviour
        if from_memory:
            behaviour = replace(behaviour, known_search={**behaviour.known_search, name: 0.0})
        options: dict[str, Any] = dict(self.render_options)
        if behaviour.active:
            moves, waste = behaviour_plan(path, rng, behaviour, name, search_known=search_known)
            options["memory_steps"] = behaviour.memory_steps
            options["question_first"] = behaviour.question_first
            verbose = behaviour.verbose_rate.get(name, 0.0)
            if verbose and rng.random() < verbose:
                options["elaborate"] = elaborator(path, rng)
                waste = ",".join(w for w in (waste, "verbose") if w)
        else:
            moves, waste = make_plan(path, rng, self.config.redundant_step_rate, name, search_known=search_known)
        turns = render_turns(protocol, path, moves, observe, rng, **options)
        return SFTExample(f"{path.id}/{name}", name, replay(protocol, path.question, turns), waste)


def qtype_factor(weights: dict[str, float], path: GoldPath) -> float:
    """The copies factor of ``path`` from ``SFTDataConfig.qtype_weights``: its type's factor times its 'N-hop TYPE'
    factor (each 1.0 when absent). Why both: a mixture whose rows are mostly two-hop (comparisons, two-hop
    compositional paths) teaches a policy to stop after two searches, and only 3- and 4-hop paths teach it not to."""
    qtype = path.qtype or ""
    return weights.get(qtype, 1.0) * weights.get(f"{len(path.hops)}-hop {qtype}", 1.0)


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


def in_chat(examples: Sequence[SFTExample], wrap: Callable[[str], str]) -> list[SFTExample]:
    """``examples`` with each one's prompt (the untrained first segment of its single pair) replaced by
    ``wrap(prompt)``: the text a chat backend's episode starts from (:func:`effirag.llm.chat.chat_prompt`).
    ValueError names an example of several pairs (a rebuilt prompt) or one that does not start with its prompt."""
    out = []
    for ex in examples:
        if len(ex.pairs) != 1:
            raise ValueError(f"{ex.id}: {len(ex.pairs)} prompts ({ex.protocol} rebuilds its prompt); chat needs one")
        head, *rest = ex.pairs[0]
        if head.trained:
            raise ValueError(f"{ex.id}: its first segment is trained, not a prompt")
        pair = [Segment(wrap(head.text), False), *rest]
        out.append(SFTExample(ex.id, ex.protocol, [pair], ex.waste, dict(ex.meta), ex.complete))
    return out


def tokenize_examples(examples: Sequence[SFTExample], tokenizer: Any, max_length: int) -> list[dict[str, list[int]]]:
    """input_ids/labels rows for SFT: one row per pair, EOS (trained) after each complete example's last pair."""
    rows = []
    for ex in examples:
        for j, pair in enumerate(ex.pairs):
            eos = tokenizer.eos_token_id if ex.complete and j == len(ex.pairs) - 1 else None
            ids, labels = encode_segments(pair, tokenizer, eos_id=eos)
            rows.append({"input_ids": ids[:max_length], "labels": labels[:max_length]})
    return rows
