"""Reusing another IP-DPO run's sampled paths (``IPDPORunConfig.reuse_paths``).

Sampling is most of an IP-DPO round's time (round 1 of the demo's long-winded recipes: about 30 of 35 minutes), and
variants of a recipe that change only the pairing or the DPO step (learning rate, η, pair rule) sample round 1 from
the same start with the same settings. So every round saves its paths with their token ledgers
(``round-P/trajectories.jsonl``, the ids DPO trains on) beside a record of what decided them (``round-P/sampling.json``:
a digest of the sampling policy's weights, a digest of the questions, the environment and the round's engine
settings). A later run reuses round P of another when the two records are equal; any difference (another start,
seed, temperature, question set, index) names itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from effirag.config import to_dict
from effirag.data.io import read_trajectories, write_jsonl
from effirag.errors import DataError
from effirag.train.dpo.config import IPDPORunConfig
from effirag.types import QAExample, Trajectory

SAMPLING = "sampling.json"
PATHS = "trajectories.jsonl"


def weights_digest(model_dir: Path) -> str:
    """sha256 over the folder's ``*.safetensors`` files (names and bytes, in name order): the policy that sampled."""
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise DataError("no *.safetensors weights to fingerprint the sampling policy by", path=model_dir)
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
    return h.hexdigest()


def questions_digest(questions: Sequence[QAExample]) -> str:
    """sha256 of the questions in order (id, text, gold answers)."""
    rows = [[q.id, q.question, list(q.answers)] for q in questions]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()


def sampling_record(cfg: IPDPORunConfig, r: int, model_dir: Path, questions: Sequence[QAExample]) -> dict[str, Any]:
    """What decides round r's paths: the sampling policy (weights digest), the questions, the environment (the
    config's ``env`` less the model and question paths, which the digests stand for) and the round's engine settings."""
    env = {k: v for k, v in to_dict(cfg.env).items() if k not in ("model", "questions", "engine")}
    return {
        "policy": weights_digest(model_dir),
        "questions": questions_digest(questions),
        "env": env,
        "engine": to_dict(cfg.round_engine(r)),
    }


def save_paths(folder: Path, record: dict[str, Any], trajectories: Sequence[Trajectory]) -> None:
    """The round's sampled paths (with token ledgers) and their sampling record into ``folder``."""
    write_jsonl(folder / PATHS, (t.to_dict() for t in trajectories))
    (folder / SAMPLING).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _differences(a: Any, b: Any, key: str = "") -> list[str]:
    """Dotted keys where two JSON values differ (a key missing on one side counts)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _differences(a.get(k), b.get(k), f"{key}.{k}".strip("."))]
    return [] if a == b else [key or "(record)"]


def mismatch(folder: Path, record: dict[str, Any]) -> str:
    """Why ``folder``'s saved paths cannot stand for a round sampled under ``record`` ('' when they can)."""
    if not (folder / SAMPLING).is_file() or not (folder / PATHS).is_file():
        return f"{folder} holds no saved paths ({SAMPLING} and {PATHS})"
    try:
        saved = json.loads((folder / SAMPLING).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON ({e.msg})", path=folder / SAMPLING) from e
    diff = _differences(saved, record)
    return f"{folder}: its sampling differs in {', '.join(diff)}" if diff else ""


def load_paths(folder: Path) -> list[Trajectory]:
    """The paths :func:`save_paths` wrote, in sampling order."""
    return read_trajectories(folder / PATHS)
