"""The knowledge graph: entities (normalised names + aliases), triplets linked to source passages, and an entity index.

An entity is identified by its *key*, :func:`normalize_entity` of its name, so "Paris", "paris" and "Paris," are one
node; the display name is the first surface form seen. The entity index answers exact/alias lookups, finds the
entities named in a text (longest match over normalised tokens) and, once :meth:`KnowledgeGraph.embed` has run,
dense nearest-entity search. Persisted as JSONL + npy with a manifest of counts and SHA-256 checksums; no pickle.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from effirag.data.corpus import Corpus
from effirag.data.io import iter_jsonl
from effirag.data.openie import load_openie
from effirag.errors import DataError, IndexMismatchError
from effirag.retrieval.base import Encoder
from effirag.types import Passage, Triplet

log = logging.getLogger(__name__)

FORMAT = "effirag-kg"
VERSION = 1
_NON_WORD = re.compile(r"[^\w\s]|_")


@functools.lru_cache(maxsize=1 << 16)  # the KAG normalises the same few names on every subquery
def normalize_entity(name: str) -> str:
    """Entity key: NFKC, lowercase, punctuation → space, whitespace collapsed ("U.S. Army" → "u s army")."""
    return " ".join(_NON_WORD.sub(" ", unicodedata.normalize("NFKC", name).lower()).split())


class KnowledgeGraph:
    """Entities, triplets and passages with adjacency. Build with :meth:`build`; persist with :meth:`save`/:meth:`load`.

    Ids: triplet ``i`` is ``kg.triplets[i]`` (item id ``"t{i}"``), entity ``j`` is ``kg.entity_names[j]``, passage
    ``i`` is ``kg.passages[i]`` (item id = its passage id).
    """

    def __init__(
        self,
        passages: Sequence[Passage],
        entity_names: Sequence[str],
        aliases: Mapping[str, int],
        triplets: Sequence[Triplet],
        head_ids: NDArray[np.int64],
        tail_ids: NDArray[np.int64],
        dropped: int = 0,
    ) -> None:
        self.passages = list(passages)
        self.entity_names = list(entity_names)
        self.aliases = dict(aliases)  # normalised name or alias → entity id
        self.triplets = list(triplets)
        self.head_ids, self.tail_ids = head_ids, tail_ids
        self.dropped = dropped  # triplets whose head or tail normalised to the empty string
        self.passage_index = {p.id: i for i, p in enumerate(self.passages)}
        n_e = len(self.entity_names)
        self.entity_triplets: list[list[int]] = [[] for _ in range(n_e)]
        self.entity_passages: list[list[int]] = [[] for _ in range(n_e)]
        self.triplet_passage = np.full(len(self.triplets), -1, dtype=np.int64)
        seen: set[tuple[int, int]] = set()
        for i, t in enumerate(self.triplets):
            h, tl = int(head_ids[i]), int(tail_ids[i])
            self.entity_triplets[h].append(i)
            if tl != h:
                self.entity_triplets[tl].append(i)
            if t.source_id is not None:
                if t.source_id not in self.passage_index:
                    raise DataError(
                        "triplet names an unknown source passage", record=i, field="source_id", value=t.source_id
                    )
                pi = self.passage_index[t.source_id]
                self.triplet_passage[i] = pi
                for e in (h, tl):
                    if (e, pi) not in seen:
                        seen.add((e, pi))
                        self.entity_passages[e].append(pi)
        self._first: dict[str, set[int]] = {}  # first token of a key → token lengths of keys starting with it
        for key in self.aliases:
            toks = key.split()
            self._first.setdefault(toks[0], set()).add(len(toks))
        self.entity_embeddings: NDArray[np.float32] | None = None  # (n_entities, dim)
        self.triplet_embeddings: NDArray[np.float32] | None = None  # (n_triplets, dim)
        self.encoder_name: str | None = None

    # ----------------------------------------------------------------------------------------------- building
    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        triplets: Iterable[Triplet],
        encoder: Encoder | None = None,
        aliases: Mapping[str, Sequence[str]] | None = None,
        show_progress: bool = False,
    ) -> KnowledgeGraph:
        """Index ``triplets`` over ``passages``; ``aliases`` maps an entity name to its other names.

        Triplets whose head or tail is empty after normalisation are dropped and counted (``kg.dropped``). With an
        ``encoder``, entity names and triplet texts are embedded too (:meth:`embed`). ``show_progress``: tqdm bars on
        stderr for linking and embedding.
        """
        from tqdm.auto import tqdm

        names: list[str] = []
        keys: dict[str, int] = {}

        def entity(name: str) -> int:
            key = normalize_entity(name)
            if key not in keys:
                keys[key] = len(names)
                names.append(name.strip())
            return keys[key]

        kept: list[Triplet] = []
        heads: list[int] = []
        tails: list[int] = []
        dropped = 0
        for t in tqdm(triplets, desc="graph: link triplets", unit="triplet", disable=not show_progress):
            if not normalize_entity(t.head) or not normalize_entity(t.tail):
                dropped += 1
                continue
            heads.append(entity(t.head))
            tails.append(entity(t.tail))
            kept.append(t)
        for name, others in (aliases or {}).items():
            e = entity(name)
            for a in others:
                ka = normalize_entity(a)
                if ka and keys.setdefault(ka, e) != e:
                    log.warning("alias %r of %r already names entity %r; kept the first", a, name, names[keys[ka]])
        kg = cls(passages, names, keys, kept, np.asarray(heads, np.int64), np.asarray(tails, np.int64), dropped)
        if encoder is not None:
            kg.embed(encoder, show_progress)
        return kg

    @classmethod
    def from_openie(cls, path: str | Path, corpus: Corpus, encoder: Encoder | None = None) -> KnowledgeGraph:
        """From HippoRAG OpenIE json (e.g. ``musique_mini/openie_gpt-3.5-turbo-1106.json``) over ``corpus``."""
        res = load_openie(path, corpus)
        log.info("OpenIE %s: %d triples, %d malformed, %d duplicates", path, res.raw, res.malformed, res.duplicates)
        return cls.build(corpus.passages, res.triplets, encoder)

    @classmethod
    def from_triplets_jsonl(
        cls, path: str | Path, passages: Sequence[Passage], encoder: Encoder | None = None
    ) -> KnowledgeGraph:
        """From JSONL records ``{head, relation, tail[, source_id | source]}`` (EffiRAG-World's triplets.jsonl)."""
        return cls.build(passages, _read_triplets(Path(path)), encoder)

    def embed(self, encoder: Encoder, show_progress: bool = False) -> None:
        """Embed entity names and triplet texts with ``encoder`` (passage side), for the dense indexes."""
        self.entity_embeddings = _embed(encoder, self.entity_names, "entities", show_progress)
        self.triplet_embeddings = _embed(encoder, [t.text for t in self.triplets], "triplets", show_progress)
        self.encoder_name = encoder.name

    # ------------------------------------------------------------------------------------------------ lookups
    def lookup(self, name: str) -> int | None:
        """Entity id of ``name`` by exact normalised name or alias; None if the graph does not know it."""
        return self.aliases.get(normalize_entity(name))

    def entities_in(self, text: str, min_chars: int = 2) -> list[int]:
        """Entity ids named in ``text``: greedy longest match over normalised tokens, left to right, no overlaps.

        Keys shorter than ``min_chars`` characters (e.g. "a", "1") are ignored. Each entity appears once, in order.
        """
        toks = normalize_entity(text).split()
        out: list[int] = []
        i = 0
        while i < len(toks):
            match = 0
            for n in sorted(self._first.get(toks[i], ()), reverse=True):
                if i + n <= len(toks):
                    key = " ".join(toks[i : i + n])
                    if key in self.aliases and len(key) >= min_chars:
                        match = n
                        e = self.aliases[key]
                        if e not in out:
                            out.append(e)
                        break
            i += match or 1
        return out

    def one_hop(self, entity: int) -> list[int]:
        """Triplet ids with ``entity`` as head or tail, in graph order."""
        return self.entity_triplets[entity]

    def neighbours(self, entity: int) -> list[int]:
        """Entity ids linked to ``entity`` by a triplet, in first-seen order."""
        out: dict[int, None] = {}
        for t in self.entity_triplets[entity]:
            h, tl = int(self.head_ids[t]), int(self.tail_ids[t])
            out.setdefault(tl if h == entity else h, None)
        out.pop(entity, None)
        return list(out)

    def search_entities(self, query_vectors: NDArray[np.float32], k: int) -> list[list[tuple[int, float]]]:
        """Top-k entities by inner product for each row of ``query_vectors`` (n_q, dim); ties by entity id."""
        if self.entity_embeddings is None:
            raise IndexMismatchError("the knowledge graph has no entity embeddings: call embed(encoder) first")
        return _topk(np.asarray(query_vectors, np.float32) @ self.entity_embeddings.T, k)

    # ------------------------------------------------------------------------------------------- persistence
    def save(self, directory: str | Path) -> None:
        """Write passages/entities/triplets JSONL, embeddings npy and ``manifest.json`` (counts, checksums)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        _write_jsonl(d / "passages.jsonl", ({"id": p.id, "title": p.title, "text": p.text} for p in self.passages))
        by_entity: list[list[str]] = [[] for _ in self.entity_names]
        for key, e in self.aliases.items():
            if key != normalize_entity(self.entity_names[e]):
                by_entity[e].append(key)
        _write_jsonl(
            d / "entities.jsonl", ({"name": n, "aliases": a} for n, a in zip(self.entity_names, by_entity, strict=True))
        )
        _write_jsonl(
            d / "triplets.jsonl",
            ({"head": t.head, "relation": t.relation, "tail": t.tail, "source_id": t.source_id} for t in self.triplets),
        )
        files = ["passages.jsonl", "entities.jsonl", "triplets.jsonl"]
        for name, arr in (("entity_emb.npy", self.entity_embeddings), ("triplet_emb.npy", self.triplet_embeddings)):
            if arr is not None:
                np.save(d / name, arr, allow_pickle=False)
                files.append(name)
            elif (d / name).exists():
                (d / name).unlink()
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "counts": {
                "passages": len(self.passages),
                "entities": len(self.entity_names),
                "triplets": len(self.triplets),
                "dropped": self.dropped,
            },
            "encoder": self.encoder_name,
            "sha256": {f: _sha256(d / f) for f in files},
        }
        (d / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path) -> KnowledgeGraph:
        """Read a graph written by :meth:`save`; a missing, corrupt or inconsistent file raises IndexMismatchError."""
        d = Path(directory)
        mpath = d / "manifest.json"
        if not mpath.is_file():
            raise IndexMismatchError(f"{mpath}: no knowledge-graph manifest (build the graph first)")
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise IndexMismatchError(f"{mpath}: not valid JSON ({e.msg})") from e
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise IndexMismatchError(
                f"{mpath}: format {manifest.get('format')!r} v{manifest.get('version')!r}, "
                f"expected {FORMAT!r} v{VERSION}"
            )
        for f, digest in manifest["sha256"].items():
            if not (d / f).is_file() or _sha256(d / f) != digest:
                raise IndexMismatchError(f"{d / f}: missing or changed since the graph was saved (checksum mismatch)")
        passages = [Passage(str(r["id"]), str(r["title"]), str(r["text"])) for r in _records(d / "passages.jsonl")]
        names: list[str] = []
        keys: dict[str, int] = {}
        for i, r in enumerate(_records(d / "entities.jsonl")):
            names.append(str(r["name"]))
            keys[normalize_entity(names[-1])] = i
            for a in r.get("aliases", []):
                keys[str(a)] = i
        triplets = list(_read_triplets(d / "triplets.jsonl"))
        heads = np.asarray([keys[normalize_entity(t.head)] for t in triplets], np.int64)
        tails = np.asarray([keys[normalize_entity(t.tail)] for t in triplets], np.int64)
        kg = cls(passages, names, keys, triplets, heads, tails, int(manifest["counts"].get("dropped", 0)))
        counts = {"passages": len(passages), "entities": len(names), "triplets": len(triplets)}
        for name, n in counts.items():
            if manifest["counts"].get(name) != n:
                raise IndexMismatchError(
                    f"{mpath}: manifest says {manifest['counts'].get(name)} {name}, files hold {n}"
                )
        if (d / "entity_emb.npy").is_file():
            kg.entity_embeddings = _load_matrix(d / "entity_emb.npy", len(names))
        if (d / "triplet_emb.npy").is_file():
            kg.triplet_embeddings = _load_matrix(d / "triplet_emb.npy", len(triplets))
        kg.encoder_name = manifest.get("encoder")
        return kg


def _topk(scores: NDArray[np.float32], k: int) -> list[list[tuple[int, float]]]:
    """Row-wise top-k of a (n_q, n) score matrix; ties broken by column index."""
    out = []
    k = min(k, scores.shape[1])
    for row in scores:
        idx = np.lexsort((np.arange(row.size), -row))[:k] if k else np.empty(0, np.int64)
        out.append([(int(i), float(row[i])) for i in idx])
    return out


def _embed(encoder: Encoder, texts: Sequence[str], what: str, show_progress: bool) -> NDArray[np.float32]:
    """Passage-side embeddings of ``texts`` (n, dim), encoded in chunks so a bar on stderr can follow them.

    The chunks are large (4096 texts) so that an encoder that sorts its input by length still batches alike texts.
    """
    from tqdm.auto import tqdm

    chunk = 4096
    parts = []
    with tqdm(total=len(texts), desc=f"encode {what}", unit="text", disable=not show_progress) as bar:
        for start in range(0, len(texts), chunk):
            block = list(texts[start : start + chunk])
            parts.append(_as_matrix(encoder.encode_passages(block), len(block)))
            bar.update(len(block))
    if not parts:
        return _as_matrix(encoder.encode_passages([]), 0)
    return np.concatenate(parts)


def _as_matrix(x: object, n: int) -> NDArray[np.float32]:
    arr = np.asarray(x, dtype=np.float32)
    if n == 0:
        return arr.reshape(0, arr.shape[-1] if arr.ndim == 2 else 0)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise ValueError(f"encoder returned shape {arr.shape} for {n} texts")
    return arr


def _load_matrix(path: Path, n: int) -> NDArray[np.float32]:
    arr = np.load(path, allow_pickle=False)
    if arr.ndim != 2 or arr.shape[0] != n:
        raise IndexMismatchError(f"{path}: shape {arr.shape} does not match {n} rows")
    return np.asarray(arr, np.float32)


def _read_triplets(path: Path) -> Iterable[Triplet]:
    for i, r in enumerate(_records(path)):
        for f in ("head", "relation", "tail"):
            if not isinstance(r.get(f), str):
                raise DataError("expected a string", path=path, record=f"triplet {i}", field=f, value=r.get(f))
        src = r.get("source_id", r.get("source"))
        yield Triplet(r["head"], r["relation"], r["tail"], None if src is None else str(src))


def _records(path: Path) -> Iterable[dict]:
    for line, r in iter_jsonl(path):
        if not isinstance(r, dict):
            raise DataError("expected a JSON object", path=path, record=f"line {line}", value=r)
        yield r


def _write_jsonl(path: Path, rows: Iterable[Mapping[str, object]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
