"""Question loaders for the layouts the field uses, with layout auto-detection.

Layouts (one per public dataset format):
- ``musique``  — HippoRAG json: ``paragraphs[{idx,title,paragraph_text,is_supporting}]``, ``question_decomposition``.
- ``popqa``    — ``paragraphs[{title,text,is_supporting}]``, ``possible_answers`` / ``o_aliases`` as JSON strings.
- ``2wiki``    — ``context[[title,[sentences]]]``, ``supporting_facts``, ``evidences[[s,r,o]]``, ``answer``.
- ``hotpotqa`` — ``_id, question, answer, supporting_facts, context, type, level``.
- ``flashrag`` — ``{id, question, golden_answers, metadata}`` (also Search-R1's files and EffiRAG-World's).
- ``simple``   — ``{idx|id, question, answer}`` (e.g. Bamboogle).

Gold supporting passages are matched to a corpus by HippoRAG's passage key (title + text) for musique/popqa, and by
title for 2wiki/hotpotqa. Without a corpus, the questions' own paragraphs form the passage set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effirag.data.corpus import Corpus, passage_id
from effirag.data.io import check_text, read_records
from effirag.data.io import field as get_field
from effirag.errors import DataError
from effirag.types import Passage, QAExample, SubQuestion, Triplet

LAYOUTS = ("musique", "popqa", "2wiki", "hotpotqa", "flashrag", "simple")


@dataclass
class QuestionSet:
    """Loaded questions, the passages their records carry, and what was skipped (only with ``skip_invalid``)."""

    examples: list[QAExample]
    passages: list[Passage]
    layout: str
    path: str
    skipped: list[str] = field(default_factory=list)
    missing_gold: list[tuple[str, str]] = field(default_factory=list)  # (question id, gold title) not in corpus


def detect_layout(record: Any, *, path: str | Path = "", where: str = "0") -> str:
    """Name the layout of one record, or raise :class:`DataError` for an unknown one."""
    if isinstance(record, Mapping):
        keys = set(record)
        if "golden_answers" in keys:
            return "flashrag"
        if "question_decomposition" in keys or _paragraph_field(record) == "paragraph_text":
            return "musique"
        if "possible_answers" in keys:
            return "popqa"
        if "evidences" in keys and "context" in keys:
            return "2wiki"
        if {"context", "supporting_facts"} <= keys:
            return "hotpotqa"
        if {"question", "answer"} <= keys:
            return "simple"
    raise DataError(
        f"unknown question layout (keys: {sorted(record) if isinstance(record, Mapping) else type(record).__name__}); "
        f"known layouts: {', '.join(LAYOUTS)}",
        path=path,
        record=where,
    )


def load_questions(
    path: str | Path,
    corpus: Corpus | None = None,
    *,
    layout: str = "auto",
    skip_invalid: bool = False,
) -> QuestionSet:
    """Load every question of ``path``. Errors name file, record and field; ``skip_invalid`` skips and records them."""
    p = Path(path)
    skipped: list[str] = []
    records = read_records(p, skip_invalid=skip_invalid, skipped=skipped)
    if not records:
        raise DataError("no question records", path=p)
    if layout == "auto":
        layout = detect_layout(records[0][1], path=p, where=records[0][0])
    if layout not in _PARSERS:
        raise DataError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}", path=p, field="layout")
    qs = QuestionSet([], [], layout, str(p), skipped)
    seen_passages: set[str] = set()
    for where, r in records:
        try:
            ex, passages = _PARSERS[layout](r, p, where, corpus, qs)
        except DataError as e:
            if not skip_invalid:
                raise
            skipped.append(str(e))
            continue
        qs.examples.append(ex)
        for ps in passages:
            if ps.id not in seen_passages:
                seen_passages.add(ps.id)
                qs.passages.append(ps)
    return qs


def _paragraph_field(record: Mapping[str, Any]) -> str | None:
    paras = record.get("paragraphs")
    if isinstance(paras, list) and paras and isinstance(paras[0], Mapping):
        return "paragraph_text" if "paragraph_text" in paras[0] else "text"
    return None


def _json_list(record: Mapping[str, Any], name: str, path: Path, where: str) -> list[str]:
    """A field that holds a list of strings, possibly encoded as a JSON string (PopQA)."""
    raw = record.get(name, [])
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else []
        except json.JSONDecodeError as e:
            raise DataError(f"not a JSON-encoded list: {e.msg}", path=path, record=where, field=name, value=raw) from e
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise DataError("expected a list of strings", path=path, record=where, field=name, value=raw)
    check_text({name: raw}, json.dumps(raw), path=path, record=where)
    return raw


def _dedup(xs: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for x in xs:
        if x not in out:
            out.append(x)
    return tuple(out)


def _resolve(title: str, text: str, corpus: Corpus | None, qs: QuestionSet, qid: str) -> str:
    """Corpus id of a gold passage by HippoRAG key; recorded as missing when the corpus lacks it."""
    if corpus is None:
        return passage_id(title, text)
    pid = corpus.id_for(title, text)
    if pid is None:
        qs.missing_gold.append((qid, title))
        return passage_id(title, text)
    return pid


def _resolve_title(title: str, text: str, corpus: Corpus | None, qs: QuestionSet, qid: str) -> str:
    """Corpus id of a gold passage by title (2Wiki/HotpotQA), falling back to the exact key."""
    if corpus is None:
        return passage_id(title, text)
    by_key = corpus.id_for(title, text)
    if by_key is not None:
        return by_key
    ids = corpus.by_title.get(title)
    if not ids:
        qs.missing_gold.append((qid, title))
        return passage_id(title, text)
    return ids[0]


def _musique(r: Any, p: Path, where: str, corpus: Corpus | None, qs: QuestionSet) -> tuple[QAExample, list[Passage]]:
    qid = str(get_field(r, "id", (str, int), path=p, where=where))
    question = get_field(r, "question", str, path=p, where=where)
    answer = get_field(r, "answer", str, path=p, where=where)
    paras = get_field(r, "paragraphs", list, path=p, where=where)
    by_idx: dict[int, str] = {}
    passages, supporting = [], []
    for i, para in enumerate(paras):
        w = f"{where}.paragraphs[{i}]"
        title = get_field(para, "title", str, path=p, where=w)
        text = get_field(para, "paragraph_text", str, path=p, where=w)
        pid = _resolve(title, text, corpus, qs, qid)
        by_idx[int(para.get("idx", i))] = pid
        passages.append(Passage(pid, title, text))
        if para.get("is_supporting"):
            supporting.append(pid)
    decomposition = []
    for i, d in enumerate(r.get("question_decomposition", [])):
        w = f"{where}.question_decomposition[{i}]"
        sub_q = get_field(d, "question", str, path=p, where=w)
        sub_a = get_field(d, "answer", str, path=p, where=w)
        support = d.get("paragraph_support_idx")
        if support is not None and support not in by_idx:
            raise DataError(
                "paragraph_support_idx names no paragraph",
                path=p,
                record=w,
                field="paragraph_support_idx",
                value=support,
            )
        decomposition.append(SubQuestion(sub_q, sub_a, by_idx.get(support) if support is not None else None))
    qtype = qid.split("__")[0] if "__" in qid else "compositional"
    ex = QAExample(
        id=qid,
        question=question,
        answers=_dedup([answer, *_json_list(r, "answer_aliases", p, where)]),
        hops=len(decomposition) or None,
        qtype=qtype,
        supporting_ids=tuple(supporting),
        decomposition=tuple(decomposition),
    )
    return ex, passages


def _popqa(r: Any, p: Path, where: str, corpus: Corpus | None, qs: QuestionSet) -> tuple[QAExample, list[Passage]]:
    qid = str(get_field(r, "id", (str, int), path=p, where=where))
    question = get_field(r, "question", str, path=p, where=where)
    answers = _json_list(r, "possible_answers", p, where)
    if not answers:
        raise DataError(
            "no gold answer", path=p, record=where, field="possible_answers", value=r.get("possible_answers")
        )
    answers += _json_list(r, "o_aliases", p, where)
    passages, supporting = [], []
    for i, para in enumerate(r.get("paragraphs", [])):
        w = f"{where}.paragraphs[{i}]"
        title = get_field(para, "title", str, path=p, where=w)
        text = get_field(para, "text", str, path=p, where=w)
        pid = _resolve(title, text, corpus, qs, qid)
        passages.append(Passage(pid, title, text))
        if para.get("is_supporting"):
            supporting.append(pid)
    ex = QAExample(
        qid, question, _dedup(answers), hops=1, qtype=str(r.get("prop", "single-hop")), supporting_ids=tuple(supporting)
    )
    return ex, passages


def _context_passages(
    r: Any, p: Path, where: str, corpus: Corpus | None, qs: QuestionSet, qid: str
) -> tuple[list[Passage], dict[str, str]]:
    passages, by_title = [], {}
    for i, item in enumerate(get_field(r, "context", list, path=p, where=where)):
        w = f"{where}.context[{i}]"
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], list)):
            raise DataError("expected [title, [sentences]]", path=p, record=w, field="context", value=item)
        title, text = item[0], "".join(item[1])
        pid = _resolve_title(title, text, corpus, qs, qid)
        by_title[title] = pid
        passages.append(Passage(pid, title, text))
    return passages, by_title


def _supporting(r: Any, p: Path, where: str, by_title: dict[str, str]) -> tuple[str, ...]:
    out: list[str] = []
    for i, sf in enumerate(get_field(r, "supporting_facts", list, path=p, where=where)):
        if not (isinstance(sf, list) and sf and isinstance(sf[0], str)):
            raise DataError(
                "expected [title, sentence index]",
                path=p,
                record=f"{where}.supporting_facts[{i}]",
                field="supporting_facts",
                value=sf,
            )
        if sf[0] not in by_title:
            raise DataError(
                "supporting fact names a title absent from context",
                path=p,
                record=where,
                field="supporting_facts",
                value=sf[0],
            )
        if by_title[sf[0]] not in out:
            out.append(by_title[sf[0]])
    return tuple(out)


def _2wiki(r: Any, p: Path, where: str, corpus: Corpus | None, qs: QuestionSet) -> tuple[QAExample, list[Passage]]:
    qid = str(get_field(r, "_id", (str, int), path=p, where=where))
    question = get_field(r, "question", str, path=p, where=where)
    answer = get_field(r, "answer", str, path=p, where=where)
    passages, by_title = _context_passages(r, p, where, corpus, qs, qid)
    supporting = _supporting(r, p, where, by_title)
    evidence = []
    for i, ev in enumerate(get_field(r, "evidences", list, path=p, where=where)):
        if not (isinstance(ev, list) and len(ev) == 3 and all(isinstance(x, str) for x in ev)):
            raise DataError(
                "expected [subject, relation, object]",
                path=p,
                record=f"{where}.evidences[{i}]",
                field="evidences",
                value=ev,
            )
        evidence.append(Triplet(ev[0], ev[1], ev[2]))
    aliases = r.get("answer_aliases", [])
    ex = QAExample(
        qid,
        question,
        _dedup([answer, *aliases]),
        hops=len(supporting) or None,
        qtype=str(r.get("type", "")) or None,
        supporting_ids=supporting,
        evidence=tuple(evidence),
    )
    return ex, passages


def _hotpotqa(r: Any, p: Path, where: str, corpus: Corpus | None, qs: QuestionSet) -> tuple[QAExample, list[Passage]]:
    qid = str(get_field(r, "_id", (str, int), path=p, where=where))
    question = get_field(r, "question", str, path=p, where=where)
    answer = get_field(r, "answer", str, path=p, where=where)
    passages, by_title = _context_passages(r, p, where, corpus, qs, qid)
    supporting = _supporting(r, p, where, by_title)
    ex = QAExample(
        qid,
        question,
        (answer,),
        hops=len(supporting) or None,
        qtype=str(r.get("type", "")) or None,
        supporting_ids=supporting,
    )
    return ex, passages


def _flashrag(r: Any, p: Path, where: str, corpus: Corpus | None, qs: QuestionSet) -> tuple[QAExample, list[Passage]]:
    qid = str(get_field(r, "id", (str, int), path=p, where=where))
    question = get_field(r, "question", str, path=p, where=where)
    golds = get_field(r, "golden_answers", list, path=p, where=where)
    if not golds or not all(isinstance(g, str) for g in golds):
        raise DataError(
            "expected a non-empty list of strings", path=p, record=where, field="golden_answers", value=golds
        )
    meta = r.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise DataError("expected an object", path=p, record=where, field="metadata", value=meta)
    decomposition = []
    for i, d in enumerate(meta.get("decomposition", []) or []):
        w = f"{where}.metadata.decomposition[{i}]"
        decomposition.append(
            SubQuestion(
                get_field(d, "question", str, path=p, where=w),
                get_field(d, "answer", str, path=p, where=w),
                None if d.get("support") is None else str(d["support"]),
            )
        )
    evidence = []
    for i, ev in enumerate(meta.get("evidence", []) or []):
        w = f"{where}.metadata.evidence[{i}]"
        if isinstance(ev, Mapping):
            evidence.append(
                Triplet(
                    get_field(ev, "head", str, path=p, where=w),
                    get_field(ev, "relation", str, path=p, where=w),
                    get_field(ev, "tail", str, path=p, where=w),
                    None if ev.get("source") is None else str(ev["source"]),
                )
            )
        elif isinstance(ev, list) and len(ev) in (3, 4):
            evidence.append(Triplet(str(ev[0]), str(ev[1]), str(ev[2]), str(ev[3]) if len(ev) == 4 else None))
        else:
            raise DataError(
                "expected {head, relation, tail[, source]} or [h, r, t]", path=p, record=w, field="evidence", value=ev
            )
    hops = meta.get("hops")
    ex = QAExample(
        qid,
        question,
        _dedup(list(golds)),
        hops=int(hops) if hops is not None else None,
        qtype=meta.get("type"),
        supporting_ids=tuple(str(s) for s in meta.get("supporting_ids", []) or []),
        decomposition=tuple(decomposition),
        evidence=tuple(evidence),
    )
    if corpus is not None:
        for s in ex.supporting_ids:
            if s not in corpus.by_id:
                qs.missing_gold.append((qid, s))
    return ex, []


def _simple(r: Any, p: Path, where: str, corpus: Corpus | None, qs: QuestionSet) -> tuple[QAExample, list[Passage]]:
    raw_id = r.get("id", r.get("idx", where)) if isinstance(r, Mapping) else where
    question = get_field(r, "question", str, path=p, where=where)
    answer = get_field(r, "answer", (str, list), path=p, where=where)
    answers = [answer] if isinstance(answer, str) else [str(a) for a in answer]
    return QAExample(str(raw_id), question, _dedup(answers)), []


_Parser = Callable[[Any, Path, str, "Corpus | None", QuestionSet], tuple[QAExample, list[Passage]]]
_PARSERS: dict[str, _Parser] = {
    "musique": _musique,
    "popqa": _popqa,
    "2wiki": _2wiki,
    "hotpotqa": _hotpotqa,
    "flashrag": _flashrag,
    "simple": _simple,
}
