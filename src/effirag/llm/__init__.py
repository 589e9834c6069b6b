"""LLM backends behind one :class:`~effirag.llm.base.Generator` protocol."""

from effirag.llm.base import Completion, GenerationConfig, Generator, Tokenizer

__all__ = ["Completion", "GenerationConfig", "Generator", "Tokenizer"]
