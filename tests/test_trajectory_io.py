"""``effirag.data.io.read_trajectories``: the one reader of trajectory JSONL files (evaluation runs, IP-DPO rounds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effirag.data.io import read_trajectories, write_jsonl
from effirag.errors import DataError
from effirag.types import Trajectory


def _traj(qid: str) -> Trajectory:
    return Trajectory(question_id=qid, question=f"who is {qid}?", protocol="tearag", prediction="x", format_ok=True)


def test_reads_back_what_was_written_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_jsonl(path, [_traj("b").to_dict(), _traj("a").to_dict()])
    got = read_trajectories(path)
    assert [t.question_id for t in got] == ["b", "a"]
    assert got[0] == _traj("b")


def test_a_record_that_is_not_a_trajectory_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_traj("a").to_dict()) + "\n" + json.dumps({"question": "q"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="not a trajectory record") as e:
        read_trajectories(path)
    assert str(path) in str(e.value) and "line 2" in str(e.value)


def test_invalid_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_traj("a").to_dict()) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(DataError, match="invalid JSON") as e:
        read_trajectories(path)
    assert str(path) in str(e.value) and "line 2" in str(e.value)
