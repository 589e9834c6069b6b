"""HippoRAG OpenIE json (``{"docs": [{passage, extracted_entities, extracted_triples}]}``) → :class:`Triplet`s.

Rules (documented in the README and reported by ``effirag data stats``):
- a triple that is not exactly three strings is *malformed*; HippoRAG drops these, and so do we, counting them;
- a triplet is a *duplicate* when (source passage, head, relation, tail) repeats exactly (after stripping
  whitespace); duplicates are dropped and counted.
On the real MuSiQue file: 17,419 raw triples → 185 malformed, 30 duplicates → 17,204 triplets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from effirag.data.corpus import Corpus, passage_id
from effirag.data.io import field as get_field
from effirag.data.io import read_json, write_json
from effirag.errors import DataError
from effirag.types import Passage, Triplet


@dataclass
class OpenIEResult:
    triplets: list[Triplet]
    entities: dict[str, list[str]]  # passage id → extracted entities
    raw: int = 0
    malformed: int = 0
    duplicates: int = 0
    skipped: list[str] = field(default_factory=list)


def load_openie(path: str | Path, corpus: Corpus | None = None, *, skip_invalid: bool = False) -> OpenIEResult:
    """Read HippoRAG OpenIE output, linking each triplet to its source passage (by HippoRAG key in ``corpus``)."""
    p = Path(path)
    data = read_json(p)
    docs = get_field(data, "docs", list, path=p, where="root")
    out = OpenIEResult([], {})
    seen: set[tuple[str, str, str, str]] = set()
    for i, doc in enumerate(docs):
        where = f"docs[{i}]"
        try:
            pid = _source_id(doc, p, where, corpus)
            triples = get_field(doc, "extracted_triples", list, path=p, where=where)
            ents = doc.get("extracted_entities", [])
        except DataError as e:
            if not skip_invalid:
                raise
            out.skipped.append(str(e))
            continue
        out.entities[pid] = [str(e) for e in ents] if isinstance(ents, list) else []
        for t in triples:
            out.raw += 1
            if not (isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) and x.strip() for x in t)):
                out.malformed += 1
                continue
            h, r, tl = (x.strip() for x in t)
            key = (pid, h, r, tl)
            if key in seen:
                out.duplicates += 1
                continue
            seen.add(key)
            out.triplets.append(Triplet(h, r, tl, pid))
    return out


def _source_id(doc: object, p: Path, where: str, corpus: Corpus | None) -> str:
    passage = doc.get("passage") if isinstance(doc, dict) else None
    if isinstance(passage, str) and "\n" in passage:
        title, _, text = passage.partition("\n")
    else:
        title = get_field(doc, "title", str, path=p, where=where)
        text = get_field(doc, "text", str, path=p, where=where)
    if corpus is None:
        return passage_id(title, text)
    pid = corpus.id_for(title, text)
    if pid is None:
        raise DataError("passage not found in the corpus", path=p, record=where, field="passage", value=title)
    return pid


def write_openie(
    path: str | Path,
    passages: Sequence[Passage],
    triplets: Sequence[Triplet],
    entities: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Write HippoRAG's OpenIE layout. A passage's ``extracted_entities`` are ``entities[passage id]`` when given (an
    NER step's output), else the heads and tails of its triplets."""
    by_source: dict[str | None, list[Triplet]] = {}
    for t in triplets:
        by_source.setdefault(t.source_id, []).append(t)
    docs = []
    for ps in passages:
        ts = by_source.get(ps.id, [])
        ents = list(entities[ps.id]) if entities is not None else sorted({x for t in ts for x in (t.head, t.tail)})
        docs.append(
            {
                "idx": ps.id,
                "title": ps.title,
                "text": ps.text,
                "passage": ps.key,
                "extracted_entities": ents,
                "extracted_triples": [[t.head, t.relation, t.tail] for t in ts],
            }
        )
    write_json(path, {"docs": docs})
