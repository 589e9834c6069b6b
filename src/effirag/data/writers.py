"""Writers: FlashRAG / Search-R1 JSONL (questions and corpus) and HippoRAG's MuSiQue-style question json."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from effirag.data.io import write_json, write_jsonl
from effirag.types import Passage, QAExample


def example_to_flashrag(ex: QAExample) -> dict[str, Any]:
    """``{id, question, golden_answers, metadata}``; metadata: hops, type, decomposition, gold ids, evidence."""
    return {
        "id": ex.id,
        "question": ex.question,
        "golden_answers": list(ex.answers),
        "metadata": {
            "hops": ex.hops,
            "type": ex.qtype,
            "decomposition": [
                {"question": d.question, "answer": d.answer, "support": d.support_id} for d in ex.decomposition
            ],
            "supporting_ids": list(ex.supporting_ids),
            "evidence": [
                {"head": t.head, "relation": t.relation, "tail": t.tail, "source": t.source_id} for t in ex.evidence
            ],
        },
    }


def passage_to_flashrag(p: Passage) -> dict[str, Any]:
    """``{id, title, text, contents}`` with ``contents = "\\"Title\\"\\ntext"`` (readable by FlashRAG and Search-R1)."""
    return {"id": p.id, "title": p.title, "text": p.text, "contents": p.contents}


def write_flashrag_questions(path: str | Path, examples: Iterable[QAExample]) -> int:
    return write_jsonl(path, (example_to_flashrag(e) for e in examples))


def write_flashrag_corpus(path: str | Path, passages: Iterable[Passage]) -> int:
    return write_jsonl(path, (passage_to_flashrag(p) for p in passages))


def write_hipporag_questions(
    path: str | Path,
    examples: Sequence[QAExample],
    passages: Mapping[str, Passage],
    distractors: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """HippoRAG's MuSiQue layout: gold paragraphs (``is_supporting``) plus optional distractor passage ids."""
    out = []
    for ex in examples:
        ids = list(ex.supporting_ids) + [i for i in (distractors or {}).get(ex.id, []) if i not in ex.supporting_ids]
        paras = [
            {
                "idx": j,
                "title": passages[i].title,
                "paragraph_text": passages[i].text,
                "is_supporting": i in ex.supporting_ids,
            }
            for j, i in enumerate(ids)
        ]
        idx_of = {i: j for j, i in enumerate(ids)}
        out.append(
            {
                "id": ex.id,
                "paragraphs": paras,
                "question": ex.question,
                "question_decomposition": [
                    {
                        "id": n,
                        "question": d.question,
                        "answer": d.answer,
                        "paragraph_support_idx": idx_of.get(d.support_id) if d.support_id else None,
                    }
                    for n, d in enumerate(ex.decomposition)
                ],
                "answer": ex.answers[0],
                "answer_aliases": list(ex.answers[1:]),
                "answerable": True,
            }
        )
    write_json(path, out)
