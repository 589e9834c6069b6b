"""Frequency and presence penalties over a completion's own tokens (the OpenAI / vLLM sampling parameters).

Why not transformers' ``repetition_penalty``: it counts the prompt's tokens too, and a RAG policy's job is to copy
names out of its prompt (the retrieved evidence). The OpenAI definition counts only the tokens generated so far in
this completion, so a name quoted from the evidence is free the first time and a degenerate loop ("grew grew grew
…" in a small policy's summaries) is pushed down a little more at every repetition.
"""

from __future__ import annotations

from typing import Any


def output_penalties(logits: Any, counts: Any, frequency_penalty: float, presence_penalty: float) -> Any:
    """Penalised next-token logits (OpenAI API reference, "Parameter details: frequency and presence penalties").

    ``logits[j] - counts[j] * frequency_penalty - (counts[j] > 0) * presence_penalty``, where ``counts[j]`` is how
    often token j occurs among the tokens this completion has generated so far (the prompt is not counted). Positive
    values discourage repetition; 0 and 0 return ``logits`` unchanged. Pure and batched.

    Shapes: ``logits`` (rows, vocab) float; ``counts`` (rows, vocab), same dtype or integer. Returns (rows, vocab).
    """
    if frequency_penalty == 0.0 and presence_penalty == 0.0:
        return logits
    c = counts.to(logits.dtype)
    return logits - frequency_penalty * c - presence_penalty * (c > 0).to(logits.dtype)


def generated_counts(input_ids: Any, prompt_len: int, vocab_size: int) -> Any:
    """How often each token id occurs in each row after its first ``prompt_len`` positions: (rows, vocab) float.

    ``input_ids`` (rows, width) is what ``generate`` hands a logits processor: the (left-padded) prompt block of
    ``prompt_len`` columns, then the tokens generated so far.
    """
    import torch

    new = input_ids[:, prompt_len:]  # (rows, generated so far)
    counts = torch.zeros((input_ids.shape[0], vocab_size), dtype=torch.float32, device=input_ids.device)
    if new.shape[1]:
        counts.scatter_add_(1, new, torch.ones(new.shape, dtype=torch.float32, device=input_ids.device))
    return counts
