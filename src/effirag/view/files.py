"""Small shared pieces of the viewer: reading a run's JSON / JSONL / YAML files with errors that name the file and
line, and the HTML bits every section uses (number formatting, clipped text, a run's configuration)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from effirag.data.io import iter_jsonl
from effirag.errors import DataError


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, in order; a line that is not an object fails naming the file and line."""
    out = []
    for i, rec in iter_jsonl(path):
        if not isinstance(rec, dict):
            raise DataError("not a JSON object", path=path, record=f"line {i}")
        out.append(rec)
    return out


def read_json(path: Path) -> Any:
    """The JSON document at ``path``, None when there is no such file."""
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON: {e.msg}", path=path) from e


def read_config(folder: Path) -> dict[str, Any]:
    """The resolved run config a training command wrote (``config.yaml``, or ``config.json`` from ``data mcts``);
    empty when the folder has neither."""
    import yaml

    if (folder / "config.yaml").is_file():
        try:
            cfg = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
        except yaml.YAMLError as e:
            raise DataError(f"invalid YAML: {e}", path=folder / "config.yaml") from e
    else:
        cfg = read_json(folder / "config.json")
    if cfg is not None and not isinstance(cfg, dict):
        raise DataError("not a mapping of settings", path=folder / "config.yaml")
    return cfg or {}


def num(v: Any, digits: int = 3) -> str:
    """A table cell for a number: ``-`` for None or NaN, integers as they are, floats to ``digits`` significant."""
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return escape(str(v))
    if isinstance(v, int) or (float(v).is_integer() and abs(v) < 1e9):
        return str(int(v))
    return f"{v:.{digits}g}"


def clip(text: str, limit: int = 90) -> str:
    """``text`` for a table cell: whole when short, else its first ``limit`` characters with the whole text a click
    away (``<details>``) and on hover (``title``)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return escape(flat)
    return (
        f'<details class="clip"><summary title="{escape(text)}">{escape(flat[: limit - 1])}…</summary>'
        f'<pre class="text">{escape(text)}</pre></details>'
    )


def flatten(cfg: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``a.b.c`` keys of a nested config, in its order."""
    out: list[tuple[str, Any]] = []
    for k, v in cfg.items():
        if isinstance(v, dict):
            out.extend(flatten(v, f"{prefix}{k}."))
        else:
            out.append((f"{prefix}{k}", v))
    return out


def config_html(cfg: dict[str, Any], title: str = "config") -> str:
    """A run's configuration as a collapsed two-column table (nothing when unknown)."""
    if not cfg:
        return ""
    rows = "".join(
        f"<tr><td>{escape(k)}</td><td>{escape(json.dumps(v, ensure_ascii=False))}</td></tr>" for k, v in flatten(cfg)
    )
    return f'<details class="config"><summary>{escape(title)}</summary><table class="config">{rows}</table></details>'
