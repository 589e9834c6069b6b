"""Hugging Face ``datasets`` loader for FlashRAG-layout question sets (real code for users with a network)."""

from __future__ import annotations

from effirag.data.questions import QuestionSet, _flashrag
from effirag.errors import DataError

FLASHRAG_REPO = "RUC-NLPIR/FlashRAG_datasets"


def load_hf_questions(
    name: str, split: str = "test", *, repo: str = FLASHRAG_REPO, limit: int | None = None
) -> QuestionSet:
    """Load ``repo``/``name`` split ``split`` (e.g. ``nq``, ``hotpotqa``, ``2wikimultihopqa``) as :class:`QAExample`s.

    Offline (``HF_HUB_OFFLINE=1`` or no network) this fails with one sentence naming the dataset, not a stack trace.
    """
    import datasets  # heavy import, only when used

    source = f"hf://{repo}/{name}:{split}"
    try:
        ds = datasets.load_dataset(repo, name, split=split)
    except Exception as e:  # datasets raises many types for "not reachable"; we re-raise one clear error
        raise DataError(
            f"could not load the Hugging Face dataset {repo!r} (config {name!r}, split {split!r}): "
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'no detail'}. "
            "Without network access, download it elsewhere and pass the JSONL file with --questions.",
            path=source,
        ) from e
    qs = QuestionSet([], [], "flashrag", source)
    from pathlib import Path

    for i, r in enumerate(ds):
        if limit is not None and i >= limit:
            break
        ex, _ = _flashrag(dict(r), Path(source), str(i), None, qs)
        qs.examples.append(ex)
    return qs
