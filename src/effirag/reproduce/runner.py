"""Run a plan's stages as ``effirag`` subprocesses, reusing finished ones.

A stage is finished when ``OUT/stages/<key>/done.json`` exists and records the same command: it is written last,
atomically (a temporary file renamed over it), after the command exited 0, so a run killed at any moment (kill -9
included) leaves either a finished stage or none. An unfinished stage runs again from scratch (its ``fresh`` folder
emptied first; an ``eval qa`` run folder is kept, as ``eval qa`` resumes it to the same result). Each stage's stdout
and stderr go to ``OUT/stages/<key>/stdout.txt`` and ``log.txt``; a failing stage stops the run, naming its log.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from effirag.errors import EffiRAGError
from effirag.reproduce.plan import Stage

log = logging.getLogger(__name__)
DONE = "done.json"


class StageError(EffiRAGError):
    """A stage's command failed."""


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so that a reader sees the old file or the whole new one, never a part."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=1, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def finished(folder: Path, argv: Sequence[str]) -> dict[str, Any] | None:
    """The done record of a stage run with ``argv`` in ``folder``, or None when it has not finished."""
    path = folder / DONE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise StageError(f"{path}: invalid JSON ({e.msg}); delete it to rerun the stage") from e
    if record.get("argv") != list(argv):
        log.info("%s: finished with another command; running it again", folder.name)
        return None
    return dict(record)


def _result(stdout: str) -> Any:
    """The JSON object a ``--json`` command printed last (None when it printed none)."""
    start = stdout.find("{")
    if start < 0:
        return None
    try:
        return json.loads(stdout[start:])
    except json.JSONDecodeError:
        return None


def stage_env(threads: int) -> dict[str, str]:
    """The environment of a stage's subprocess: this one's, with ``threads`` torch/OpenMP threads (0: unchanged)."""
    env = dict(os.environ)
    if threads > 0:
        env.update({k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
    return env


def run_stage(stage: Stage, out: Path, effirag: Sequence[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``stage`` unless finished, in ``env`` (None: this process's); return its done record ({argv, seconds,
    result})."""
    folder = out / "stages" / stage.key
    record = finished(folder, stage.argv)
    if record is not None:
        record["reused"] = True
        return record
    if stage.fresh and Path(stage.fresh).exists():
        shutil.rmtree(stage.fresh)
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with (folder / "stdout.txt").open("w", encoding="utf-8") as so, (folder / "log.txt").open("w") as se:
        cmd = [stage.python or effirag[0], *effirag[1:], *stage.argv]  # effirag: [python, ...]
        rc = subprocess.run(cmd, stdout=so, stderr=se, env=env, check=False).returncode
    if rc != 0:
        tail = (folder / "log.txt").read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        raise StageError(f"stage {stage.key} failed (exit {rc}); log: {folder / 'log.txt'}\n" + "\n".join(tail))
    stdout = (folder / "stdout.txt").read_text(encoding="utf-8")
    record = {"argv": list(stage.argv), "seconds": round(time.perf_counter() - t0, 1), "result": _result(stdout)}
    write_json_atomic(folder / DONE, record)
    return {**record, "reused": False}


def run_stages(
    stages: Sequence[Stage],
    out: Path,
    effirag: Sequence[str],
    on_stage: Callable[[int, Stage, dict[str, Any] | None], None] | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every stage in order, in ``env``; ``on_stage(i, stage, None)`` before and ``(i, stage, record)`` after
    each."""
    records: dict[str, dict[str, Any]] = {}
    for i, stage in enumerate(stages):
        if on_stage is not None:
            on_stage(i, stage, None)
        records[stage.key] = run_stage(stage, out, effirag, env)
        if on_stage is not None:
            on_stage(i, stage, records[stage.key])
    return records
