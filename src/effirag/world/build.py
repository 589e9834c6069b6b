"""Write a whole world to an output folder (fixed file names), streaming the corpus.

Files::

    corpus.jsonl                 {"id","title","text","contents"}                 (FlashRAG / Search-R1)
    triplets.jsonl               {"head","relation","tail","source"}
    openie.json                  HippoRAG OpenIE layout (same triplets, per passage)
    questions_{train,dev,test}.jsonl   FlashRAG questions; metadata adds "facts", "templates", "chain"/"comparison"
    hipporag_questions_{split}.json    HippoRAG / MuSiQue layout of the same questions
    knowledge.jsonl              one record per known fact (see effirag.world.knowledge)
    world.json                   format, seed, config, counts, entities, facts, known

Memory: the entity tables and the questions; passages and triplets are written as they are rendered (openie.json and
world.json are written incrementally too), so memory does not grow with the corpus beyond the tables.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from effirag.data.writers import example_to_flashrag, write_hipporag_questions
from effirag.types import Passage
from effirag.world.config import WorldConfig, config_dict
from effirag.world.generate import Tables, build_tables
from effirag.world.knowledge import knowledge_record
from effirag.world.plan import SPLITS, make_plan
from effirag.world.questions import QuestionMaker, WorldQuestion
from effirag.world.render import Renderer

log = logging.getLogger(__name__)
FORMAT = "effirag-world/1"
_dumps = json.JSONEncoder(ensure_ascii=False).encode
# The hot records are assembled from C-escaped strings: byte-identical to json.dumps(..., ensure_ascii=False) (tested)
# and about 3x faster, which matters at a million passages.
_q = encode_basestring


def triplet_line(h: str, r: str, t: str, pid: str) -> str:
    """``{"head", "relation", "tail", "source"}`` as one JSON line (without newline)."""
    return f'{{"head": {_q(h)}, "relation": {_q(r)}, "tail": {_q(t)}, "source": {_q(pid)}}}'


def corpus_line(pid: str, title: str, text: str, escaped_text: str | None = None) -> str:
    """:func:`effirag.data.writers.passage_to_flashrag` of the passage, as one JSON line (without newline).

    JSON string escaping is concatenative, so ``contents`` reuses the escaped text instead of escaping it again.
    """
    qt = escaped_text or _q(text)
    contents = _q(f'"{title}"')[:-1] + "\\n" + qt[1:]
    return f'{{"id": {_q(pid)}, "title": {_q(title)}, "text": {qt}, "contents": {contents}}}'


def openie_line(pid: str, title: str, text: str, triples: list[tuple[str, str, str]], escaped_text: str) -> str:
    """One ``docs`` entry of HippoRAG's OpenIE layout (as :func:`effirag.data.openie.write_openie` writes it)."""
    ents = ", ".join(_q(x) for x in sorted({x for h, _, t in triples for x in (h, t)}))
    trs = ", ".join(f"[{_q(h)}, {_q(r)}, {_q(t)}]" for h, r, t in triples)
    qtitle = _q(title)
    passage = qtitle[:-1] + "\\n" + escaped_text[1:]
    return (
        f'{{"idx": {_q(pid)}, "title": {qtitle}, "text": {escaped_text}, "passage": {passage}, '
        f'"extracted_entities": [{ents}], "extracted_triples": [{trs}]}}'
    )


