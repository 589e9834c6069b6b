"""JSON / JSONL reading and writing with errors that name the file, the line and the field."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from effirag.errors import DataError


def read_json(path: str | Path) -> Any:
    """Parse a whole JSON file; a syntax error names the file, line and column."""
    p = Path(path)
    if not p.is_file():
        raise DataError("file not found", path=p)
    try:
        with p.open(encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}", path=p) from e


def iter_jsonl(
    path: str | Path, *, skip_invalid: bool = False, skipped: list[str] | None = None
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` for every non-blank line (1-based line numbers).

    A line that is not valid JSON raises :class:`DataError` naming the file and line, unless ``skip_invalid``; then
    it is recorded in ``skipped`` (so callers can print a count) and passed over.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError("file not found", path=p)
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                err = DataError(f"invalid JSON: {e.msg} (column {e.colno})", path=p, record=f"line {lineno}")
                if not skip_invalid:
                    raise err from e
                if skipped is not None:
                    skipped.append(str(err))


def read_records(
    path: str | Path, *, skip_invalid: bool = False, skipped: list[str] | None = None
) -> list[tuple[str, Any]]:
    """Records of a ``.json`` list or a ``.jsonl`` file as ``(location, record)``; location is "line N" or an index."""
    p = Path(path)
    if p.suffix == ".jsonl":
        return [(f"line {n}", r) for n, r in iter_jsonl(p, skip_invalid=skip_invalid, skipped=skipped)]
    data = read_json(p)
    if isinstance(data, Mapping) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list):
        raise DataError(f"expected a JSON list of records, got {type(data).__name__}", path=p)
    return [(str(i), r) for i, r in enumerate(data)]


def write_jsonl(path: str | Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write one compact JSON object per line (UTF-8, keys in insertion order); returns the count."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with p.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False))
            f.write("\n")
            n += 1
    return n


def write_json(path: str | Path, data: Any) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


def field(record: Any, name: str, kind: type | tuple[type, ...], *, path: str | Path, where: str) -> Any:
    """``record[name]`` checked for presence and type; otherwise a :class:`DataError` naming file, record, field."""
    if not isinstance(record, Mapping):
        raise DataError(f"expected a JSON object, got {type(record).__name__}", path=path, record=where)
    if name not in record:
        raise DataError("missing field", path=path, record=where, field=name)
    value = record[name]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataError(
            f"expected {names}, got {type(value).__name__}", path=path, record=where, field=name, value=value
        )
    return value
