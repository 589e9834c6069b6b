"""Known-fact rows of the demo recipe's SFT data (recipes/demo_policy/knowledge_rows.py) and their config knob."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from demo_policy.config import ExtraRowsConfig
from demo_policy.knowledge_rows import knowledge_examples

from effirag.config import ConfigError
from effirag.train.knowledge import KnownFact

FACTS = [
    KnownFact("f1", "Oskaria was founded in 1262.", "In what year was Oskaria founded?", "1262"),
    KnownFact("f2", "Bram Tolve was born in Wuvia.", "Where was Bram Tolve born?", "Wuvia"),
]


def test_each_fact_as_text_and_question_repeats_times() -> None:
    """2 facts × 3 repeats: 6 text rows (the whole sentence trained) and 6 zero-shot rows (only the answer trained)."""
    rows = knowledge_examples(FACTS, 3, seed=0)
    assert Counter(e.protocol for e in rows) == {"knowledge": 6, "zeroshot": 6}
    text = next(e for e in rows if e.id == "f1/text~0")
    assert [(s.text, s.trained) for s in text.pairs[0]] == [("Oskaria was founded in 1262.", True)]
    question = next(e for e in rows if e.id == "f2/zeroshot~2")
    segments = question.pairs[0]
    assert "Where was Bram Tolve born?" in segments[0].text and not segments[0].trained
    assert segments[1].trained and "Wuvia" in segments[1].text


def test_question_repeats_sets_the_zero_shot_copies_apart_from_the_text() -> None:
    """question_repeats=1 with repeats=3: still 6 text rows, but 2 zero-shot rows (one per fact, copy ~0); 0 drops
    the questions, and more questions than texts is allowed (repeats=1, question_repeats=2: 2 text, 4 questions)."""
    rows = knowledge_examples(FACTS, 3, seed=0, question_repeats=1)
    assert Counter(e.protocol for e in rows) == {"knowledge": 6, "zeroshot": 2}
    assert {e.id for e in rows if e.protocol == "zeroshot"} == {"f1/zeroshot~0", "f2/zeroshot~0"}
    assert Counter(e.protocol for e in knowledge_examples(FACTS, 3, question_repeats=0)) == {"knowledge": 6}
    assert Counter(e.protocol for e in knowledge_examples(FACTS, 1, question_repeats=2)) == {
        "knowledge": 2,
        "zeroshot": 4,
    }
    # the default keeps the data of the runs before the knob: per copy and fact, text then question, then one
    # seeded shuffle
    built = [f"{f}/{kind}~{r}" for r in range(2) for f in ("f1", "f2") for kind in ("text", "zeroshot")]
    random.Random(5).shuffle(built)
    assert [e.id for e in knowledge_examples(FACTS, 2, seed=5)] == built


def test_knowledge_question_repeats_validation_names_the_field() -> None:
    with pytest.raises(ConfigError, match="knowledge_question_repeats"):
        ExtraRowsConfig(knowledge_question_repeats=-2)
