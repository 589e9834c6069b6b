"""The retrieval-only comparisons of ``effirag reproduce``: retrievers run alone on a MuSiQue slice's gold
sub-questions (``effirag eval retrieval --subqueries gold``), as TeaRAG measures content per retrieval.

Each gold sub-question is retrieved by both retrievers with the same resolved text, key entities and k, so a claim
pairs them per sub-question (question id and hop): the unit of a per-retrieval figure. The mean over sub-questions
of ``tokens_per_retrieval`` is the command's own tokens per retrieval; ``answer_recall`` is 1 when the sub-question's
answer occurs in the retrieved texts (its mean is the command's answer recall / 100).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from effirag.errors import DataError
from effirag.reproduce.config import ReproduceConfig
from effirag.reproduce.methods import Method

# claim metric → field of the command's per-sub-question rows
FIELDS = {"tokens_per_retrieval": "tokens", "answer_recall": "recalled"}
SUMMARY = ("n_questions", "n_subqueries", "k", "answer_recall", "tokens_per_retrieval", "items_per_retrieval")


def slice_files(cfg: ReproduceConfig) -> tuple[Path, Path, Path]:
    """The slice's questions, corpus and knowledge-graph files; a missing one is an error naming every missing path."""
    folder = Path(cfg.musique)
    files = (folder / "questions.json", folder / "corpus.json", folder / cfg.musique_kg)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise DataError(
            f"the MuSiQue slice of the retrieval-only comparisons lacks {', '.join(missing)} "
            "(set musique=DIR to another slice, or musique='' to skip these comparisons)",
            path=folder,
            field="musique",
        )
    return files


def _result(out: Path, key: str) -> dict[str, Any]:
    """The JSON an ``eval retrieval --subqueries gold --per-question --json`` stage printed (from its done record)."""
    path = out / "stages" / key / "done.json"
    result = json.loads(path.read_text(encoding="utf-8")).get("result")
    if not isinstance(result, dict) or not isinstance(result.get("per_subquery"), list):
        raise DataError("the stage recorded no per-sub-question rows", path=path, field="result.per_subquery")
    return result


def read_retrievals(
    method: Method, retrievals: dict[tuple[str, str], str], out: Path
) -> tuple[dict[str, Any], dict[str, dict[str, dict[str, float]]]]:
    """(label → the run's summary, label → "question id#hop" → metric → value) of the method's finished retrieval
    stages (``retrievals``: (method, label) → stage key)."""
    runs: dict[str, Any] = {}
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for claim in method.retrieval_claims:
        for r in (claim.a, claim.b):
            key = retrievals.get((method.name, r.label))
            if key is None or r.label in runs:
                continue
            result = _result(out, key)
            runs[r.label] = {
                "status": "measured",
                "stage": key,
                "retriever": r.retriever,
                "tokenizer": result.get("tokenizer"),
                "summary": {k: result.get(k) for k in SUMMARY},
            }
            rows[r.label] = {
                f"{q['id']}#{q['hop']}": {metric: float(q[f]) for metric, f in FIELDS.items()}
                for q in result["per_subquery"]
            }
    return runs, rows
