"""Core types: the shared language of EffiRAG.

Everything that crosses a module boundary (a passage, a triplet, a question, a retrieved item, a step of an
agent's trajectory) is one of these dataclasses. Value objects are frozen; the trajectory records are mutable
because the rollout engine appends to them while an episode runs.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Passage:
    """A corpus passage. ``id`` is unique within its corpus."""

    id: str
    title: str
    text: str

    @property
    def key(self) -> str:
        """HippoRAG's passage identity: ``title + "\\n" + text``."""
        return f"{self.title}\n{self.text}"

    @property
    def contents(self) -> str:
        """FlashRAG / Search-R1 ``contents`` field: the title in double quotes, a newline, the text."""
        return f'"{self.title}"\n{self.text}'


@dataclass(frozen=True, slots=True)
class Triplet:
    """A knowledge triplet (head, relation, tail), linked to the passage that states it when known."""

    head: str
    relation: str
    tail: str
    source_id: str | None = None

    @property
    def text(self) -> str:
        """The triplet as the model reads it: ``(head, relation, tail)``."""
        return f"({self.head}, {self.relation}, {self.tail})"


@dataclass(frozen=True, slots=True)
class SubQuestion:
    """One hop of a gold decomposition (MuSiQue style). ``#n`` in ``question`` refers to hop n's answer."""

    question: str
    answer: str
    support_id: str | None = None


@dataclass(frozen=True, slots=True)
class QAExample:
    """A question with its gold answers (the first is the canonical gold, the rest are aliases).

    ``hops`` is None when the dataset does not say; ``qtype`` is the dataset's question type
    (e.g. ``compositional``, ``comparison``, ``bridge``, ``single-hop``).
    """

    id: str
    question: str
    answers: tuple[str, ...]
    hops: int | None = None
    qtype: str | None = None
    supporting_ids: tuple[str, ...] = ()
    decomposition: tuple[SubQuestion, ...] = ()
    evidence: tuple[Triplet, ...] = ()

    def __post_init__(self) -> None:
        if not self.answers:
            raise ValueError(f"QAExample {self.id!r}: field 'answers' is empty")


class ItemKind(enum.StrEnum):
    """What a retrieved item is: a text chunk (passage) or a knowledge triplet."""

    CHUNK = "chunk"
    TRIPLET = "triplet"


@dataclass(frozen=True, slots=True)
class RetrievedItem:
    """One item returned by a retriever. ``tokens`` is counted with the caller's tokenizer (None if not counted)."""

    kind: ItemKind
    id: str
    text: str
    score: float
    tokens: int | None = None
    title: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "text": self.text,
            "score": float(self.score),
            "tokens": self.tokens,
            "title": self.title,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RetrievedItem:
        return cls(
            kind=ItemKind(d["kind"]),
            id=str(d["id"]),
            text=str(d["text"]),
            score=float(d["score"]),
            tokens=d.get("tokens"),
            title=str(d.get("title", "")),
        )


class Action(enum.StrEnum):
    """What one step of an episode did."""

    SEARCH = "search"
    MORE_INFO = "more_info"
    ANSWER = "answer"
    REASON = "reason"
    INVALID = "invalid"


PARSED_STEP_FIELDS = ("answer", "error", "think", "reasoning", "conclusion", "summary", "evidence", "stage")


@dataclass(slots=True)
class Step:
    """One model turn and what the environment did with it.

    Token ledger: ``generated_tokens`` are tokens the model produced in this turn; ``inserted_tokens`` are tokens the
    engine inserted from retrieval (the observation). Both are counted with the policy's tokenizer.

    What the protocol's parser read from the turn (None where the format or the turn has none): ``answer`` of an
    answering step; ``error``, why the step is invalid; ``think``, a Search-R1 family ``<think>`` block;
    ``reasoning`` (HiPRAG's ``<reasoning>``, ReasonRAG's reasoning text); ``conclusion`` (HiPRAG; a search step's
    comes from the next turn); ``summary`` (TeaRAG: of this search's reference, from the next turn); ``evidence``
    (ReasonRAG: what the grounding stage drew from this search's documents) and ``stage`` ("reasoning" /
    "grounding"). ``extras`` holds the engine's bookkeeping (feedback tokens, tool errors, truncation).
    """

    action: Action
    text: str = ""
    query: str | None = None
    mode: str | None = None
    entities: list[str] = field(default_factory=list)
    items: list[RetrievedItem] = field(default_factory=list)
    observation: str = ""
    generated_tokens: int = 0
    inserted_tokens: int = 0
    generation_s: float = 0.0
    retrieval_s: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    answer: str | None = None
    error: str | None = None
    think: str | None = None
    reasoning: str | None = None
    conclusion: str | None = None
    summary: str | None = None
    evidence: str | None = None
    stage: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    within_turn: bool = False  # finished inside the text of the next step's turn (a HiPRAG non-search step)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["action"] = self.action.value
        d["items"] = [it.to_dict() for it in self.items]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Step:
        """A step from :meth:`to_dict`; records written before the parsed fields were typed kept them in ``extras``,
        from where they are moved to their fields."""
        kw = dict(d)
        extras = dict(kw.get("extras", {}))
        for name in PARSED_STEP_FIELDS:
            if name not in kw and name in extras:
                kw[name] = extras.pop(name)
        kw["extras"] = extras
        kw["action"] = Action(kw["action"])
        kw["items"] = [RetrievedItem.from_dict(it) for it in kw.get("items", [])]
        return cls(**kw)


