"""Dataset statistics (``effirag data stats``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from effirag.data.corpus import Corpus
from effirag.data.openie import OpenIEResult
from effirag.data.questions import QuestionSet


def dataset_stats(qs: QuestionSet, corpus: Corpus | None = None, openie: OpenIEResult | None = None) -> dict[str, Any]:
    """Counts, hop/type distributions, mean passage length (whitespace tokens) and gold coverage.

    ``gold_passages.found`` counts supporting passages present in the corpus (or in the questions' own paragraphs
    when no corpus is given).
    """
    passages = corpus.passages if corpus is not None else qs.passages
    ids = corpus.by_id if corpus is not None else {p.id: p for p in qs.passages}
    hops = Counter("unknown" if e.hops is None else str(e.hops) for e in qs.examples)
    types = Counter(e.qtype or "unknown" for e in qs.examples)
    gold_total = sum(len(e.supporting_ids) for e in qs.examples)
    gold_found = sum(1 for e in qs.examples for s in e.supporting_ids if s in ids)
    lengths = [len(p.text.split()) for p in passages]
    out: dict[str, Any] = {
        "layout": qs.layout,
        "n_questions": len(qs.examples),
        "n_passages": len(passages),
        "n_triplets": len(openie.triplets) if openie else 0,
        "hops": dict(sorted(hops.items())),
        "types": dict(types.most_common()),
        "mean_passage_tokens": round(sum(lengths) / len(lengths), 2) if lengths else 0.0,
        "gold_passages": {"total": gold_total, "found": gold_found},
        "skipped_records": len(qs.skipped) + (len(corpus.skipped) if corpus else 0),
    }
    if openie is not None:
        out["triplets"] = {
            "raw": openie.raw,
            "malformed": openie.malformed,
            "duplicates": openie.duplicates,
            "kept": len(openie.triplets),
            "passages_with_triplets": sum(1 for v in openie.entities if v),
        }
    return out
