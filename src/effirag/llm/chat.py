"""Chat prompts for instruct models: a protocol's prompt as the user message of the model's own chat template.

An instruct model is trained to answer inside its chat format (e.g. ChatML's ``<|im_start|>user … <|im_end|>
<|im_start|>assistant``). Every agent protocol writes its instructions and question as plain text; a backend asked
for chat (``hf:DIR?chat=1``, ``vllm:DIR?chat=1``) renders that text as the single user message, with the template's
default system message and the assistant's turn opened, through :func:`chat_prompt`. The episode then goes on inside
that one assistant turn: the model's turns and the inserted observations are appended as text, as Search-R1 does for
its instruct models. Which prompt to wrap is the engine's business (:func:`as_chat` on the episode's initial
prompt); how to wrap it is the backend's, so every protocol gets the same treatment.

The rendered text already holds the template's special tokens (a BOS where the template writes one), so a chat
backend encodes prompts without adding special tokens of its own.
"""

from __future__ import annotations

from typing import Any

from effirag.errors import BackendError


def chat_prompt(tokenizer: Any, text: str, name: str = "model") -> str:
    """``text`` as the one user message of ``tokenizer``'s chat template, with the assistant's turn opened.

    ``name`` (the backend's) goes into the error raised when the tokenizer has no chat template."""
    if not getattr(tokenizer, "chat_template", None):
        raise BackendError(f"{name}: chat=1 needs a tokenizer with a chat template, and this one has none")
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )
    return str(rendered)


def as_chat(generator: Any, text: str) -> str:
    """An episode's initial prompt as ``generator`` wants it: through its ``format_prompt`` when it has one (a chat
    backend), else unchanged (completion backends, scripted generators)."""
    fmt = getattr(generator, "format_prompt", None)
    return str(fmt(text)) if callable(fmt) else text
