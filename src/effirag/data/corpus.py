"""Corpus loading: ``[{title, text}]``, ``{title: [sentences]}`` and FlashRAG ``{id, contents}`` JSONL.

Passages without an id of their own get a content id (a hash of HippoRAG's passage key ``title + "\\n" + text``), so
the same passage has the same id whichever file it was read from, and gold passages of a question match corpus
passages by identity.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from effirag.data.io import field as get_field
from effirag.data.io import read_json, read_records
from effirag.errors import DataError
from effirag.types import Passage


def passage_id(title: str, text: str) -> str:
    """Content id of a passage: ``p`` + 16 hex digits of the SHA-1 of its HippoRAG key."""
    return "p" + hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]


def split_contents(contents: str) -> tuple[str, str]:
    """FlashRAG ``contents`` → (title, text). Accepts ``"Title"\\ntext`` and plain ``Title\\ntext``."""
    title, sep, text = contents.partition("\n")
    if not sep:
        return "", contents
    title = title.strip()
    if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
        title = title[1:-1]
    return title, text


@dataclass
class Corpus:
    """Passages in file order with lookups by id, by HippoRAG key and by title."""

    passages: list[Passage]
    path: str = ""
    skipped: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.by_id: dict[str, Passage] = {}
        self.by_key: dict[str, str] = {}
        self.by_title: dict[str, list[str]] = {}
        for p in self.passages:
            if p.id in self.by_id:
                raise DataError(f"duplicate passage id {p.id!r}", path=self.path or None, field="id", value=p.id)
            self.by_id[p.id] = p
            self.by_key.setdefault(p.key, p.id)
            self.by_title.setdefault(p.title, []).append(p.id)

    def __len__(self) -> int:
        return len(self.passages)

    def __iter__(self) -> Iterator[Passage]:
        return iter(self.passages)

    def id_for(self, title: str, text: str) -> str | None:
        """Corpus id of the passage with this exact title and text, if present."""
        return self.by_key.get(f"{title}\n{text}")


def load_corpus(path: str | Path, *, skip_invalid: bool = False) -> Corpus:
    """Load a corpus file, detecting its layout (see module docstring)."""
    p = Path(path)
    skipped: list[str] = []
    if p.suffix == ".json":
        data = read_json(p)
        if isinstance(data, Mapping) and not isinstance(data.get("data"), list):
            return Corpus(_from_title_map(data, p), str(p))
    records = read_records(p, skip_invalid=skip_invalid, skipped=skipped)
    passages: list[Passage] = []
    seen_keys: set[str] = set()
    for where, r in records:
        try:
            passage = _parse_passage(r, p, where)
        except DataError as e:
            if not skip_invalid:
                raise
            skipped.append(str(e))
            continue
        if passage.key in seen_keys and passage.id == passage_id(passage.title, passage.text):
            continue  # exact duplicate passage without an own id: one content id, one passage
        seen_keys.add(passage.key)
        passages.append(passage)
    return Corpus(passages, str(p), skipped)


def _parse_passage(r: object, path: Path, where: str) -> Passage:
    if not isinstance(r, Mapping):
        raise DataError(f"expected a JSON object, got {type(r).__name__}", path=path, record=where)
    if "contents" in r:
        contents = get_field(r, "contents", str, path=path, where=where)
        title, text = split_contents(contents)
        if "title" in r and "text" in r:
            title, text = str(r["title"]), str(r["text"])
    elif "text" in r or "paragraph_text" in r:
        text_field = "text" if "text" in r else "paragraph_text"
        text = get_field(r, text_field, str, path=path, where=where)
        title = get_field(r, "title", str, path=path, where=where) if "title" in r else ""
    else:
        raise DataError(
            "unknown passage layout: expected 'contents', or 'title' and 'text'", path=path, record=where, field="text"
        )
    pid = r.get("id", r.get("_id"))
    return Passage(id=str(pid) if pid is not None else passage_id(title, text), title=title, text=text)


def _from_title_map(data: Mapping[str, object], path: Path) -> list[Passage]:
    out = []
    for title, sentences in data.items():
        if isinstance(sentences, str):
            text = sentences
        elif isinstance(sentences, Sequence) and all(isinstance(s, str) for s in sentences):
            text = " ".join(s.strip() for s in sentences)  # type: ignore[union-attr]
        else:
            raise DataError("expected a string or a list of sentences", path=path, record=title, field=title)
        out.append(Passage(passage_id(title, text), title, text))
    return out
