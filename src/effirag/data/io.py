"""JSON / JSONL reading and writing with errors that name the file, the line and the field."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from effirag.errors import DataError
from effirag.types import Trajectory

# A JSON \uD800–\uDFFF escape: the only way a lone UTF-16 surrogate can enter a str decoded from UTF-8.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogate_escape(raw: str) -> bool:
    """Whether JSON text holds a ``\\uD800``-``\\uDFFF`` escape (cheap pre-check before :func:`lone_surrogate`)."""
    return _SURROGATE_ESCAPE.search(raw) is not None


def lone_surrogate(value: Any) -> tuple[list[str | int], str] | None:
    """The first string in a parsed JSON value (object keys included) that holds a lone UTF-16 surrogate, as
    ``(path, string)``; ``None`` when every string is valid Unicode text.

    ``json`` turns an escape like ``"\\ud800"`` without its partner into such a string; it cannot be encoded as
    UTF-8, so a tokenizer, a log line or a file write would fail on it far from where it came from.
    """
    stack: list[tuple[list[str | int], Any]] = [([], value)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return where, v
        elif isinstance(v, Mapping):
            for k, x in reversed(list(v.items())):
                if isinstance(k, str) and _SURROGATE.search(k):
                    return [*where, k], k
                stack.append(([*where, k], x))
        elif isinstance(v, list):
            stack.extend(([*where, i], x) for i, x in reversed(list(enumerate(v))))
    return None


def format_path(parts: Iterable[str | int]) -> str:
    """``["docs", 3, "passage"]`` → ``docs[3].passage`` (non-ASCII escaped, so the path can always be printed)."""
    out = ""
    for x in parts:
        out += f"[{x}]" if isinstance(x, int) else (f".{x}" if out else str(x))
    return out.encode("ascii", "backslashreplace").decode("ascii")


def check_text(value: Any, raw: str, *, path: Path, record: str | None = None) -> None:
    """Raise a :class:`DataError` naming file, record and field if ``value`` (parsed from ``raw``) holds a lone
    surrogate. ``raw`` is scanned first, so valid files pay one regex pass and no walk."""
    if not has_surrogate_escape(raw):
        return
    hit = lone_surrogate(value)
    if hit is None:
        return
    parts, text = hit
    if record is None:  # a whole file: the record is the path up to the first list index, the field the rest
        cut = next((i + 1 for i, x in enumerate(parts) if isinstance(x, int)), 0)
        record, parts = (format_path(parts[:cut]) or None), parts[cut:]
    raise DataError(
        "lone UTF-16 surrogate escape (not valid Unicode text; fix or re-encode the file)",
        path=path,
        record=record,
        field=format_path(parts) or None,
        value=text,
    )


def decode_utf8(raw: bytes, *, path: Path, record: str | None = None) -> str:
    """``raw`` decoded as strict UTF-8; invalid bytes raise a :class:`DataError` naming file, line and column."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        where = f"column {col}" if record else f"line {line}, column {col}"
        bad = raw[e.start : e.end]
        raise DataError(f"invalid UTF-8 at {where}: byte(s) {bad!r} ({e.reason})", path=path, record=record) from e


def read_json(path: str | Path) -> Any:
    """Parse a whole JSON file; a syntax error, invalid UTF-8 or a lone surrogate names the file, line / record and
    field."""
    p = Path(path)
    if not p.is_file():
        raise DataError("file not found", path=p)
    text = decode_utf8(p.read_bytes(), path=p)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}", path=p) from e
    check_text(data, text, path=p)
    return data


def iter_jsonl(
    path: str | Path, *, skip_invalid: bool = False, skipped: list[str] | None = None
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)`` for every non-blank line (1-based line numbers).

    A line that is not valid JSON, not valid UTF-8 or holds a lone surrogate raises :class:`DataError` naming the
    file, line (and field), unless ``skip_invalid``; then it is recorded in ``skipped`` (so callers can print a
    count) and passed over.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError("file not found", path=p)
    with p.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            where = f"line {lineno}"
            try:
                line = decode_utf8(raw, path=p, record=where)
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"invalid JSON: {e.msg} (column {e.colno})", path=p, record=where) from e
                check_text(record, line, path=p, record=where)
            except DataError as err:
                if not skip_invalid:
                    raise
                if skipped is not None:
                    skipped.append(str(err))
                continue
            yield lineno, record


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


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """The :class:`Trajectory` records of a JSONL file (an evaluation's or a sampling round's), in file order; a
    record that is not a trajectory raises :class:`DataError` naming the file and line."""
    out: list[Trajectory] = []
    for n, rec in iter_jsonl(path):
        try:
            out.append(Trajectory.from_dict(rec))
        except (KeyError, ValueError, TypeError) as e:
            raise DataError(f"not a trajectory record ({e})", path=Path(path), record=f"line {n}") from e
    return out


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
