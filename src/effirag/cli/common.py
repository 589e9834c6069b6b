"""Shared CLI plumbing: a rich console, one-line errors, JSON output, flags, logging and progress on stderr."""

from __future__ import annotations

import functools
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console

from effirag.errors import EffiRAGError

console = Console()
err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int = 2) -> None:
    """Print one clear error line on stderr and exit non-zero."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def friendly_errors(fn: F) -> F:
    """Turn EffiRAG's own errors (bad data, config, index, backend) into one line and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (EffiRAGError, FileNotFoundError) as e:
            fail(str(e))

    return wrapper  # type: ignore[return-value]


def emit_json(data: Any) -> None:
    """Machine-readable output on stdout (nothing else goes to stdout when --json is given)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=1) + "\n")


def flag(*names: str, help: str) -> Any:
    """A boolean flag (off by default). Its help shows no value type: the flag takes none (``--json``, not
    ``--json true``)."""
    return typer.Option(False, *names, help=help, metavar="")


def _untyped_help_flags() -> None:
    """typer (0.29) shows ``<bool>`` beside the boolean flags it makes itself (every command's ``--help``), where
    :func:`flag` cannot set the metavar: render every boolean flag without a value type, since it takes none."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "untyped_flags", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        if self.is_flag and not self.count and self.metavar is None:
            return None
        return shown(self, ctx)

    display_type_rich.untyped_flags = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_untyped_help_flags()


def setup_logging(verbose: bool) -> None:
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # bm25s sets its own logger to DEBUG at import, which would print its build steps through our handler
    logging.getLogger("bm25s").setLevel(level)


@contextmanager
def progress(description: str, total: int, unit: str = "") -> Iterator[Callable[..., None]]:
    """A progress bar on stderr (stdout stays clean for --json); yields ``update(done, **fields)``.

    Keyword fields (e.g. ``EM="55.0%"``) are shown after the count. On a terminal this is a rich bar with elapsed time
    and ETA; otherwise (a log file, CI) each update is one plain line, so a long stage is never silent."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    t0 = time.perf_counter()
    if not err_console.is_terminal:

        def line(done: int, **fields: Any) -> None:
            spent = time.perf_counter() - t0
            eta = f", ETA {spent / done * (total - done):.0f} s" if 0 < done < total else ""
            extra = "".join(f", {k} {v}" for k, v in fields.items())
            err_console.print(f"{description}: {done}/{total}{unit}{extra}, {spent:.0f} s{eta}", highlight=False)

        line(0)
        yield line
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[extra]}"))
    with Progress(*columns, TimeElapsedColumn(), TimeRemainingColumn(), console=err_console, transient=True) as bar:
        task = bar.add_task(description, total=total, extra="")

        def update(done: int, **fields: Any) -> None:
            bar.update(task, completed=done, extra=" ".join(f"{k} {v}" for k, v in fields.items()))

        yield update


@contextmanager
def stage(description: str) -> Iterator[None]:
    """A spinner on stderr while a stage without countable steps runs (a plain line when stderr is not a terminal)."""
    if not err_console.is_terminal:
        err_console.print(f"{description} …", highlight=False)
        yield
        return
    with err_console.status(description):
        yield


RERANKER_HELP = (
    "cross-encoder:DIR (any HF cross-encoder folder: reranks the mode's top --rerank-depth, and is KAG's scorer), "
    "bilinear:DIR or a bare DIR (`effirag train reranker`: KAG's scorer only), or none."
)
RERANK_DEPTH_HELP = "Candidates a cross-encoder reranker reorders (passage, sparse, graph and hybrid modes)."
