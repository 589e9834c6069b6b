"""``effirag serve``: EffiRAG's HTTP servers.

``effirag serve llm --model DIR`` (or the older ``effirag serve --model DIR``) serves an OpenAI-compatible API over a
local HF model; ``effirag serve retrieval --index DIR`` serves an index to trainers (Search-R1 / verl's ``/retrieve``
and EffiRAG's ``/search``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from effirag.cli.common import RERANK_DEPTH_HELP, RERANKER_HELP, console, flag, friendly_errors, setup_logging

LIMITS_HELP = (
    "Server limit key=value (repeatable), e.g. --set max_n=4 --set http.max_queue=32 --set http.request_timeout_s=60; "
    "see effirag.serve.llm_schema.LLMServeLimits."
)


class _LLMByDefault(TyperGroup):
    """``effirag serve --model DIR ...`` (options before any subcommand) means ``effirag serve llm --model DIR ...``,
    the form the LLM server had before the retrieval server joined it."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's vendored click Context
        if args and args[0].startswith("-") and args[0] not in ("--help", "-h"):
            args = ["llm", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_LLMByDefault,
    no_args_is_help=True,
    help="EffiRAG's HTTP servers: llm (OpenAI-compatible) and retrieval (Search-R1 / verl's /retrieve, /search).",
)


@friendly_errors
def llm(
    model: Path = typer.Option(..., "--model", "-m", help="Local transformers model directory (weights + tokenizer)."),
    host: str = typer.Option("127.0.0.1", help="Interface to bind; a non-loopback one needs --token (or --insecure)."),
    port: int = typer.Option(8000, help="TCP port."),
    model_name: str | None = typer.Option(
        None, "--model-name", help="Model id clients must send (default: the directory's name)."
    ),
    device: str = typer.Option("auto", help="auto (CUDA when available), cpu, cuda or cuda:N."),
    dtype: str = typer.Option("auto", help="auto, float32, bfloat16 or float16."),
    max_batch_size: int = typer.Option(16, help="Rows (prompt × sample) per forward batch."),
    max_tokens: int | None = typer.Option(
        None, help="max_tokens when a request does not set it (default: the model's inference settings, else 256)."
    ),
    max_wait_ms: float = typer.Option(5.0, help="How long to wait for concurrent requests to batch together."),
    workers: int = typer.Option(
        4, min=1, help="Batches generated at once: a request with other settings never waits behind a running batch."
    ),
    token: str | None = typer.Option(
        None, "--token", envvar="EFFIRAG_TOKEN", help="Require 'Authorization: Bearer TOKEN' (env EFFIRAG_TOKEN)."
    ),
    insecure: bool = flag("--insecure", help="Allow a non-loopback --host without a token."),
    limits_file: Path | None = typer.Option(None, "--limits", help="YAML file of server limits."),
    settings: list[str] = typer.Option([], "--set", help=LIMITS_HELP),
    verbose: bool = flag("--verbose", "-v", help="Log requests and model loading."),
) -> None:
    """Serve MODEL at http://HOST:PORT/v1 (completions, chat/completions, models), /health and /tokenize."""
    from effirag.config import load_config
    from effirag.llm.hf import HFGenerator
    from effirag.serve.llm import create_app
    from effirag.serve.llm_schema import LLMServeLimits
    from effirag.serve.safety import check_bind, run_server

    setup_logging(verbose)
    check_bind(host, token, insecure)  # before loading the model: a refused bind costs nothing
    limits = load_config(LLMServeLimits, limits_file, settings)
    if max_tokens is None:  # the turn length the policy was measured with (MODEL/inference.yaml), if it says
        from effirag.agent.settings import load_settings

        found = load_settings(model) if model.is_dir() else None
        max_tokens = found.max_new_tokens if found is not None and found.max_new_tokens else 256
    gen = HFGenerator(model, device=device, dtype=dtype, max_batch_size=max_batch_size).load()
    name = model_name or model.resolve().name
    app = create_app(
        gen, name, default_max_tokens=max_tokens, max_wait_ms=max_wait_ms, limits=limits, token=token, workers=workers
    )
    auth = "token required" if token else "no token"
    console.print(
        f"serving [bold]{name}[/] ({model}) at http://{host}:{port}/v1 ({auth}) — backend spec: "
        f"openai:http://{host}:{port}/v1#{name}"
    )
    run_server(app, host, port, limits.http, log_level="info" if verbose else "warning")


app.command("llm")(llm)


@friendly_errors
def retrieval(
    index: Path = typer.Option(
        ..., "--index", "-i", help="Index folder from `effirag index build` (checked on start)."
    ),
    host: str = typer.Option("127.0.0.1", help="Interface to bind; a non-loopback one needs --token (or --insecure)."),
    port: int = typer.Option(8000, help="TCP port."),
    mode: str | None = typer.Option(
        None, "--mode", help="Mode of /retrieve (default: passage when the index is dense, else sparse)."
    ),
    device: str = typer.Option("cpu", help="Torch device for query encoding."),
    threads: int = typer.Option(0, "--threads", help="Torch threads for query encoding (0: torch's default)."),
    reranker: str = typer.Option("none", "--reranker", help=RERANKER_HELP),
    rerank_depth: int = typer.Option(20, "--rerank-depth", help=RERANK_DEPTH_HELP),
    token: str | None = typer.Option(
        None, "--token", envvar="EFFIRAG_TOKEN", help="Require 'Authorization: Bearer TOKEN' (env EFFIRAG_TOKEN)."
    ),
    insecure: bool = flag("--insecure", help="Allow a non-loopback --host without a token."),
    limits_file: Path | None = typer.Option(None, "--limits", help="YAML file of server limits."),
    settings: list[str] = typer.Option(
        [], "--set", help="Server limit key=value (repeatable), e.g. --set max_topk=50 --set http.max_queue=128."
    ),
    verbose: bool = flag("--verbose", "-v", help="Log requests and index loading."),
) -> None:
    """Serve INDEX at http://HOST:PORT: POST /retrieve (Search-R1 / verl), POST /search, GET /health, GET /metrics."""
    from effirag.config import load_config
    from effirag.retrieval.facade import RetrieverConfig, load_retriever
    from effirag.serve.retrieval import create_app
    from effirag.serve.retrieval_schema import RetrievalServeLimits
    from effirag.serve.safety import check_bind, run_server

    setup_logging(verbose)
    check_bind(host, token, insecure)  # before loading the index: a refused bind costs nothing
    limits = load_config(RetrievalServeLimits, limits_file, settings)
    config = RetrieverConfig(rerank_depth=rerank_depth)
    retriever = load_retriever(  # refuses a stale/corrupt index
        index, device=device, torch_threads=threads, config=config, reranker=reranker
    ).load()
    app_ = create_app(retriever, limits=limits, token=token, retrieve_mode=mode)
    auth = "token required" if token else "no token"
    console.print(
        f"serving index [bold]{index}[/] ({retriever.n_passages} passages) at http://{host}:{port}/retrieve and "
        f"/search ({auth})"
    )
    run_server(app_, host, port, limits.http, log_level="info" if verbose else "warning")


app.command("retrieval")(retrieval)
