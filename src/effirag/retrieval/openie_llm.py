"""LLM OpenIE through any :class:`~effirag.llm.base.Generator`: HippoRAG's two calls, NER then triples given entities.

Call 1 asks for the named entities of a passage as ``{"named_entities": [...]}``; call 2 gives the passage and those
entities and asks for ``{"triples": [[subject, relation, object], ...]}``. Both calls are batched over passages.
:func:`parse_json_field` is the one parser of these replies: it finds the first JSON object in the text (code fences
and chatter around it are tolerated) and tells apart ok / empty / missing / malformed. Invalid triples (not three
non-empty strings) are dropped and counted, as HippoRAG does. A reply cut off by the token limit inside its list keeps
the complete items before the cut (:func:`parse_reply`): small base models often list until the limit.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from effirag.llm.base import GenerationConfig, Generator
from effirag.retrieval.openie_prompts import INSTRUCT, OpenIEPrompts
from effirag.types import Passage, Triplet

log = logging.getLogger(__name__)


class ParseStatus(enum.StrEnum):
    OK = "ok"
    EMPTY = "empty"  # the field is there and is an empty list
    MISSING = "missing"  # no JSON object, or the object lacks the field
    MALFORMED = "malformed"  # JSON that does not parse, or the field is not a list
    TRUNCATED = "truncated"  # cut off by the token limit inside the list: its complete items are kept


@dataclass(frozen=True)
class Parsed:
    status: ParseStatus
    value: list[Any] = field(default_factory=list)
    error: str = ""


def _first_object(text: str) -> str | None:
    """The first balanced ``{...}`` span of ``text`` (string-aware), or None when there is no complete one."""
    start = text.find("{")
    while start != -1:
        depth, in_str, esc = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def parse_json_field(text: str, name: str) -> Parsed:
    """Parse a reply that should hold ``{name: [...]}`` (see the module docstring for the statuses)."""
    span = _first_object(text)
    if span is None:
        if "{" in text:
            return Parsed(ParseStatus.MALFORMED, error="unbalanced JSON object")
        return Parsed(ParseStatus.MISSING, error="no JSON object in the reply")
    try:
        obj = json.loads(span)
    except json.JSONDecodeError as e:
        return Parsed(ParseStatus.MALFORMED, error=f"invalid JSON: {e.msg} at char {e.pos}")
    if not isinstance(obj, dict) or name not in obj:
        return Parsed(ParseStatus.MISSING, error=f"the JSON object has no {name!r} field")
    value = obj[name]
    if not isinstance(value, list):
        return Parsed(ParseStatus.MALFORMED, error=f"{name!r} is a {type(value).__name__}, not a list")
    return Parsed(ParseStatus.OK if value else ParseStatus.EMPTY, value)


def salvage_items(text: str, name: str) -> list[Any]:
    """The complete items, in order, of the ``name`` list in a reply that was cut off inside that list (a small model
    that keeps listing until the token limit). Stops at the first item that does not decode."""
    m = re.search(r'"' + re.escape(name) + r'"\s*:\s*\[', text)
    if m is None:
        return []
    decoder, i = json.JSONDecoder(), m.end()
    items: list[Any] = []
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        try:
            item, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            return items
        items.append(item)


def parse_reply(text: str, name: str, cut_off: bool) -> Parsed:
    """:func:`parse_json_field`, except that a reply ``cut_off`` by the token limit whose JSON is therefore unbalanced
    keeps the complete items before the cut (:attr:`ParseStatus.TRUNCATED`); a reply that ended on its own and does
    not parse stays malformed."""
    parsed = parse_json_field(text, name)
    if cut_off and parsed.status is ParseStatus.MALFORMED:
        items = salvage_items(text, name)
        if items:
            return Parsed(ParseStatus.TRUNCATED, items, f"cut off at the token limit: kept {len(items)} items")
    return parsed


@dataclass
class PassageExtraction:
    """What the two calls gave for one passage; ``triplets`` carry the passage id as ``source_id``."""

    passage_id: str
    entities: list[str]
    triplets: list[Triplet]
    ner_status: ParseStatus
    triple_status: ParseStatus
    invalid_triples: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.ner_status is ParseStatus.OK and self.triple_status is ParseStatus.OK


class LLMOpenIE:
    """Two-call OpenIE (NER → triples conditioned on the entities) through ``generator`` (greedy by default).

    ``prompts``: the template pair (:data:`~effirag.retrieval.openie_prompts.INSTRUCT` for instruction-tuned models,
    ``FEWSHOT`` for base models); its stop strings are added to ``config``'s."""

    def __init__(
        self, generator: Generator, config: GenerationConfig | None = None, prompts: OpenIEPrompts = INSTRUCT
    ) -> None:
        self.generator = generator
        config = config or GenerationConfig(max_new_tokens=512, temperature=0.0)
        self.config = dataclasses.replace(config, stop=tuple(dict.fromkeys((*config.stop, *prompts.stop))))
        self.prompts = prompts

    def extract(self, passages: Sequence[Passage]) -> list[PassageExtraction]:
        """One :class:`PassageExtraction` per passage, in order. Failed replies are recorded, never raised."""
        if not passages:
            return []
        ner_replies = self._generate([self.prompts.ner.format(title=p.title, text=p.text) for p in passages])
        entities: list[list[str]] = []
        results: list[PassageExtraction] = []
        for p, (reply, cut) in zip(passages, ner_replies, strict=True):
            parsed = parse_reply(reply, "named_entities", cut)
            names = _unique(str(x).strip() for x in parsed.value if isinstance(x, str | int | float) and str(x).strip())
            entities.append(names)
            res = PassageExtraction(p.id, names, [], parsed.status, ParseStatus.MISSING)
            if parsed.error:
                res.errors.append(f"NER: {parsed.error}")
            results.append(res)
        prompts = [
            self.prompts.triples.format(title=p.title, text=p.text, entities=json.dumps(ents, ensure_ascii=False))
            for p, ents in zip(passages, entities, strict=True)
        ]
        for res, (reply, cut) in zip(results, self._generate(prompts), strict=True):
            parsed = parse_reply(reply, "triples", cut)
            res.triple_status = parsed.status
            if parsed.error:
                res.errors.append(f"triples: {parsed.error}")
            for t in parsed.value:
                if isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) and x.strip() for x in t):
                    res.triplets.append(Triplet(t[0].strip(), t[1].strip(), t[2].strip(), res.passage_id))
                else:
                    res.invalid_triples += 1
        bad = sum(not r.ok for r in results)
        if bad:
            log.warning(
                "LLM OpenIE (%s): %d of %d passages had a reply that was not ok", self.generator.name, bad, len(results)
            )
        return results

    def _generate(self, prompts: list[str]) -> list[tuple[str, bool]]:
        """(text, whether the token limit cut it off) per prompt."""
        out = self.generator.generate(prompts, self.config)
        if len(out) != len(prompts):
            raise ValueError(f"{self.generator.name} returned {len(out)} results for {len(prompts)} prompts")
        return [(c[0].text, c[0].finish_reason == "length") if c else ("", False) for c in out]


def _unique(xs: Any) -> list[str]:
    seen: dict[str, None] = {}
    for x in xs:
        seen.setdefault(x, None)
    return list(seen)
