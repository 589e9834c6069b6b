"""Tiny random-init causal LMs built from a config, for tests and benchmarks (never downloaded).

``make_tiny_model(dir)`` trains a small byte-level BPE tokenizer on a few sentences (so any text round-trips, with
no unknown tokens), wraps it as a ``PreTrainedTokenizerFast`` with a chat template, builds a Qwen2 or Llama model
from a config with a wide initialisation (so greedy argmaxes are far from ties and batched == one-by-one), and saves
both with ``save_pretrained`` so ``AutoTokenizer`` / ``AutoModelForCausalLM`` load the directory like any user model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

EOS = "<|endoftext|>"

# A minimal chat template: role-tagged turns, then an open assistant turn when asked for a generation prompt.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

_SENTENCES = [
    "Who directed the film that won the award in the year the author was born?",
    "<think> I need to find the director first. </think> <search> director of the film </search>",
    "<information> Doc 1: The film was directed by Ana Lopez in Madrid. </information>",
    "<answer> Ana Lopez </answer> Final answer: Ana Lopez",
    "<step><reasoning> The capital is needed. </reasoning><conclusion> Paris </conclusion></step>",
    "[passage] [graph] <more info> 3 </more info> <Reference> context </Reference> <query> q </query>",
    "The river flows through the city of Lyon and reaches the sea near Marseille.",
    "EffiRAG answers questions with the fewest tokens, steps and searches.",
]


def make_tiny_model(
    dir: str | Path,
    arch: str = "qwen2",
    vocab: int = 384,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int = 128,
    max_positions: int = 2048,
    init_std: float = 0.2,
    seed: int = 0,
) -> Path:
    """Build and save a tiny random-init causal LM + tokenizer in ``dir``; return ``dir`` as a Path.

    ``arch`` is ``"qwen2"``, ``"llama"`` or ``"lfm2"``. ``vocab`` is the BPE target size (≥ 256 + specials;
    byte-level, so the tokenizer never produces an unknown token). ``init_std`` is deliberately wide (HF default 0.02)
    so next-token logits are well separated and greedy decoding is robust to padding-induced float noise.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        Lfm2Config,
        Lfm2ForCausalLM,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    out = Path(dir)
    out.mkdir(parents=True, exist_ok=True)

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_SENTENCES * 4, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOS, pad_token=EOS, bos_token=EOS)
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(out)

    eos_id = tok.convert_tokens_to_ids(EOS)
    common = dict(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        initializer_range=init_std,
        tie_word_embeddings=True,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )
    torch.manual_seed(seed)
    if arch == "qwen2":
        model: torch.nn.Module = Qwen2ForCausalLM(Qwen2Config(**common))
    elif arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common))
    elif arch == "lfm2":  # first block a short convolution, the rest attention
        types = ["conv"] + ["full_attention"] * (layers - 1)
        model = Lfm2ForCausalLM(Lfm2Config(**common, layer_types=types, block_auto_adjust_ff_dim=False))
    else:
        raise ValueError(f"make_tiny_model: unknown arch {arch!r}; known: 'qwen2', 'llama', 'lfm2'")
    model.save_pretrained(out)  # type: ignore[operator]
    return out


def read_as_gguf(monkeypatch: Any, folder: Path) -> None:
    """Make transformers read the saved model ``folder`` wherever it is asked to read a GGUF file (a call with
    ``gguf_file=``), so that a GGUF → HF folder conversion runs end to end on a tiny model; every other load is
    left as it is. ``monkeypatch`` is pytest's fixture (the patch ends with the test)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for cls in (AutoTokenizer, AutoModelForCausalLM):

        def from_pretrained(
            path: Any, *args: Any, gguf_file: str | None = None, _real: Any = cls.from_pretrained, **kw: Any
        ) -> Any:
            if gguf_file is None:
                return _real(path, *args, **kw)
            kw.pop("quantization_config", None)  # the GGUF de-quantiser's; the tiny folder is float32 already
            return _real(str(folder), *args, **kw)

        monkeypatch.setattr(cls, "from_pretrained", from_pretrained)
