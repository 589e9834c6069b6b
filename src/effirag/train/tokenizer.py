"""A byte-level BPE tokenizer trained (``tokenizers``) on a world's text, with every protocol tag as one token.

The embedded default policy is trained from scratch, so it gets its own small vocabulary: byte-level BPE (the scheme
of GPT-2, Llama 3 and Qwen) never produces an unknown token, so any retrieved text can be inserted into a prompt.

Protocol tags (``<search>``, ``</information>``, ``<Reference>`` …) are added as *atomic* tokens: each is one id that
BPE never splits, so a tag costs one generated token and the stop strings of the agent loop match exactly. They are
added as non-special added tokens on purpose: decoding with ``skip_special_tokens=True`` (what HF backends do) must
keep them, because the protocol parsers read them. Only the control tokens (end of text, padding) are special.

Optionally (``entity_tokens``) every entity name of a generated world is one atomic token too. Why: a policy that
names an entity, asks about it, or answers with it must copy the name from its prompt; a name BPE splits into 2–8
pieces needs an induction circuit (match the previous piece, copy the next) that a ~4M-parameter model trained for an
hour on CPU did not form (measured on the demo policy), while one token is copied by a single attention
head. Names match as whole words only, longest first, so ``Houfyville State University`` is one token and
``Houfyville`` another, and a preceding space stays its own byte-level token (``Ġ``), so a name has one id whether it
follows a space or a bracket. This is for a world whose names are known; a user's tokenizer is loaded, not trained.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effirag.config import check, option

log = logging.getLogger(__name__)

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"

# The tags of every protocol's text format. Kept here in one place; see :func:`protocol_tags`.
_FALLBACK_TAGS: tuple[str, ...] = (
    # Search-R1 / Dynamic Search-R1
    "<think>",
    "</think>",
    "<search>",
    "</search>",
    "<information>",
    "</information>",
    "<answer>",
    "</answer>",
    "<more info>",
    "</more info>",
    # HiPRAG
    "<step>",
    "</step>",
    "<reasoning>",
    "</reasoning>",
    "<context>",
    "</context>",
    "<conclusion>",
    "</conclusion>",
    # TeaRAG
    "<entities>",
    "</entities>",
    "<subquery>",
    "</subquery>",
    "<Reference>",
    "</Reference>",
    "<summary>",
    "</summary>",
    "<memory>",
    "</memory>",
    # ReasonRAG
    "<query>",
    "</query>",
    "<evidence>",
    "</evidence>",
    "<documents>",
    "</documents>",
    # RouteRAG
    "[passage]",
    "[graph]",
)


def protocol_tags() -> tuple[str, ...]:
    """Every tag of every protocol: the agent runtime's list when it exposes one, united with the known tags."""
    tags: list[str] = list(_FALLBACK_TAGS)
    try:
        from effirag.agent.protocols import ALL_TAGS  # type: ignore[attr-defined]
    except ImportError:
        return tuple(tags)
    for t in ALL_TAGS:
        if t not in tags:
            tags.append(t)
    return tuple(tags)


@dataclass(frozen=True)
class TokenizerConfig:
    """How the policy's BPE tokenizer is trained."""

    vocab_size: int = option(4096, help="Target vocabulary size, tags and control tokens included.")
    min_frequency: int = option(2, help="A merge is learned only from pairs seen at least this often.")
    model_max_length: int = option(2048, help="Longest sequence the tokenizer reports (the model's context).")
    entity_tokens: bool = option(
        False, help="Add every entity name of the world as one atomic, whole-word token (needs a generated world)."
    )

    def __post_init__(self) -> None:
        check(self.vocab_size >= 300, self, "vocab_size", "must be >= 300 (256 bytes plus tags and merges)")
        check(self.min_frequency >= 1, self, "min_frequency", "must be >= 1")
        check(self.model_max_length >= 16, self, "model_max_length", "must be >= 16")


def train_tokenizer(  # type: ignore[no-untyped-def]
    texts: Iterable[str], config: TokenizerConfig, tags: Sequence[str] | None = None, words: Sequence[str] = ()
):
    """Train byte-level BPE on ``texts`` and wrap it as a ``transformers`` fast tokenizer.

    Returns a ``PreTrainedTokenizerFast`` with ``eos``/``pad`` set, every tag in ``tags`` (default:
    :func:`protocol_tags`) as one atomic token, and every name in ``words`` as one whole-word token (see the module
    docstring; the names come from the world when ``config.entity_tokens`` is set).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tags = tuple(protocol_tags() if tags is None else tags)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=max(config.vocab_size - len(tags), 300),
        min_frequency=config.min_frequency,
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        model_max_length=config.model_max_length,
        clean_up_tokenization_spaces=False,
    )
    tok.add_tokens(list(tags))
    for w in words:
        if not w or w != w.strip() or w in tags:
            raise ValueError(f"entity token {w!r} is empty, has outer whitespace or is a protocol tag")
    names = sorted(set(words))
    tok.add_tokens([AddedToken(w, single_word=True, normalized=False) for w in names])
    log.info("trained BPE tokenizer: %d tokens (%d tags, %d entity names)", len(tok), len(tags), len(names))
    return tok


def load_tokenizer(path: str | Path):  # type: ignore[no-untyped-def]
    """Load a saved tokenizer folder (``save_pretrained`` layout)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


ROUND_TRIP_SAMPLES = (
    "Question: In what year did The Wandering Empire (1965) come out?\n",
    "<entities> Beidaeburg </entities>\n<subquery> In which country is Beidaeburg? </subquery>",
    "Doc 1 (Title: Cekoulstan) Cekoulstan is a nation; its capital is Stuia.\n<answer> 22 August 1977 </answer>",
)


def as_loaded(tokenizer: Any, model_config: Any, folder: str | Path) -> Any:
    """``tokenizer`` exactly as ``AutoTokenizer.from_pretrained`` will load it from a checkpoint of this model.

    Why: transformers 5 picks the tokenizer class from ``config.json``'s model type (``Qwen2Tokenizer`` for qwen2),
    and that class installs its own pre-tokenizer (Qwen splits every digit, and splits punctuation differently from
    byte-level BPE's). Data encoded with the freshly trained object would get other ids than the saved checkpoint
    produces at inference, so the SFT data is encoded with the reloaded tokenizer. A class that cannot reproduce
    text (decode ∘ encode ≠ identity) or loses a protocol tag is refused here, naming the class.
    """
    from transformers import AutoTokenizer

    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    model_config.save_pretrained(str(d))
    tokenizer.save_pretrained(str(d))
    loaded = AutoTokenizer.from_pretrained(str(d))
    for text in ROUND_TRIP_SAMPLES:
        back = loaded.decode(loaded.encode(text, add_special_tokens=False), skip_special_tokens=True)
        if back != text:
            raise ValueError(
                f"tokenizer reloaded as {type(loaded).__name__} from {d} does not round-trip {text!r} (got {back!r})"
            )
    for tag in protocol_tags():
        if len(loaded.encode(tag, add_special_tokens=False)) != 1:
            raise ValueError(f"tokenizer reloaded as {type(loaded).__name__} from {d} splits the tag {tag!r}")
    return loaded
