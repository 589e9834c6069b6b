"""Shared CLI plumbing: a rich console, one-line errors, JSON output."""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
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


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
