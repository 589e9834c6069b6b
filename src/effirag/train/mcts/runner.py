"""``effirag data mcts``: a ReasonRAG tree per question, its step-level pairs and statistics, resumable.

The output folder holds:

- ``pairs.jsonl`` — one step-level preference pair per line, RAG-ProGuide's shape (the input of
  ``effirag train dpo --data``): ``prompt`` (the trajectory prefix as the policy saw it: the stage prompt over the
  question and the steps so far), ``chosen`` / ``rejected`` (the next-step texts of two sibling nodes, the higher- and
  the lower-valued), ``chosen_value`` / ``rejected_value`` (their SPRE values), ``stage`` (``reasoning`` or
  ``grounding``), ``question_id``; and, for the viewer, ``chosen_action`` / ``rejected_action``, ``depth`` and the
  node ids ``node``, ``chosen_node``, ``rejected_node``.
- ``trees.jsonl`` — one record per finished question: ``question_id``, ``iterations``, ``generated_tokens``,
  ``pairs``, ``left_out_pairs`` (pairs left out by ``search.distinct_content`` and ``search.same_action``),
  ``seconds`` and the tree statistics of :func:`~effirag.train.mcts.tree.tree_stats`.
- ``trees/<question id>.json`` — the whole tree (``dump_trees``): question, gold answers and the node records of
  :func:`~effirag.train.mcts.tree.dump_tree`.
- ``config.json`` — the run's configuration.

Resumability: a question counts as done once its line is in ``trees.jsonl``, written last (after its tree file and
its pairs; each append is one write, flushed and synced). A rerun skips the done questions; pairs of a question cut
off before its ``trees.jsonl`` line (a process killed mid-question) and a line torn by the kill are dropped first, so
no question's pairs appear twice.
"""

from __future__ import annotations

import json
import os
import re
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effirag.config import to_dict
from effirag.errors import DataError
from effirag.train.mcts.config import MCTSConfig, MCTSRunConfig
from effirag.train.mcts.pairs import keep_pairs, tree_pairs
from effirag.train.mcts.search import EnginePolicy, search_tree
from effirag.train.mcts.tree import dump_tree, tree_stats
from effirag.types import QAExample

PAIRS_FILE = "pairs.jsonl"
TREES_FILE = "trees.jsonl"
TREE_DIR = "trees"


@dataclass
class MCTSSummary:
    """What a run did: questions searched now and skipped as already done, pairs written now, seconds."""

    output_dir: Path
    searched: int
    skipped: int
    pairs: int
    seconds: float
    records: list[dict[str, Any]]


def tree_file(out: Path, question_id: str) -> Path:
    """``trees/<id>.json``; an id with characters unsafe in a file name is cleaned and gets its hash appended."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", question_id)
    if safe != question_id or safe in ("", ".", ".."):
        safe = f"{safe}-{zlib.crc32(question_id.encode('utf-8')):08x}"
    return out / TREE_DIR / f"{safe}.json"


def _read_lines(path: Path) -> list[dict[str, Any]]:
    """The records of a JSONL file; a last line without its newline (torn by a kill) is left out, any other bad line
    fails naming the file and line."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] != "":
        lines = lines[:-1]  # torn tail: the write that was cut off
    records = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise DataError(f"invalid JSON: {e.msg}", path=path, record=f"line {n}") from e
    return records


def _rewrite(path: Path, records: list[dict[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    os.replace(tmp, path)


def _append(path: Path, records: list[dict[str, Any]]) -> None:
    """Append ``records`` in one write, flushed and synced to disk."""
    if not records:
        return
    with path.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        f.flush()
        os.fsync(f.fileno())


def recover(out: Path) -> set[str]:
    """The ids of the questions finished in ``out``; removes what a killed run left of an unfinished one (see the
    module docstring)."""
    trees = _read_lines(out / TREES_FILE)
    done = {str(r["question_id"]) for r in trees}
    if (out / TREES_FILE).is_file():
        _rewrite(out / TREES_FILE, trees)
    pairs_path = out / PAIRS_FILE
    if pairs_path.is_file():
        _rewrite(pairs_path, [p for p in _read_lines(pairs_path) if str(p["question_id"]) in done])
    return done


def _write_tree(out: Path, example: QAExample, nodes: Any, alpha: float) -> None:
    path = tree_file(out, example.id)
    doc = {"question_id": example.id, "question": example.question, "answers": list(example.answers)}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({**doc, "alpha": alpha, "nodes": dump_tree(nodes, alpha)}, ensure_ascii=False))
    os.replace(tmp, path)


def mine_trees(
    examples: Sequence[QAExample],
    policy: EnginePolicy,
    search: MCTSConfig,
    out: Path,
    *,
    dump_trees: bool = True,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> MCTSSummary:
    """Search a tree per question not yet done in ``out``; write its pairs, statistics and (``dump_trees``) tree.
    ``on_progress(done, total, pairs)`` is called after each question (and once at the start)."""
    ids = [e.id for e in examples]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataError(f"question id {dup!r} occurs more than once; every tree is keyed by its question id")
    out.mkdir(parents=True, exist_ok=True)
    (out / TREE_DIR).mkdir(exist_ok=True)
    done = recover(out)
    (out / PAIRS_FILE).touch()
    todo = [e for e in examples if e.id not in done]
    t0 = time.perf_counter()
    records: list[dict[str, Any]] = []
    n_pairs = 0
    if on_progress is not None:
        on_progress(len(examples) - len(todo), len(examples), 0)
    for i, ex in enumerate(todo):
        q0 = time.perf_counter()
        res = search_tree(ex, policy, search)
        pairs, left_out = keep_pairs(
            tree_pairs(res.nodes, ex.id, search.alpha, search.min_gap), search, policy.protocol
        )
        if dump_trees:
            _write_tree(out, ex, res.nodes, search.alpha)
        rec = {
            "question_id": ex.id,
            "iterations": res.iterations,
            "generated_tokens": res.generated_tokens,
            "pairs": len(pairs),
            "left_out_pairs": left_out,
            "seconds": round(time.perf_counter() - q0, 3),
            **tree_stats(res.nodes, search.alpha),
        }
        _append(out / PAIRS_FILE, pairs)
        _append(out / TREES_FILE, [rec])  # last: the question counts as done from here on
        records.append(rec)
        n_pairs += len(pairs)
        if on_progress is not None:
            on_progress(len(examples) - len(todo) + i + 1, len(examples), n_pairs)
    return MCTSSummary(out, len(todo), len(examples) - len(todo), n_pairs, time.perf_counter() - t0, records)


def open_run(cfg: MCTSRunConfig) -> tuple[list[QAExample], EnginePolicy, Path]:
    """The questions, the policy (generator, retriever, protocol, engine budgets) and the output folder of ``cfg``;
    the folder gets the run's ``config.json``."""
    from effirag.env import build_env

    env = build_env(cfg.env, owner="MCTSRunConfig")
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(to_dict(cfg), indent=1), encoding="utf-8")
    return env.questions, EnginePolicy(env.policy, env.retriever, env.protocol, cfg.env.engine), out


def run_mcts(cfg: MCTSRunConfig, *, on_progress: Callable[[int, int, int], None] | None = None) -> MCTSSummary:
    """Load the policy, the index and the questions of ``cfg`` and mine their trees into ``cfg.output_dir``."""
    examples, policy, out = open_run(cfg)
    return mine_trees(examples, policy, cfg.search, out, dump_trees=cfg.dump_trees, on_progress=on_progress)
