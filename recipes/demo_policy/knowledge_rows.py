"""The world's known facts as SFT rows: a model trained from scratch knows nothing, so the facts it should answer from
memory (``knowledge.jsonl``) are taught as causal-LM text (the fact sentence, every token trained) and as zero-shot
questions (``Question → <answer> answer </answer>``, the format of the recall check and HiPRAG's non-search steps)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from effirag.train.knowledge import KnownFact
from effirag.train.masking import Segment
from effirag.train.sft_data import SFTExample
from effirag.train.trajectories import replay


def knowledge_examples(
    facts: Sequence[KnownFact], repeats: int, seed: int = 0, question_repeats: int | None = None
) -> list[SFTExample]:
    """``repeats`` copies of each fact as LM text (fully trained) and ``question_repeats`` (default: ``repeats``) as a
    zero-shot question (answer trained)."""
    from effirag.agent.protocols import get_protocol

    zs = get_protocol("zeroshot")
    rng = random.Random(seed)
    out: list[SFTExample] = []
    n_questions = repeats if question_repeats is None else question_repeats
    for r in range(max(repeats, n_questions)):
        for f in facts:
            if r < repeats:
                out.append(SFTExample(f"{f.id}/text~{r}", "knowledge", [[Segment(f.text, True)]]))
            if r < n_questions:
                turns = [(zs.render_answer(f.answer), None)]  # type: ignore[attr-defined]
                out.append(SFTExample(f"{f.id}/zeroshot~{r}", "zeroshot", replay(zs, f.question, turns)))
    rng.shuffle(out)
    return out
