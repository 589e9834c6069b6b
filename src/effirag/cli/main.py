"""The ``effirag`` command. Each command group lives in its own module and is registered here, one line each."""

from __future__ import annotations

import typer

from effirag.cli import agent as agent_cli
from effirag.cli import data as data_cli
from effirag.cli import eval as eval_cli
from effirag.cli import export as export_cli
from effirag.cli import index as index_cli
from effirag.cli import models as models_cli
from effirag.cli import profile as profile_cli
from effirag.cli import serve as serve_cli
from effirag.cli import train as train_cli
from effirag.cli import world as world_cli
from effirag.cli.demo import demo
from effirag.cli.reproduce import reproduce
from effirag.cli.view import view

app = typer.Typer(
    help="EffiRAG: efficient agentic retrieval-augmented generation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(data_cli.app, name="data")
app.add_typer(index_cli.app, name="index")
app.command("search")(index_cli.search)
app.add_typer(eval_cli.app, name="eval")
app.add_typer(world_cli.app, name="world")
app.add_typer(train_cli.app, name="train")
app.command("ask")(agent_cli.ask)
app.command("demo")(demo)
app.add_typer(serve_cli.app, name="serve")
app.add_typer(export_cli.app, name="export")
app.command("reproduce")(reproduce)
app.command("view")(view)
app.add_typer(models_cli.app, name="models")
app.add_typer(profile_cli.app, name="profile")
