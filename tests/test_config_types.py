"""Typed configs (YAML + overrides + validation) and core type round-trips."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from effirag.config import check, describe, load_config, merge, merge_written, option, parse_overrides
from effirag.errors import ConfigError
from effirag.llm.base import GenerationConfig
from effirag.types import Action, ItemKind, QAExample, RetrievedItem, Step, Trajectory


@dataclass(frozen=True)
class _Inner:
    k: int = option(5, help="items kept")

    def __post_init__(self) -> None:
        check(self.k > 0, self, "k", "must be > 0")


@dataclass(frozen=True)
class _Outer:
    name: str = option("demo", help="run name")
    alpha: float = option(0.5, help="damping")
    tags: tuple[str, ...] = option(factory=tuple, help="labels")
    inner: _Inner = option(factory=_Inner, help="nested")


def test_yaml_and_overrides(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("name: x\nalpha: 1\ninner:\n  k: 3\n", encoding="utf-8")
    cfg = load_config(_Outer, f, ["inner.k=7", "tags=[a, b]"])
    assert cfg == _Outer(name="x", alpha=1.0, tags=("a", "b"), inner=_Inner(k=7))
    assert isinstance(cfg.alpha, float)


def test_extends_merges_over_the_base_file(tmp_path: Path) -> None:
    """base.yaml: name b, alpha 2, inner.k 3, tags [x]; stage.yaml extends it and sets alpha 1 and inner.k 4, so the
    result is name b (inherited), alpha 1.0, tags (x,), k 4 — and an override still wins over both (k 9). A chain
    that comes back to a file, a missing base and a non-path value are refused with the file named."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (tmp_path / "base.yaml").write_text("name: b\nalpha: 2\ntags: [x]\ninner:\n  k: 3\n", encoding="utf-8")
    (sub / "stage.yaml").write_text("extends: ../base.yaml\nalpha: 1\ninner:\n  k: 4\n", encoding="utf-8")
    assert load_config(_Outer, sub / "stage.yaml") == _Outer(name="b", alpha=1.0, tags=("x",), inner=_Inner(k=4))
    assert load_config(_Outer, sub / "stage.yaml", ["inner.k=9"]).inner.k == 9
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n", encoding="utf-8")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nalpha: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="comes back to"):
        load_config(_Outer, tmp_path / "a.yaml")
    (tmp_path / "c.yaml").write_text("extends: nowhere.yaml\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"nowhere\.yaml.*config file not found"):
        load_config(_Outer, tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("extends: [a.yaml]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"extends.*d\.yaml: must be the path"):
        load_config(_Outer, tmp_path / "d.yaml")


@dataclass(frozen=True)
class _Rates:
    rates: dict[str, float] = option(factory=dict, help="per-protocol rates")
    inner: _Inner = option(factory=_Inner, help="nested")


def test_an_empty_mapping_replaces_the_base_one(tmp_path: Path) -> None:
    """rates: {a: 0.8, b: 0.8} in the file; ``rates={}`` empties it (merged key by key, an empty mapping would leave
    it as it was), ``rates.a=0.5`` still changes one key, and a file extending another clears it the same way."""
    f = tmp_path / "r.yaml"
    f.write_text("rates: {a: 0.8, b: 0.8}\ninner:\n  k: 3\n", encoding="utf-8")
    assert load_config(_Rates, f, ["rates={}"]).rates == {}
    assert load_config(_Rates, f, ["rates.a=0.5"]).rates == {"a": 0.5, "b": 0.8}
    assert load_config(_Rates, f, ["inner={}"]).inner == _Inner(k=5)
    (tmp_path / "s.yaml").write_text("extends: r.yaml\nrates: {}\n", encoding="utf-8")
    assert load_config(_Rates, tmp_path / "s.yaml") == _Rates(rates={}, inner=_Inner(k=3))


def test_merge_keeps_the_base_under_an_empty_mapping_and_merge_written_empties_it() -> None:
    """Base {env: {k: 3, m: {x: 1}}}. Over {env: {}}: ``merge`` keeps env as it was (a program's empty settings
    block), ``merge_written`` empties it. Over {env: {m: {y: 2}}}: both merge key by key, giving
    {k: 3, m: {x: 1, y: 2}}."""
    base = {"env": {"k": 3, "m": {"x": 1}}}
    assert merge(base, {"env": {}}) == base
    assert merge_written(base, {"env": {}}) == {"env": {}}
    both = {"env": {"k": 3, "m": {"x": 1, "y": 2}}}
    assert merge(base, {"env": {"m": {"y": 2}}}) == both
    assert merge_written(base, {"env": {"m": {"y": 2}}}) == both
    assert base == {"env": {"k": 3, "m": {"x": 1}}}  # neither changes its inputs


def test_float_fields_take_exponent_notation_without_a_dot(tmp_path: Path) -> None:
    """YAML 1.1 (PyYAML) reads `4e-4` as a string; a float field takes it, and still refuses a word."""
    f = tmp_path / "c.yaml"
    f.write_text("alpha: 4e-4\n", encoding="utf-8")
    assert load_config(_Outer, f).alpha == 4e-4
    assert load_config(_Outer, None, ["alpha=-2E3"]).alpha == -2000.0
    assert load_config(_Outer, None, ["alpha=.5e1"]).alpha == 5.0
    with pytest.raises(ConfigError, match=r"_Outer\.alpha='4e'"):
        load_config(_Outer, None, ["alpha=4e"])


def test_validation_names_field_and_value() -> None:
    with pytest.raises(ConfigError, match=r"_Inner\.k=0: must be > 0"):
        load_config(_Outer, None, ["inner.k=0"])
    with pytest.raises(ConfigError, match="unknown field"):
        load_config(_Outer, None, ["nope=1"])
    with pytest.raises(ConfigError, match=r"_Outer\.alpha='high'"):
        load_config(_Outer, None, ["alpha=high"])
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_overrides(["alpha"])
    with pytest.raises(ConfigError, match="temperature"):
        GenerationConfig(temperature=-1.0)


def test_describe_lists_help() -> None:
    rows = {name: (default, help_) for name, _, default, help_ in describe(_Outer)}
    assert rows["inner.k"] == (5, "items kept")
    assert rows["alpha"] == (0.5, "damping")


def test_trajectory_round_trip() -> None:
    item = RetrievedItem(ItemKind.TRIPLET, "t1", "(A, born in, B)", 0.9, tokens=7)
    traj = Trajectory("q1", "Where?", "searchr1", prediction="B", format_ok=True)
    traj.steps.append(
        Step(
            Action.SEARCH,
            text="<search>A</search>",
            query="A",
            items=[item],
            generated_tokens=5,
            inserted_tokens=7,
            retrieval_s=0.01,
        )
    )
    traj.steps.append(Step(Action.ANSWER, text="<answer>B</answer>", generated_tokens=4))
    back = Trajectory.from_dict(traj.to_dict())
    assert back.to_dict() == traj.to_dict()
    assert back.totals()["searches"] == 1 and back.generated_tokens == 9 and back.inserted_tokens == 7


def test_qaexample_requires_answers() -> None:
    with pytest.raises(ValueError, match="answers"):
        QAExample("x", "q", ())
