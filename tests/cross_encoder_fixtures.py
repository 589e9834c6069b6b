"""A tiny cross-encoder built from a config (no download) and the small corpus's questions it is trained on."""

from __future__ import annotations

import json
import re
from pathlib import Path

from effirag.types import Passage

# one question per SMALL_PASSAGES passage (conftest.py); BM25 ranks a wrong passage first for q1 only
SMALL_QUESTIONS = [
    ("q0", "What is the capital of the Netherlands?", "Amsterdam", "p0"),
    ("q1", "Which city in Europe has the most ports?", "Rotterdam", "p1"),  # BM25 ranks p5 first
    ("q2", "When was the Dutch East India Company founded?", "1602", "p2"),
    ("q3", "When do tulips bloom?", "spring", "p3"),
    ("q4", "Who painted The Night Watch?", "Rembrandt", "p4"),
    ("q5", "What is Europe?", "a continent", "p5"),
]


def build_tiny_encoder(folder: Path, passages: list[Passage], seed: int = 0) -> Path:
    """A 2-layer, 32-wide BERT with a one-logit head and a WordPiece tokenizer over the words of ``passages`` and
    :data:`SMALL_QUESTIONS`, saved as a Hugging Face folder (what ``effirag train cross-encoder`` starts from)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    texts = [f"{p.title} {p.text}" for p in passages] + [q for _, q, _, _ in SMALL_QUESTIONS]
    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n", encoding="utf-8")
    tok = BertTokenizerFast(vocab=str(vocab))  # transformers 5: the vocab file as `vocab`
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=128, num_labels=1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    BertForSequenceClassification(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def write_small_data(folder: Path, passages: list[Passage]) -> tuple[Path, Path]:
    """(questions.jsonl in FlashRAG layout with supporting ids, corpus.jsonl with the passages' ids)."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus, questions = folder / "corpus.jsonl", folder / "questions.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": p.id, "title": p.title, "text": p.text}) + "\n" for p in passages), encoding="utf-8"
    )
    rows = [
        {"id": i, "question": q, "golden_answers": [a], "metadata": {"supporting_ids": [g]}}
        for i, q, a, g in SMALL_QUESTIONS
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return questions, corpus
