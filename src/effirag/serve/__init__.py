"""EffiRAG's HTTP servers and the safety layer they share.

:mod:`effirag.serve.guard`, :mod:`~effirag.serve.errors`, :mod:`~effirag.serve.limits` and
:mod:`~effirag.serve.safety` know nothing about models or indexes: auth, body cap, text checks, admission queue,
deadline, cancellation, the bind rule and the OpenAI error format. :mod:`effirag.serve.llm` is the LLM server built
on them. This package sits beside the CLI: it may import ``llm`` and ``retrieval``, never the other way round.
"""
