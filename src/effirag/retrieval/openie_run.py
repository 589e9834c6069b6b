"""Resumable LLM OpenIE over a corpus: :class:`~effirag.retrieval.openie_llm.LLMOpenIE` in batches of passages, each
finished batch appended to a JSONL progress file, then the whole extraction written in HippoRAG's OpenIE layout.

An interrupted run (killed, crashed, out of time) keeps every batch that finished; the next run with the same output
path reads the progress file and extracts only the passages it lacks. A line torn by the interruption (the last line,
without its newline) is dropped and its passages are extracted again. Each progress record names the backend and the
prompt pair that made it; resuming with another backend or prompt is refused, because one file mixing two extractors
would make the graph depend on where a run was interrupted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effirag.config import check, option
from effirag.data.openie import write_openie
from effirag.errors import DataError
from effirag.llm.base import GenerationConfig, Generator
from effirag.retrieval.openie_llm import LLMOpenIE, PassageExtraction
from effirag.retrieval.openie_prompts import PROMPTS
from effirag.types import Passage, Triplet

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenIERunConfig:
    prompt: str = option("instruct", help="Prompt pair: instruct (instruction-tuned models) or fewshot (base models).")
    batch_size: int = option(8, help="Passages per batch (one NER and one triple generate call each); resume unit.")
    max_new_tokens: int = option(512, help="Most tokens of one reply.")

    def __post_init__(self) -> None:
        check(self.prompt in PROMPTS, self, "prompt", f"must be one of {sorted(PROMPTS)}")
        check(self.batch_size >= 1, self, "batch_size", "must be >= 1")
        check(self.max_new_tokens >= 1, self, "max_new_tokens", "must be >= 1")


@dataclass(frozen=True)
class OpenIERunSummary:
    """What a run did: passages extracted now and taken from the progress file; ``failed``: passages with a reply that
    did not parse (missing or malformed JSON; an empty list parses)."""

    path: Path
    passages: int
    extracted: int
    resumed: int
    failed: int
    triplets: int


def progress_path(out: Path) -> Path:
    """The progress file beside the OpenIE json ``out``."""
    return out.with_name(out.name + ".progress.jsonl")


def _record(res: PassageExtraction, backend: str, prompt: str) -> dict[str, Any]:
    return {
        "id": res.passage_id,
        "backend": backend,
        "prompt": prompt,
        "entities": res.entities,
        "triples": [[t.head, t.relation, t.tail] for t in res.triplets],
        "ner_status": res.ner_status.value,
        "triple_status": res.triple_status.value,
        "invalid_triples": res.invalid_triples,
        "errors": res.errors,
    }


def read_progress(path: Path, backend: str, prompt: str) -> dict[str, dict[str, Any]]:
    """Passage id → progress record; a torn last line is cut off the file. Records of another backend or prompt pair
    are refused with a :class:`DataError` naming the line."""
    if not path.is_file():
        return {}
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    if lines[-1]:  # no newline at the end: the last write was interrupted
        log.warning("%s: dropping a torn last line (%d bytes); its passages are extracted again", path, len(lines[-1]))
        with path.open("r+b") as f:
            f.truncate(len(raw) - len(lines[-1]))
    done: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(lines[:-1], start=1):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"invalid JSON: {e.msg}", path=path, record=f"line {n}") from e
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str) or not isinstance(rec.get("triples"), list):
            raise DataError("expected an object with 'id' and 'triples'", path=path, record=f"line {n}")
        for name, want in (("backend", backend), ("prompt", prompt)):
            if rec.get(name) != want:
                raise DataError(
                    f"made with {name} {rec.get(name)!r}, this run uses {want!r}: delete the file to start over, "
                    "or resume with the same backend and prompt",
                    path=path,
                    record=f"line {n}",
                    field=name,
                )
        done[rec["id"]] = rec
    return done


def run_openie(
    passages: Sequence[Passage],
    generator: Generator,
    out: str | Path,
    config: OpenIERunConfig | None = None,
    *,
    show_progress: bool = False,
) -> OpenIERunSummary:
    """Extract triples of every passage not yet in ``out``'s progress file, then write ``out`` (HippoRAG's layout,
    with the NER entities as ``extracted_entities``). ``show_progress``: a tqdm bar on stderr, counting passages."""
    from tqdm.auto import tqdm

    config = config or OpenIERunConfig()
    out = Path(out)
    prog = progress_path(out)
    prog.parent.mkdir(parents=True, exist_ok=True)
    done = read_progress(prog, generator.name, config.prompt)
    todo = [p for p in passages if p.id not in done]
    resumed = len(passages) - len(todo)
    if resumed:
        log.info("%s: %d of %d passages already extracted", prog, resumed, len(passages))
    oie = LLMOpenIE(generator, GenerationConfig(config.max_new_tokens, temperature=0.0), PROMPTS[config.prompt])
    bar = tqdm(total=len(passages), initial=resumed, desc="OpenIE (LLM)", unit="psg", disable=not show_progress)
    with bar, prog.open("a", encoding="utf-8") as f:
        for start in range(0, len(todo), config.batch_size):
            batch = todo[start : start + config.batch_size]
            lines = []
            for res in oie.extract(batch):
                rec = _record(res, generator.name, config.prompt)
                done[res.passage_id] = rec
                lines.append(json.dumps(rec, ensure_ascii=False) + "\n")
            f.write("".join(lines))  # one write per batch: an interruption tears at most its last line
            f.flush()
            bar.update(len(batch))
    triplets = [Triplet(h, r, t, p.id) for p in passages for h, r, t in done[p.id]["triples"]]
    entities = {p.id: list(done[p.id]["entities"]) for p in passages}
    write_openie(out, passages, triplets, entities)
    bad = {"missing", "malformed"}
    failed = sum(bool({done[p.id]["ner_status"], done[p.id]["triple_status"]} & bad) for p in passages)
    return OpenIERunSummary(out, len(passages), len(todo), resumed, failed, len(triplets))