class TokenKind(enum.StrEnum):
    """Who put a span of token ids into the policy's context: the encoded ``prompt``, the policy itself
    (``generated``, the only kind a trainer puts a loss on), a retrieved observation (``inserted``) or the engine's
    feedback on a refused turn (``feedback``)."""

    PROMPT = "prompt"
    GENERATED = "generated"
    INSERTED = "inserted"
    FEEDBACK = "feedback"


@dataclass(frozen=True, slots=True)
class TokenSegment:
    """One entry of an episode's token ledger: a span of ids, who wrote it, and for ``generated`` spans the behaviour
    log-probabilities they were sampled with (one per id; None when the backend gave none, e.g. a script)."""

    kind: TokenKind
    ids: tuple[int, ...]
    logprobs: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", TokenKind(self.kind))
        if self.logprobs is not None and len(self.logprobs) != len(self.ids):
            raise ValueError(f"TokenSegment {self.kind.value}: {len(self.logprobs)} logprobs for {len(self.ids)} ids")
        if self.logprobs is not None and self.kind is not TokenKind.GENERATED:
            raise ValueError(f"TokenSegment {self.kind.value}: only generated spans carry behaviour logprobs")

    @property
    def trained(self) -> bool:
        """Whether a trainer puts a loss on these ids (the policy wrote them)."""
        return self.kind is TokenKind.GENERATED

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "ids": list(self.ids), "logprobs": _opt_list(self.logprobs)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | Sequence[Any]) -> TokenSegment:
        """From :meth:`to_dict`, or from the ``[kind, ids, logprobs]`` lists that older trajectory files hold."""
        kind, ids, lps = (d["kind"], d["ids"], d.get("logprobs")) if isinstance(d, Mapping) else d
        return cls(TokenKind(kind), tuple(int(x) for x in ids), None if lps is None else tuple(float(x) for x in lps))


def _opt_list(x: Sequence[float] | None) -> list[float] | None:
    return None if x is None else list(x)


@dataclass(slots=True)
class Trajectory:
    """A whole episode: the question, every step, the prediction and whether the format held.

    ``tokens`` is the episode's token ledger (the engine's token path, ``EngineConfig.token_ids``): every span of ids
    in the order the policy's context received them, typed (:class:`TokenSegment`); empty on the text path.
    ``end`` says why the engine ended the episode (answer, max_steps, max_total_tokens, single_turn; '' when no
    engine ran it) and ``turns`` counts its model turns.
    """

    question_id: str
    question: str
    protocol: str
    steps: list[Step] = field(default_factory=list)
    prediction: str | None = None
    format_ok: bool = False
    prompt: str = ""
    sample_index: int = 0
    extras: dict[str, Any] = field(default_factory=dict)
    tokens: list[TokenSegment] = field(default_factory=list)
    end: str = ""
    turns: int = 0

    @property
    def generated_tokens(self) -> int:
        return sum(s.generated_tokens for s in self.steps)

    @property
    def inserted_tokens(self) -> int:
        return sum(s.inserted_tokens for s in self.steps)

    @property
    def n_searches(self) -> int:
        """Retrieval turns: searches and ``<more info>`` requests."""
        return sum(1 for s in self.steps if s.action in (Action.SEARCH, Action.MORE_INFO))

    @property
    def retrieval_s(self) -> float:
        return sum(s.retrieval_s for s in self.steps)

    @property
    def generation_s(self) -> float:
        return sum(s.generation_s for s in self.steps)

    def totals(self) -> dict[str, float | int]:
        return {
            "steps": len(self.steps),
            "searches": self.n_searches,
            "generated_tokens": self.generated_tokens,
            "inserted_tokens": self.inserted_tokens,
            "retrieval_s": self.retrieval_s,
            "generation_s": self.generation_s,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "question_id": self.question_id,
            "question": self.question,
            "protocol": self.protocol,
            "steps": [s.to_dict() for s in self.steps],
            "prediction": self.prediction,
            "format_ok": self.format_ok,
            "prompt": self.prompt,
            "sample_index": self.sample_index,
            "extras": dict(self.extras),
            "end": self.end,
            "turns": self.turns,
            **({"tokens": [seg.to_dict() for seg in self.tokens]} if self.tokens else {}),
            "totals": self.totals(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Trajectory:
        """A trajectory from :meth:`to_dict`; files written before the ledger and the end were typed keep them in
        ``extras`` (``token_segments``, ``end``, ``turns``), from where they are moved to their fields."""
        extras = dict(d.get("extras", {}))
        legacy = extras.pop("token_segments", None) or []
        end, turns = extras.pop("end", ""), extras.pop("turns", 0)
        return cls(
            question_id=str(d["question_id"]),
            question=str(d["question"]),
            protocol=str(d["protocol"]),
            steps=[Step.from_dict(s) for s in d.get("steps", [])],
            prediction=d.get("prediction"),
            format_ok=bool(d.get("format_ok", False)),
            prompt=str(d.get("prompt", "")),
            sample_index=int(d.get("sample_index", 0)),
            extras=extras,
            tokens=[TokenSegment.from_dict(x) for x in d.get("tokens", legacy)],
            end=str(d.get("end", end)),
            turns=int(d.get("turns", turns)),
        )


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of a training text and whether the policy is trained to produce it (its own turns: yes; the prompt and
    whatever the environment inserted: no)."""

    text: str
    trained: bool


def passages_by_id(passages: Sequence[Passage]) -> dict[str, Passage]:
    """Index passages by id, refusing duplicate ids (two passages with one id would make gold matching ambiguous)."""
    out: dict[str, Passage] = {}
    for p in passages:
        if p.id in out:
            raise ValueError(f"duplicate passage id {p.id!r} (titles {out[p.id].title!r} and {p.title!r})")
        out[p.id] = p
    return out
