"""Per-token loss weights for SFT: more gradient on each step's decision token.

Why: after a step's closing tag and its newline (TeaRAG's ``</summary>``, Search-R1's ``</think>``) one token
decides whether the episode searches again or answers (``<entities>`` / ``Final``, ``<search>`` / ``<answer>``). In
plain SFT that token weighs as much as any copied word, and in a mixture whose rows mostly end at once the policy
learns the mixture's marginal instead of the decision (as the demo policy did in its full-mixture stage). TRL's
``SFTTrainer`` has no per-token weight, so :func:`weighted_sft_trainer` subclasses it: its loss multiplies each
trained token's cross-entropy by a ``loss_weights`` column and divides by the number of trained tokens, so a weight
of 1 everywhere is plain SFT.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def decision_weights(
    input_ids: Sequence[int], labels: Sequence[int], markers: Sequence[Sequence[int]], weight: float
) -> list[float]:
    """Loss weight per position: ``weight`` on each trained token right after a marker token sequence, else 1.

    ``markers`` are the tag texts as token ids (a special token is one id; a user tokenizer may split a tag).
    Untrained positions (label −100) keep weight 1; the loss ignores them anyway.
    """
    out = [1.0] * len(input_ids)
    for m in markers:
        n = len(m)
        if n == 0:
            continue
        for end in range(n, len(input_ids)):
            if labels[end] != -100 and list(input_ids[end - n : end]) == list(m):
                out[end] = weight
    return out


def weighted_token_loss(logits: Any, labels: Any, weights: Any, num_items: Any = None) -> Any:
    """Σ w_t · CE_t over trained tokens / (number of trained tokens, or ``num_items`` across accumulated batches).

    logits: (B, T, V) for next-token prediction; labels, weights: (B, T), labels −100 where nothing is trained. The
    shift is the causal LM's: position t's logits predict labels[t + 1].
    """
    import torch.nn.functional as F

    target = labels[:, 1:]  # (B, T-1)
    ce = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), target, ignore_index=-100, reduction="none")
    trained = target != -100  # (B, T-1)
    denom = trained.sum() if num_items is None else num_items
    return (ce * weights[:, 1:] * trained).sum() / max(int(denom), 1)


def collate_weighted(rows: Sequence[dict[str, list[Any]]], pad_id: int) -> dict[str, Any]:
    """Right-pad ``input_ids`` (pad id), ``labels`` (−100) and ``loss_weights`` (0) to the batch's longest row."""
    import torch

    n = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), n), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), n), -100, dtype=torch.long)
    weights = torch.zeros((len(rows), n), dtype=torch.float32)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for i, r in enumerate(rows):
        k = len(r["input_ids"])
        ids[i, :k] = torch.tensor(r["input_ids"])
        labels[i, :k] = torch.tensor(r["labels"])
        weights[i, :k] = torch.tensor(r["loss_weights"], dtype=torch.float32)
        mask[i, :k] = 1
    return {"input_ids": ids, "labels": labels, "loss_weights": weights, "attention_mask": mask}


def weighted_sft_trainer(**kwargs: Any) -> Any:
    """An ``SFTTrainer`` whose loss is :func:`weighted_token_loss` over the batch's ``loss_weights``."""
    from trl import SFTTrainer

    class WeightedSFTTrainer(SFTTrainer):  # type: ignore[misc]
        def compute_loss(  # type: ignore[no-untyped-def]
            self, model, inputs, return_outputs=False, num_items_in_batch=None
        ):
            weights = inputs.pop("loss_weights")
            labels = inputs.pop("labels")
            outputs = model(**inputs, use_cache=False)
            loss = weighted_token_loss(outputs.logits, labels, weights, num_items_in_batch)
            return (loss, outputs) if return_outputs else loss

    return WeightedSFTTrainer(**kwargs)
