"""LLM OpenIE: two calls through a scripted Generator, robust JSON parsing with typed statuses."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from effirag.llm.base import Completion, GenerationConfig, Generator
from effirag.retrieval.openie_llm import LLMOpenIE, ParseStatus, parse_json_field
from effirag.types import Passage, Triplet


class ScriptedGenerator:
    """Answers each prompt with the first scripted reply whose key occurs in it; records the prompts."""

    name = "scripted"

    def __init__(self, replies: list[tuple[str, str]]) -> None:
        self.replies = replies
        self.prompts: list[list[str]] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        self.prompts.append(list(prompts))
        out = []
        for p in prompts:
            text = next(r for key, r in self.replies if key in p)
            out.append([Completion(text, tuple(range(len(text.split()))))])
        return out


@pytest.mark.parametrize(
    ("text", "status", "value"),
    [
        ('{"named_entities": ["A", "B"]}', ParseStatus.OK, ["A", "B"]),
        ('Sure!\n```json\n{"named_entities": ["A {x}"]}\n```\nDone.', ParseStatus.OK, ["A {x}"]),
        ('{"named_entities": []}', ParseStatus.EMPTY, []),
        ("no json here", ParseStatus.MISSING, []),
        ('{"entities": ["A"]}', ParseStatus.MISSING, []),
        ('{"named_entities": ["A", }', ParseStatus.MALFORMED, []),
        ('{"named_entities": "A"}', ParseStatus.MALFORMED, []),
        ("{'named_entities': ['A']}", ParseStatus.MALFORMED, []),
    ],
)
def test_parse_json_field(text: str, status: ParseStatus, value: list[str]) -> None:
    got = parse_json_field(text, "named_entities")
    assert got.status is status and got.value == value
    assert bool(got.error) == (status in (ParseStatus.MISSING, ParseStatus.MALFORMED))


def test_two_calls_ner_then_triples() -> None:
    passages = [
        Passage("p1", "Hank Snow", "Hank Snow lived in Tennessee."),
        Passage("p2", "Broken", "Nothing parses here."),
    ]
    gen = ScriptedGenerator(
        [
            ("Entities:", '{"triples": [["Hank Snow", "lived in", "Tennessee"], ["bad", "triple"], ["", "r", "x"]]}'),
            ("Passage: Hank Snow lived", '{"named_entities": ["Hank Snow", "Tennessee", "Hank Snow"]}'),
            ("Passage: Nothing", "I cannot help with that."),
        ]
    )
    assert isinstance(gen, Generator)
    res = LLMOpenIE(gen).extract(passages)
    assert len(gen.prompts) == 2 and all(len(batch) == 2 for batch in gen.prompts)  # two batched calls
    assert '["Hank Snow", "Tennessee"]' in gen.prompts[1][0]  # triples call conditioned on the NER entities
    ok, broken = res
    assert ok.entities == ["Hank Snow", "Tennessee"] and ok.ok
    assert ok.triplets == [Triplet("Hank Snow", "lived in", "Tennessee", "p1")] and ok.invalid_triples == 2
    assert broken.ner_status is ParseStatus.MISSING and not broken.ok
    assert broken.triple_status is ParseStatus.OK  # the scripted triple reply matched "Entities:" for p2 too
    assert broken.errors == ["NER: no JSON object in the reply"]


def test_empty_and_wrong_count() -> None:
    assert LLMOpenIE(ScriptedGenerator([])).extract([]) == []

    class Short(ScriptedGenerator):
        def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
            return []

    with pytest.raises(ValueError, match="0 results for 1 prompts"):
        LLMOpenIE(Short([])).extract([Passage("p", "t", "x")])


def test_reply_cut_off_by_the_token_limit_keeps_its_complete_items() -> None:
    from effirag.llm.scripted import ScriptedGenerator as Replay

    looping = '{"triples": [["A", "r", "B"], ["A", "r", "C"], ["A", "r", "D"]'  # never closes: a model in a loop
    gen = Replay({"Passage: A met": ['{"named_entities": ["A"]}', looping], "Passage: C": ["{}", '{"triples": [}']})
    cfg = GenerationConfig(max_new_tokens=8)  # 8 whitespace words: the third triple is cut in half
    ok, bad = LLMOpenIE(gen, cfg).extract([Passage("p", "A", "A met B and C."), Passage("q", "C", "C.")])
    assert ok.triple_status is ParseStatus.TRUNCATED and ok.ner_status is ParseStatus.OK
    assert [(t.head, t.tail) for t in ok.triplets] == [("A", "B"), ("A", "C")]
    assert ok.errors == ["triples: cut off at the token limit: kept 2 items"] and not ok.ok
    assert bad.triple_status is ParseStatus.MALFORMED  # ended on its own: no salvage
