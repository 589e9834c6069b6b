"""Loss masking for SFT on agent trajectories (TeaRAG eq. 4).

TeaRAG trains with L = −Σ_t m_t · log π(y_t | x, y_<t) / Σ_t m_t, where m_t = 0 for every token the model did not
write: the prompt and every span the environment inserted (retrieved ``<Reference>`` content in TeaRAG,
``<information>`` in Search-R1, ``<context>`` in HiPRAG, the documents given to ReasonRAG's grounding stage). A model
that is trained to *produce* retrieved text learns to hallucinate documents; masking removes that signal.

Everything here is pure: text in, token ids and labels out. Labels are −100 (PyTorch's ``ignore_index``) where m_t = 0;
m_t comes from the same token ledger as the RL trainers' masks (:mod:`effirag.train.samples`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from effirag.train.samples import flatten
from effirag.types import TokenKind, TokenSegment

IGNORE_INDEX = -100


class _Encoder(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


@dataclass(frozen=True)
class Segment:
    """A piece of a training sequence and whether the model is trained to produce it."""

    text: str
    trained: bool


@dataclass(frozen=True)
class InsertedSpan:
    """Delimiters of a span the environment inserts: the whole span, delimiters included, is masked."""

    open: str
    close: str


def split_inserted(text: str, spans: Sequence[InsertedSpan]) -> list[Segment]:
    """Split a completion into trained segments and inserted (masked) segments.

    An inserted span runs from its opening delimiter to the end of its closing delimiter; both delimiters are
    masked, because the engine writes them (the model stops at ``</search>``; the engine appends
    ``<information>…</information>``). An opening delimiter without its closing one masks to the end of the text
    (a truncated observation). Adjacent segments of one kind are merged.
    """
    out: list[Segment] = []
    pos = 0
    while pos < len(text):
        hits = [(text.find(s.open, pos), s) for s in spans]
        hits = [(i, s) for i, s in hits if i >= 0]
        if not hits:
            _append(out, text[pos:], True)
            break
        start, span = min(hits, key=lambda h: (h[0], -len(h[1].open)))
        _append(out, text[pos:start], True)
        end = text.find(span.close, start + len(span.open))
        stop = len(text) if end < 0 else end + len(span.close)
        _append(out, text[start:stop], False)
        pos = stop
    return out


def _append(out: list[Segment], text: str, trained: bool) -> None:
    if not text:
        return
    if out and out[-1].trained == trained:
        out[-1] = Segment(out[-1].text + text, trained)
    else:
        out.append(Segment(text, trained))


def text_ledger(segments: Sequence[Segment], tokenizer: _Encoder, *, eos_id: int | None = None) -> list[TokenSegment]:
    """The token ledger of a written trajectory: each segment tokenised on its own (so a token never straddles a mask
    boundary), trained segments as ``generated``, the first untrained one as the ``prompt`` and later ones as
    ``inserted``; ``eos_id`` (when given) appended as a generated id (the model learns to stop after its answer)."""
    out: list[TokenSegment] = []
    for i, seg in enumerate(segments):
        kind = TokenKind.GENERATED if seg.trained else TokenKind.PROMPT if i == 0 else TokenKind.INSERTED
        out.append(TokenSegment(kind, tuple(tokenizer.encode(seg.text, add_special_tokens=False))))
    if eos_id is not None:
        out.append(TokenSegment(TokenKind.GENERATED, (eos_id,)))
    return out


def encode_segments(
    segments: Sequence[Segment], tokenizer: _Encoder, *, eos_id: int | None = None
) -> tuple[list[int], list[int]]:
    """Token ids and labels of ``segments``: the mask of their :func:`text_ledger` as RL samples get it
    (:func:`effirag.train.samples.flatten`), labels equal to the ids where it is 1 and ``IGNORE_INDEX`` elsewhere."""
    ids, mask, _ = flatten(text_ledger(segments, tokenizer, eos_id=eos_id))
    return ids, [i if m else IGNORE_INDEX for i, m in zip(ids, mask, strict=True)]


def build_example(
    prompt: str,
    completion: str,
    tokenizer: _Encoder,
    spans: Sequence[InsertedSpan],
    *,
    eos_id: int | None = None,
    max_length: int | None = None,
) -> tuple[list[int], list[int]]:
    """``prompt`` (masked) + ``completion`` (trained except inserted spans) → (input_ids, labels).

    With ``max_length``, sequences are cut at the right (the prompt is kept; what is cut is what the model would
    have produced last).
    """
    segments = [Segment(prompt, False), *split_inserted(completion, spans)]
    ids, labels = encode_segments(segments, tokenizer, eos_id=eos_id)
    if max_length is not None:
        ids, labels = ids[:max_length], labels[:max_length]
    return ids, labels


def masked_nll(logits: Any, labels: Any) -> Any:
    """TeaRAG eq. 4: L = −Σ_t m_t · log π(y_t | x, y_<t) / Σ_t m_t, with m_t = [labels_t ≠ −100].

    ``logits``: (batch, T, vocab) next-token scores where position t predicts token t+1 (the causal-LM shift is
    done here, as in ``transformers``); ``labels``: (batch, T). Returns a scalar tensor (0 when nothing is trained).
    """
    import torch

    shift_logits = logits[:, :-1, :]  # (B, T-1, V): predictions of tokens 1..T-1
    shift_labels = labels[:, 1:]  # (B, T-1)
    mask = shift_labels != IGNORE_INDEX  # (B, T-1): m_t
    logp = torch.log_softmax(shift_logits.float(), dim=-1)
    target = shift_labels.clamp(min=0).unsqueeze(-1)  # (B, T-1, 1); masked targets point at id 0, then zeroed
    nll = -logp.gather(-1, target).squeeze(-1) * mask  # (B, T-1)
    return nll.sum() / mask.sum().clamp(min=1)


def masked_fraction(labels: Sequence[int]) -> float:
    """Share of positions excluded from the loss (1 − Σm_t / T)."""
    if not labels:
        return 0.0
    return sum(1 for x in labels if x == IGNORE_INDEX) / len(labels)
