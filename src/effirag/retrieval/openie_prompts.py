"""Prompt pairs for :class:`~effirag.retrieval.openie_llm.LLMOpenIE`: one for instruction-tuned models, one few-shot
pair for base (non-chat) models.

Both ask for the same JSON replies (``{"named_entities": [...]}`` then ``{"triples": [[s, r, o], ...]}``). The
instruction pair describes the task and lets the model stop on its own. A base model does not follow instructions; it
continues a pattern, so the few-shot pair shows two worked passages, each reply on one line, and stops at the newline
that ends the reply (otherwise the model goes on writing a next example). The worked passages are written for this
prompt and are not drawn from any benchmark corpus, so no evaluated passage is shown to the model as an example.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpenIEPrompts:
    """The NER template (``{title}``, ``{text}``), the triple template (also ``{entities}``, a JSON list) and the stop
    strings of both calls (empty: the backend's end of sequence ends the reply)."""

    ner: str
    triples: str
    stop: tuple[str, ...] = ()


INSTRUCT = OpenIEPrompts(
    ner="""Read the passage and list every named entity in it: people, places, organisations, works, events, \
dates and numbers that a question could ask about. Answer with JSON only, in the form
{{"named_entities": ["entity 1", "entity 2"]}}

Passage title: {title}
Passage: {text}
JSON:""",
    triples="""Turn the passage into knowledge triples [subject, relation, object]. Each triple should state \
one fact of the passage and mention at least one of the listed entities; resolve pronouns to the names they refer \
to. Answer with JSON only, in the form
{{"triples": [["subject", "relation", "object"]]}}

Passage title: {title}
Passage: {text}
Entities: {entities}
JSON:""",
)

# Two worked passages (invented for this prompt), shared by both few-shot templates.
_EX1_TITLE = "Lake Orvana"
_EX1_TEXT = (
    "Lake Orvana is a freshwater lake in northern Finland. It was named after the poet Aino Orvanen, who was born in "
    "the nearby town of Kemijärvi in 1891. The lake covers 42 square kilometres."
)
_EX1_ENTS = '["Lake Orvana", "Finland", "Aino Orvanen", "Kemijärvi", "1891", "42 square kilometres"]'
_EX1_TRIPLES = (
    '[["Lake Orvana", "located in", "Finland"], ["Lake Orvana", "named after", "Aino Orvanen"], '
    '["Aino Orvanen", "born in", "Kemijärvi"], ["Aino Orvanen", "born in", "1891"], '
    '["Lake Orvana", "covers", "42 square kilometres"]]'
)
_EX2_TITLE = "The Glass Harbour"
_EX2_TEXT = (
    "The Glass Harbour is a 1978 novel by British author Helen Marsh. It won the Whitcombe Prize and was adapted "
    "into a film directed by Paolo Renzi in 1985."
)
_EX2_ENTS = '["The Glass Harbour", "1978", "British", "Helen Marsh", "Whitcombe Prize", "Paolo Renzi", "1985"]'
_EX2_TRIPLES = (
    '[["The Glass Harbour", "published in", "1978"], ["The Glass Harbour", "written by", "Helen Marsh"], '
    '["Helen Marsh", "nationality", "British"], ["The Glass Harbour", "won", "Whitcombe Prize"], '
    '["The Glass Harbour", "adapted into film by", "Paolo Renzi"]]'
)


def _braces(s: str) -> str:
    """``s`` with its braces doubled, so that ``str.format`` keeps them."""
    return s.replace("{", "{{").replace("}", "}}")


_NER_SHOT = 'Passage title: {t}\nPassage: {x}\nJSON: {{"named_entities": {e}}}\n\n'
_TRIPLE_SHOT = 'Passage title: {t}\nPassage: {x}\nEntities: {e}\nJSON: {{"triples": {r}}}\n\n'

FEWSHOT = OpenIEPrompts(
    ner="List the named entities of each passage as JSON.\n\n"
    + _braces(_NER_SHOT.format(t=_EX1_TITLE, x=_EX1_TEXT, e=_EX1_ENTS))
    + _braces(_NER_SHOT.format(t=_EX2_TITLE, x=_EX2_TEXT, e=_EX2_ENTS))
    + "Passage title: {title}\nPassage: {text}\nJSON:",
    triples="Turn each passage into knowledge triples [subject, relation, object] as JSON.\n\n"
    + _braces(_TRIPLE_SHOT.format(t=_EX1_TITLE, x=_EX1_TEXT, e=_EX1_ENTS, r=_EX1_TRIPLES))
    + _braces(_TRIPLE_SHOT.format(t=_EX2_TITLE, x=_EX2_TEXT, e=_EX2_ENTS, r=_EX2_TRIPLES))
    + "Passage title: {title}\nPassage: {text}\nEntities: {entities}\nJSON:",
    stop=("\n",),
)

PROMPTS: dict[str, OpenIEPrompts] = {"instruct": INSTRUCT, "fewshot": FEWSHOT}
