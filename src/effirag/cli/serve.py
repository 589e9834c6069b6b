"""``effirag serve``: an OpenAI-compatible HTTP server over a local HF model (for vLLM-less setups and tests)."""

from __future__ import annotations

from pathlib import Path

import typer

from effirag.cli.common import console, flag, friendly_errors, setup_logging


@friendly_errors
def serve(
    model: Path = typer.Option(..., "--model", "-m", help="Local transformers model directory (weights + tokenizer)."),
    host: str = typer.Option("127.0.0.1", help="Interface to bind (0.0.0.0 exposes it to the network)."),
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
    verbose: bool = flag("--verbose", "-v", help="Log requests and model loading."),
) -> None:
    """Serve MODEL at http://HOST:PORT/v1 (completions, chat/completions, models), /health and /tokenize."""
    import uvicorn

    from effirag.llm.hf import HFGenerator
    from effirag.llm.server import create_app

    setup_logging(verbose)
    if max_tokens is None:  # the turn length the policy was measured with (MODEL/inference.yaml), if it says
        from effirag.agent.settings import load_settings

        found = load_settings(model) if model.is_dir() else None
        max_tokens = found.max_new_tokens if found is not None and found.max_new_tokens else 256
    gen = HFGenerator(model, device=device, dtype=dtype, max_batch_size=max_batch_size).load()
    name = model_name or model.resolve().name
    app = create_app(gen, name, default_max_tokens=max_tokens, max_wait_ms=max_wait_ms)
    console.print(
        f"serving [bold]{name}[/] ({model}) at http://{host}:{port}/v1 — backend spec: openai:http://{host}:{port}/v1#{name}"
    )
    uvicorn.run(app, host=host, port=port, log_level="info" if verbose else "warning")
