"""Typed configuration: one dataclass per component, loaded from YAML with ``key=value`` overrides.

Conventions (DEVELOPERS.md §4): every field is declared with :func:`option`, which carries its help text; defaults
live only in the dataclass; ``__post_init__`` validates and raises :class:`~effirag.errors.ConfigError` naming the
field and the bad value. Nested configs are dataclass-typed fields and are addressed with dotted keys
(``retrieval.k=5``).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from effirag.errors import ConfigError

T = TypeVar("T")


def option(default: Any = dataclasses.MISSING, *, help: str, factory: Callable[[], Any] | None = None) -> Any:
    """Declare a config field with its help text (shown by ``--help`` and :func:`describe`)."""
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={"help": help})
    return dataclasses.field(default=default, metadata={"help": help})


def check(ok: bool, config: object, field: str, why: str) -> None:
    """Raise :class:`ConfigError` naming ``config``'s class, ``field`` and its current value unless ``ok``."""
    if not ok:
        raise ConfigError(type(config).__name__, field, getattr(config, field, None), why)


def describe(cls: type) -> list[tuple[str, str, Any, str]]:
    """(name, type, default, help) for every field of a config dataclass, nested ones with dotted names."""
    rows: list[tuple[str, str, Any, str]] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if _is_dataclass_type(t):
            rows += [(f"{f.name}.{n}", ty, d, h) for n, ty, d, h in describe(t)]
            continue
        default: Any = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        rows.append((f.name, _type_name(t), default, f.metadata.get("help", "")))
    return rows


def from_dict(cls: type[T], data: Mapping[str, Any], *, source: str = "config") -> T:
    """Build ``cls`` from a mapping, recursing into nested config dataclasses; unknown keys are an error."""
    if not isinstance(data, Mapping):
        raise ConfigError(cls.__name__, "<root>", data, f"expected a mapping in {source}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            cls.__name__, unknown[0], data[unknown[0]], f"unknown field in {source}; known: {sorted(names)}"
        )
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        t = hints[name]
        if _is_dataclass_type(t) and isinstance(value, Mapping):
            kwargs[name] = from_dict(t, value, source=source)
        else:
            kwargs[name] = _coerce(cls.__name__, name, t, value)
    return cls(**kwargs)


def to_dict(config: Any) -> dict[str, Any]:
    """The config as plain data (for saving next to a run)."""
    return dataclasses.asdict(config)


def parse_overrides(overrides: Sequence[str]) -> dict[str, Any]:
    """``["a.b=3", "c=[1, 2]"]`` → ``{"a": {"b": 3}, "c": [1, 2]}``; values are parsed as YAML scalars/lists."""
    out: dict[str, Any] = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError("overrides", item, item, "expected key=value")
        key, raw = item.split("=", 1)
        value = yaml.safe_load(raw) if raw.strip() else ""
        node = out
        parts = key.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge: ``extra`` wins; nested mappings are merged key by key, so an empty mapping in ``extra`` changes
    nothing (settings a program assembles, e.g. a run's ``env:`` over a policy's inference settings)."""
    return _merge(base, extra, empty_replaces=False)


def merge_written(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`merge` for what a person wrote (a file over the one it extends, ``key=value`` overrides): an empty
    mapping replaces the base's, so ``data.behaviour.known_search={}`` empties the field, as written."""
    return _merge(base, extra, empty_replaces=True)


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any], *, empty_replaces: bool) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, Mapping) and (v or not empty_replaces) and isinstance(out.get(k), Mapping):
            out[k] = _merge(out[k], v, empty_replaces=empty_replaces)
        else:
            out[k] = v
    return out


def load_config(cls: type[T], path: str | Path | None = None, overrides: Sequence[str] = ()) -> T:
    """Load ``cls`` from a YAML file (optional) with CLI ``key=value`` overrides applied on top.

    A file may start from another with ``extends: OTHER.yaml`` (a path relative to the file's own folder): OTHER is
    loaded first and this file's keys are merged over it (:func:`merge_written`), so a curriculum stage states only what
    differs from the stage it follows."""
    data: dict[str, Any] = {}
    source = "overrides"
    if path is not None:
        data = read_yaml(cls.__name__, Path(path))
        source = str(path)
    data = merge_written(data, parse_overrides(overrides))
    return from_dict(cls, data, source=source)


def read_yaml(cfg: str, path: Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The mapping of a YAML config file, with its ``extends`` chain resolved (see :func:`load_config`)."""
    if not path.is_file():
        raise ConfigError(cfg, "<file>", str(path), "config file not found")
    loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(loaded, Mapping):
        raise ConfigError(cfg, "<root>", str(path), "the YAML file must hold a mapping")
    data = dict(loaded)
    base = data.pop("extends", None)
    if base is None:
        return data
    if not isinstance(base, str) or not base:
        raise ConfigError(cfg, "extends", base, f"{path}: must be the path of a YAML file, relative to {path.parent}")
    here = path.resolve()
    parent = (path.parent / base).resolve()
    if parent in (*_seen, here):
        raise ConfigError(cfg, "extends", base, f"{path}: the extends chain comes back to {parent}")
    return merge_written(read_yaml(cfg, parent, (*_seen, here)), data)


def _is_dataclass_type(t: Any) -> bool:
    return isinstance(t, type) and dataclasses.is_dataclass(t)


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", str(t).replace("typing.", ""))


_SCI_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _coerce(cfg: str, name: str, t: Any, value: Any) -> Any:
    """Light coercion for values from YAML/CLI: int→float, list→tuple, str→Path; the dataclass validates the rest."""
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _coerce(cfg, name, non_none[0], value)
        return value
    if t is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if t is float and isinstance(value, str) and _SCI_FLOAT.fullmatch(value.strip()):
        return float(value)  # YAML 1.1 reads `4e-4` (no dot) as a string; users write it that way
    if t is Path and isinstance(value, str):
        return Path(value)
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if t is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if t in (int, float, str, bool) and not isinstance(value, t):
        raise ConfigError(cfg, name, value, f"expected {t.__name__}")
    return value
