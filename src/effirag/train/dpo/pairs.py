"""Preference pairs as the trainer sees them: shared prompt ids, then each side's ids with a per-token policy mask.

A pair's two completions continue the same prompt. ``chosen_mask[j]`` / ``rejected_mask[j]`` is 1 where the policy
wrote token j and 0 where the environment inserted it (a ``<Reference>`` / ``<information>`` observation, engine
feedback): the DPO log-ratios and the SFT term sum over policy tokens only (TeaRAG eq. 15–16's I[O_t not masked]).

Pairs come from two places:

- engine samples (:func:`pair_from_samples`): the ids the policy saw and sampled, with the engine's own mask
  (:mod:`effirag.train.samples`), never re-encoded;
- a JSONL of text pairs in RAG-ProGuide's shape (:func:`load_text_pairs`): ``prompt`` (the trajectory prefix as the
  policy saw it), ``chosen`` / ``rejected`` (the next steps), plus any metadata (values, stage, question id) carried
  along. A side is a string, cut into policy text and inserted spans by the protocol's own observation and
  feedback texts (:func:`inserted_spans`), or an explicit list of ``[text, trained]`` segments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effirag.agent.protocols.base import AgentProtocol
from effirag.agent.protocols.state import invalid
from effirag.data.io import iter_jsonl
from effirag.errors import DataError
from effirag.train.masking import IGNORE_INDEX, InsertedSpan, Segment, encode_segments, split_inserted
from effirag.train.samples import EpisodeSample

_SENTINEL = "\x00"


@dataclass(frozen=True)
class PreferencePair:
    """One preference pair in ids (see the module docstring); ``meta`` is carried to logs, never trained on."""

    prompt_ids: tuple[int, ...]
    chosen_ids: tuple[int, ...]
    chosen_mask: tuple[int, ...]
    rejected_ids: tuple[int, ...]
    rejected_mask: tuple[int, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for side in ("chosen", "rejected"):
            ids, mask = getattr(self, f"{side}_ids"), getattr(self, f"{side}_mask")
            if len(ids) != len(mask):
                raise ValueError(f"pair {dict(self.meta)}: {len(ids)} {side} ids but {len(mask)} mask entries")
            if any(m not in (0, 1) for m in mask):
                raise ValueError(f"pair {dict(self.meta)}: {side} mask holds values other than 0 and 1")

    @property
    def policy_tokens(self) -> tuple[int, int]:
        """(chosen, rejected) policy-token counts."""
        return sum(self.chosen_mask), sum(self.rejected_mask)

    def row(self) -> dict[str, list[int]]:
        """The trainer's dataset row (:class:`~effirag.train.dpo.trainer.MaskedPreferenceCollator` reads it)."""
        return {
            "prompt_ids": list(self.prompt_ids),
            "chosen_ids": list(self.chosen_ids),
            "rejected_ids": list(self.rejected_ids),
            "chosen_mask": list(self.chosen_mask),
            "rejected_mask": list(self.rejected_mask),
        }


def pair_from_samples(
    chosen: EpisodeSample, rejected: EpisodeSample, meta: Mapping[str, Any] | None = None
) -> PreferencePair:
    """A pair of two engine samples of one question: they must share their prompt ids (same question, same
    protocol), which is the pair's prompt."""
    if chosen.prompt_ids != rejected.prompt_ids:
        raise DataError(
            f"samples {chosen.sample_index} and {rejected.sample_index} of question {chosen.question_id!r} start "
            "from different prompts; a preference pair needs one shared prompt",
            record=chosen.question_id,
        )
    return PreferencePair(
        chosen.prompt_ids, chosen.completion_ids, chosen.mask, rejected.completion_ids, rejected.mask, dict(meta or {})
    )


def inserted_spans(protocol: AgentProtocol) -> list[InsertedSpan]:
    """The texts ``protocol`` inserts into a trajectory, as spans to mask: its observation wrapper (read off
    ``wrap_observation`` around a sentinel, exactly and with the whitespace stripped), its invalid-turn feedback and its
    search-limit feedback (literal texts)."""
    opening, closing = protocol.wrap_observation(_SENTINEL).split(_SENTINEL)
    spans = [InsertedSpan(opening, closing)]
    if (opening.strip(), closing.strip()) != (opening, closing) and opening.strip():
        spans.append(InsertedSpan(opening.strip(), closing.strip()))
    for literal in (protocol.feedback(invalid("", "")), protocol.limit_feedback()):
        if literal.strip():
            spans.append(InsertedSpan(literal, ""))
    return spans


def _segments(value: Any, spans: Sequence[InsertedSpan], where: dict[str, Any]) -> list[Segment]:
    """One side of a text pair: a string cut by ``spans``, or explicit ``[text, trained]`` segments."""
    if isinstance(value, str):
        return split_inserted(value, spans)
    if isinstance(value, list) and all(
        isinstance(s, list | tuple) and len(s) == 2 and isinstance(s[0], str) and isinstance(s[1], bool) for s in value
    ):
        return [Segment(text, trained) for text, trained in value]
    raise DataError("expected a string or a list of [text, trained] segments", value=value, **where)


def encode_text_pair(
    record: Mapping[str, Any], tokenizer: Any, spans: Sequence[InsertedSpan], where: dict[str, Any]
) -> PreferencePair:
    """A RAG-ProGuide-shaped record → ids and masks. The prompt is encoded as a generator encodes a prompt (with the
    tokenizer's special tokens); each segment of a side on its own, so no token straddles a mask boundary."""
    for name in ("prompt", "chosen", "rejected"):
        if name not in record:
            raise DataError("missing field", field=name, **where)
    if not isinstance(record["prompt"], str) or not record["prompt"]:
        raise DataError("must be a non-empty string", field="prompt", value=record["prompt"], **where)
    prompt_ids = tuple(tokenizer.encode(record["prompt"], add_special_tokens=True))
    sides: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for name in ("chosen", "rejected"):
        ids, labels = encode_segments(_segments(record[name], spans, {**where, "field": name}), tokenizer)
        mask = tuple(int(lab != IGNORE_INDEX) for lab in labels)
        if not any(mask):
            raise DataError("has no policy text (all of it is inserted)", field=name, value=record[name], **where)
        sides[name] = (tuple(ids), mask)
    meta = {k: v for k, v in record.items() if k not in ("prompt", "chosen", "rejected")}
    return PreferencePair(prompt_ids, *sides["chosen"], *sides["rejected"], meta)


def load_text_pairs(path: str | Path, tokenizer: Any, protocol: AgentProtocol) -> list[PreferencePair]:
    """Every pair of a JSONL file (blank lines skipped), encoded with ``tokenizer``, inserted spans of ``protocol``
    masked. Fails on the first malformed record, naming file, line and field."""
    p = Path(path)
    if not p.is_file():
        raise DataError("pairs file not found", path=p)
    spans = inserted_spans(protocol)
    pairs: list[PreferencePair] = []
    for n, rec in iter_jsonl(p):
        if not isinstance(rec, dict):
            raise DataError("expected a JSON object", path=p, record=f"line {n}", value=rec)
        pairs.append(encode_text_pair(rec, tokenizer, spans, {"path": p, "record": f"line {n}"}))
    if not pairs:
        raise DataError("holds no pairs", path=p)
    return pairs
