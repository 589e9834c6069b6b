"""Exceptions that name what went wrong: the file, the record, the field and the value."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class EffiRAGError(Exception):
    """Base class of every error EffiRAG raises on purpose."""


class ConfigError(EffiRAGError, ValueError):
    """A configuration value is invalid. The message names the config class, the field and the bad value."""

    def __init__(self, config: str, field: str, value: Any, why: str) -> None:
        self.config, self.field, self.value = config, field, value
        super().__init__(f"{config}.{field}={value!r}: {why}")


class DataError(EffiRAGError, ValueError):
    """Input data is malformed. The message names the file, the record (index or line) and the field."""

    def __init__(
        self,
        why: str,
        *,
        path: str | Path | None = None,
        record: int | str | None = None,
        field: str | None = None,
        value: Any = None,
    ) -> None:
        self.path, self.record, self.field, self.value, self.why = path, record, field, value, why
        where = []
        if path is not None:
            where.append(str(path))
        if record is not None:
            where.append(f"record {record}")
        if field is not None:
            where.append(f"field {field!r}")
        head = ", ".join(where)
        tail = f" (value: {_short(value)})" if value is not None else ""
        super().__init__(f"{head}: {why}{tail}" if head else f"{why}{tail}")


class IndexMismatchError(EffiRAGError):
    """A persisted index is missing, stale, corrupt or was built with other settings than requested."""


class BackendError(EffiRAGError):
    """An LLM backend failed: the message names the backend (server URL or model path) and what it answered."""


def _short(value: Any, limit: int = 80) -> str:
    s = repr(value)
    return s if len(s) <= limit else s[: limit - 3] + "..."
