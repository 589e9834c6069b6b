"""Gold sub-question evaluation: #n substitution, key entities, whole-token answer recall, token counting."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from effirag.eval.subqueries import answer_recalled, evaluate_gold_subqueries, key_entities, resolve_subquestion
from effirag.retrieval.base import RetrievalResult
from effirag.retrieval.kg import KnowledgeGraph
from effirag.types import ItemKind, Passage, QAExample, RetrievedItem, SubQuestion, Triplet

PASSAGES = [
    Passage("p1", "Hello Love", "Hello Love is a song by Hank Snow."),
    Passage("p2", "Hank Snow", "Hank Snow lived in Tennessee."),
]
KG = KnowledgeGraph.build(
    PASSAGES,
    [Triplet("Hello Love", "performer", "Hank Snow", "p1"), Triplet("Hank Snow", "lived in", "Tennessee", "p2")],
)
EXAMPLE = QAExample(
    "q1",
    "Where did the performer of Hello Love live?",
    ("Tennessee",),
    decomposition=(
        SubQuestion("Hello Love >> performer", "Hank Snow", "p1"),
        SubQuestion("Where did #1 live?", "Tennessee", "p2"),
    ),
)


def test_resolve_and_key_entities() -> None:
    assert resolve_subquestion("Where did #1 live with #2?", ["A", "B"]) == "Where did A live with B?"
    with pytest.raises(ValueError, match="#3"):
        resolve_subquestion("Who is #3?", ["A"], where="question x hop 2")
    assert key_entities(KG, "Hello Love >> performer", None) == ["Hello Love"]
    assert key_entities(KG, "Where did Hank Snow live?", "Hank Snow") == ["Hank Snow"]  # not repeated
    assert key_entities(KG, "Where did he live?", "Hank Snow") == ["Hank Snow"]


def test_answer_recalled_whole_tokens() -> None:
    assert answer_recalled("the Church of England", ["He joined church of England."])
    assert not answer_recalled("35", ["founded in 1935"])
    assert not answer_recalled("", ["anything"])


def test_evaluate_by_hand() -> None:
    """Hop 1 retrieves p1 ("Hello Love\\nHello Love is a song by Hank Snow." → 10 words, contains "hank snow");
    hop 2 retrieves a triplet "(Hank Snow, lived in, Nashville)" (5 whitespace words, no "tennessee").
    Recall = 1/2 = 50 %; tokens per retrieval = (10 + 5) / 2 = 7.5."""
    calls: list[tuple[str, list[str]]] = []

    def retrieve(q: str, ents: list[str]) -> Sequence[RetrievedItem]:
        calls.append((q, ents))
        if q.startswith("Hello"):
            return [RetrievedItem(ItemKind.CHUNK, "p1", PASSAGES[0].text, 1.0, title="Hello Love")]
        return [RetrievedItem(ItemKind.TRIPLET, "t9", "(Hank Snow, lived in, Nashville)", 1.0)]

    no_decomp = QAExample("q2", "x?", ("y",))
    out = evaluate_gold_subqueries([EXAMPLE, no_decomp], retrieve, KG, k=5)
    assert calls == [("Hello Love >> performer", ["Hello Love"]), ("Where did Hank Snow live?", ["Hank Snow"])]
    assert out["answer_recall"] == 50.0 and out["tokens_per_retrieval"] == 7.5
    assert out["n_questions"] == 1 and out["n_subqueries"] == 2 and out["skipped"] == 1
    assert out["recall_by_hop"] == {"1": 100.0, "2": 0.0} and out["tokenizer"] == "whitespace"
    assert out["per_subquery"] == [  # each retrieval, for tests paired by sub-question
        {"id": "q1", "hop": 1, "recalled": 1, "tokens": 10, "items": 1},
        {"id": "q1", "hop": 2, "recalled": 0, "tokens": 5, "items": 1},
    ]


class CharTokenizer:
    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(map(chr, ids))


class FakeFacade:
    def __init__(self) -> None:
        self.seen: list[dict[str, object]] = []

    def retrieve(self, query, mode="passage", k=5, entities=None, offset=0) -> RetrievalResult:  # type: ignore[no-untyped-def]
        self.seen.append({"mode": mode, "k": k, "entities": entities})
        items = [RetrievedItem(ItemKind.TRIPLET, f"t{i}", "(Hank Snow, lived in, Tennessee)", 1.0) for i in range(9)]
        return RetrievalResult(items)


def test_retriever_protocol_and_tokenizer() -> None:
    """A Retriever is called with mode/k/entities; only k items count.
    "(Hank Snow, lived in, Tennessee)" is 32 characters → 5 × 32 = 160 tokens."""
    facade = FakeFacade()
    out = evaluate_gold_subqueries([EXAMPLE], facade, KG, k=5, tokenizer=CharTokenizer(), mode="kag")
    assert facade.seen[0] == {"mode": "kag", "k": 5, "entities": ["Hello Love"]}
    assert out["items_per_retrieval"] == 5 and out["tokens_per_retrieval"] == 160.0
    assert out["answer_recall"] == 100.0
    with pytest.raises(ValueError, match="k=0"):
        evaluate_gold_subqueries([EXAMPLE], facade, KG, k=0)
