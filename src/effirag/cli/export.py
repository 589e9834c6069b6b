"""``effirag export``: write EffiRAG's data and runs in other tools' formats. Each exporter lives in its own module
and is registered here, one line each."""

from __future__ import annotations

import typer

from effirag.cli import export_verl
from effirag.cli.export_traces import traces

app = typer.Typer(
    help="Export data and runs in other tools' formats (verl, OpenInference traces).", no_args_is_help=True
)

app.command("verl")(export_verl.verl)
app.command("traces")(traces)
