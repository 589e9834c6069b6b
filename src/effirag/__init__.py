"""EffiRAG: efficient agentic retrieval-augmented generation."""

__version__ = "0.1.0"
