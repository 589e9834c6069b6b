"""benchmarks/device/llama_union.py: the union of two runs' shard folders, overlaps compared without timings."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "device" / "llama_union.py"


def _module():
    spec = importlib.util.spec_from_file_location("llama_union", SCRIPT)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _traj(qid: str, pred: str, secs: float) -> dict:
    return {"question_id": qid, "prediction": pred, "steps": [{"text": pred, "generation_s": secs}]}


def _run(root: Path, trajs: list[dict], elapsed: float, engine_k: int = 2) -> Path:
    d = root / "popqa" / "zeroshot" / "shard-0-of-1"
    d.mkdir(parents=True)
    info = {"questions": 4, "prompt_tokens": {q: 10 for q in ("q1", "q2", "q3", "q4")}, "done": len(trajs),
            "elapsed_s": elapsed}  # fmt: skip
    (d / "shard.json").write_text(json.dumps(info))
    (d / "run.json").write_text(json.dumps({"backend": f"openai:{root.name}", "engine.k": engine_k}))
    (d / "trajectories.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trajs))
    return root


def test_union_counts_overlaps_and_differences(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", [_traj("q1", "x", 1.0), _traj("q2", "y", 1.0), _traj("q3", "z", 1.0)], 6.0)
    b = _run(tmp_path / "b", [_traj("q3", "z", 9.0), _traj("q2", "other", 1.0), _traj("q4", "w", 1.0)], 3.0)
    (row,) = _module().union([a, b], tmp_path / "u")
    assert row["union"] == 4 and row["overlap"] == 2 and row["differ"] == ["q2"]  # q3 differs in timing only
    assert [r["device_s_per_q"] for r in row["per_run"]] == [2.0, 1.0]
    out = tmp_path / "u" / "popqa" / "zeroshot" / "shard-0-of-1"
    lines = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    assert [t["question_id"] for t in lines] == ["q1", "q2", "q3", "q4"]  # the shard's question order
    assert lines[1]["prediction"] == "y"  # the first run wins
    assert json.loads((out / "shard.json").read_text())["done"] == 4
    assert not (out / "run.json").exists()


def test_union_refuses_different_engine_settings(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", [_traj("q1", "x", 1.0)], 1.0)
    b = _run(tmp_path / "b", [_traj("q2", "x", 1.0)], 1.0, engine_k=3)
    with pytest.raises(SystemExit, match="engine settings differ"):
        _module().union([a, b], tmp_path / "u")