def generate_world(cfg: WorldConfig, out: str | Path, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Generate the world of ``cfg`` into ``out``; returns a summary (counts and seconds per stage).

    The config is checked (including chain availability) before any file is written. ``progress`` is called with
    the number of passages written so far, every 10,000 passages and at the end.
    """
    plan = make_plan(cfg)  # raises ConfigError naming the field before anything is generated
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    tb = build_tables(cfg, plan)
    times["entities_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    questions = QuestionMaker(tb, cfg.seed).make(plan.targets)
    times["questions_s"] = time.perf_counter() - t0
    needed = {pid for qs in questions.values() for q in qs for pid in q.example.supporting_ids}
    t0 = time.perf_counter()
    kept, n_triplets = _write_corpus(tb, cfg, out, needed, progress)
    times["corpus_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for split in SPLITS:
        _write_questions(out, split, questions[split], kept)
    n_facts, n_known = _write_knowledge(tb, cfg, out)
    times["facts_s"] = time.perf_counter() - t0
    summary = {
        "out": str(out),
        "seed": cfg.seed,
        "passages": cfg.passages,
        "entities": len(tb.ents),
        "facts": n_facts,
        "known_facts": n_known,
        "triplets": n_triplets,
        "questions": {s: len(questions[s]) for s in SPLITS},
        **{k: round(v, 3) for k, v in times.items()},
    }
    log.info("world written to %s: %s", out, summary)
    return summary


def _write_corpus(
    tb: Tables, cfg: WorldConfig, out: Path, needed: set[str], progress: Callable[[int], None] | None
) -> tuple[dict[str, Passage], int]:
    """Stream corpus.jsonl, triplets.jsonl and openie.json; keep only the passages questions cite."""
    renderer = Renderer(tb, cfg)
    kept: dict[str, Passage] = {}
    n_passages = n_triplets = 0
    with (
        (out / "corpus.jsonl").open("w", encoding="utf-8") as fc,
        (out / "triplets.jsonl").open("w", encoding="utf-8") as ft,
        (out / "openie.json").open("w", encoding="utf-8") as fo,
    ):
        fo.write('{"docs": [\n')
        for ent in tb.ents:
            passages, triplets = renderer.render(ent)
            by_pid: dict[str, list[tuple[str, str, str]]] = {}
            tlines = []
            for h, r, t, pid in triplets:
                tlines.append(triplet_line(h, r, t, pid))
                by_pid.setdefault(pid, []).append((h, r, t))
            if tlines:
                ft.write("\n".join(tlines) + "\n")
            n_triplets += len(tlines)
            clines, olines = [], []
            for pid, title, text in passages:
                qt = _q(text)
                clines.append(corpus_line(pid, title, text, qt))
                olines.append(openie_line(pid, title, text, by_pid.get(pid, []), qt))
                if pid in needed:
                    kept[pid] = Passage(pid, title, text)
            fc.write("\n".join(clines) + "\n")
            fo.write(("" if n_passages == 0 else ",\n") + ",\n".join(olines))
            before = n_passages
            n_passages += len(passages)
            if progress is not None and n_passages // 10000 != before // 10000:
                progress(n_passages)
        fo.write("\n]}\n")
    if progress is not None:
        progress(n_passages)
    return kept, n_triplets


def _write_questions(out: Path, split: str, questions: list[WorldQuestion], passages: dict[str, Passage]) -> None:
    with (out / f"questions_{split}.jsonl").open("w", encoding="utf-8") as f:
        for q in questions:
            rec = example_to_flashrag(q.example)
            rec["metadata"].update(q.extra)
            f.write(_dumps(rec) + "\n")
    write_hipporag_questions(out / f"hipporag_questions_{split}.json", [q.example for q in questions], passages)


def _write_knowledge(tb: Tables, cfg: WorldConfig, out: Path) -> tuple[int, int]:
    """knowledge.jsonl and world.json, both streamed; returns (facts, known facts)."""
    n_facts = n_known = 0
    with (
        (out / "knowledge.jsonl").open("w", encoding="utf-8") as fk,
        (out / "world.json").open("w", encoding="utf-8") as fw,
    ):
        head = {"format": FORMAT, "seed": cfg.seed, "config": config_dict(cfg), "counts": tb.plan.counts}
        fw.write(_dumps(head)[:-1] + ',\n"entities": [\n')
        fw.write(
            ",\n".join(
                _dumps({"id": e.id, "type": e.type, "name": e.name, "display": e.display, "passages": list(e.pids)})
                for e in tb.ents
            )
        )
        fw.write('\n],\n"facts": [\n')
        known_ids: list[str] = []
        first = True
        rnd, share = random.Random(f"{cfg.seed}/known").random, cfg.known_share
        for e in tb.ents:
            lines = []
            for rel in tb.facts(e):
                fid = f"{e.id}.{rel}"
                v = e.rel[rel]
                known = rnd() < share
                obj, obj_id = (tb.ents[v].display, _q(f"e{v}")) if isinstance(v, int) else (v, "null")
                pids = ", ".join(_q(x) for x in tb.fact_passages(e, rel))
                lines.append(
                    f'{{"id": {_q(fid)}, "subject": {_q(e.id)}, "relation": {_q(rel)}, "object": {_q(obj)}, '
                    f'"object_id": {obj_id}, "passages": [{pids}], "known": {"true" if known else "false"}}}'
                )
                n_facts += 1
                if known:
                    n_known += 1
                    known_ids.append(fid)
                    fk.write(_dumps(knowledge_record(tb, e, rel)) + "\n")
            if lines:
                fw.write(("" if first else ",\n") + ",\n".join(lines))
                first = False
        fw.write('\n],\n"known": ' + _dumps(known_ids) + "\n}\n")
    return n_facts, n_known
