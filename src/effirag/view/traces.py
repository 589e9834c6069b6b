"""Trace export of QA runs: OpenInference spans as OTLP JSON, and verl-style rollout JSONL.

OpenInference (the semantic conventions Phoenix and similar tools read): one trace per trajectory; an ``AGENT`` root
span (question in, prediction out, question id / protocol / format / score as ``metadata``), and under it per step an
``LLM`` span (the model's turn: ``output.value``, ``llm.token_count.completion``) and, for a retrieval step, a
``RETRIEVER`` span (``input.value`` the query, ``retrieval.documents.{i}.document.{id,content,score,metadata}``). The
spans are laid out on a timeline from the recorded seconds (generation, then retrieval, step after step) starting at the
trajectory file's modification time; ids are derived from run, question, sample and step, so an export is reproducible.
The document is OTLP/JSON (``resourceSpans`` → ``scopeSpans`` → ``spans``), as an OTLP collector accepts it.

verl JSONL: one line per trajectory with verl's rollout-dump keys ``input`` (the prompt), ``output`` (the episode's
transcript after it), ``gts`` (gold answers), ``score`` (exact match) and ``step`` (0: not a training step).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from effirag.errors import DataError
from effirag.metrics import exact_match
from effirag.types import Action, Step, Trajectory
from effirag.view.runs import QARun, RunSet, ledger

FORMATS = ("openinference", "verl-jsonl")
SPAN_KIND = "openinference.span.kind"
SPAN_KIND_INTERNAL = 1  # OTLP's SpanKind enum; OpenInference carries the real kind in an attribute


def _id(n_hex: int, *parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:n_hex]


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _attrs(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in d.items() if v is not None]


class _Clock:
    """Nanosecond timestamps advancing by recorded seconds."""

    def __init__(self, start_s: float) -> None:
        self.ns = int(start_s * 1e9)

    def span(self, seconds: float) -> tuple[str, str]:
        start = self.ns
        self.ns += max(1, int(seconds * 1e9))
        return str(start), str(self.ns)


def _span(
    trace: str, span: str, parent: str | None, name: str, times: tuple[str, str], attrs: dict[str, Any]
) -> dict[str, Any]:
    """One OTLP/JSON span (kind INTERNAL, status OK)."""
    out: dict[str, Any] = {
        "traceId": trace,
        "spanId": span,
        "name": name,
        "kind": SPAN_KIND_INTERNAL,
        "startTimeUnixNano": times[0],
        "endTimeUnixNano": times[1],
        "attributes": _attrs(attrs),
        "status": {"code": 1},
    }
    if parent is not None:
        out["parentSpanId"] = parent
    return out


def _step_spans(
    run: QARun, t: Trajectory, trace: str, root: str, n: int, s: Step, clock: _Clock
) -> Iterator[dict[str, Any]]:
    """The LLM span of step ``n`` and, for a retrieval step, its RETRIEVER span."""
    key = (run.name, t.question_id, t.sample_index, n)
    led = ledger(s)
    llm = {
        SPAN_KIND: "LLM",
        "llm.model_name": run.settings.get("backend"),
        "output.value": s.text,
        "output.mime_type": "text/plain",
        "llm.token_count.completion": s.generated_tokens,
        "metadata": json.dumps({"step": n, "action": s.action.value, "token_split": {k: led[k] for k in led}}),
    }
    yield _span(trace, _id(16, *key, "llm"), root, f"step {n}: {s.action.value}", clock.span(s.generation_s), llm)
    if s.action not in (Action.SEARCH, Action.MORE_INFO) and not s.items:
        return
    ret: dict[str, Any] = {SPAN_KIND: "RETRIEVER", "input.value": s.query or "", "input.mime_type": "text/plain"}
    for i, it in enumerate(s.items):
        doc = f"retrieval.documents.{i}.document"
        ret[f"{doc}.id"] = it.id
        ret[f"{doc}.content"] = it.text
        ret[f"{doc}.score"] = float(it.score)
        ret[f"{doc}.metadata"] = json.dumps({"kind": it.kind.value, "title": it.title, "tokens": it.tokens})
    ret["metadata"] = json.dumps({"mode": s.mode, "inserted_tokens": s.inserted_tokens, "timings": s.timings,
                                  "oracle": s.extras.get("oracle")})  # fmt: skip
    yield _span(trace, _id(16, *key, "retriever"), root, f"retrieve[{s.mode}]", clock.span(s.retrieval_s), ret)


def openinference(runs: RunSet) -> dict[str, Any]:
    """The OTLP/JSON document of every trajectory of every QA run in ``runs``."""
    spans: list[dict[str, Any]] = []
    for run in runs.qa:
        start = (run.folder / "trajectories.jsonl").stat().st_mtime
        for t in run.trajectories:
            trace = _id(32, run.name, t.question_id, t.sample_index)
            root = _id(16, run.name, t.question_id, t.sample_index, "agent")
            clock = _Clock(start)
            begin = clock.ns
            children = [
                sp for n, s in enumerate(t.steps, start=1) for sp in _step_spans(run, t, trace, root, n, s, clock)
            ]
            ex = run.examples.get(t.question_id)
            meta = {"question_id": t.question_id, "protocol": t.protocol, "sample": t.sample_index,
                    "format_ok": t.format_ok, "run": run.name}  # fmt: skip
            if ex is not None:
                meta |= {"gold": list(ex.answers), "em": exact_match(t.prediction or "", ex.answers)}
            agent = {
                SPAN_KIND: "AGENT",
                "input.value": t.question,
                "input.mime_type": "text/plain",
                "output.value": t.prediction or "",
                "output.mime_type": "text/plain",
                "session.id": run.name,
                "llm.token_count.completion": t.generated_tokens,
                "llm.token_count.prompt": int(t.extras.get("prompt_tokens", 0)) + t.inserted_tokens,
                "metadata": json.dumps(meta),
            }
            spans.append(_span(trace, root, None, f"{t.protocol}: {t.question_id}", (str(begin), str(clock.ns)), agent))
            spans += children
    scope = {"scope": {"name": "effirag", "version": "1"}, "spans": spans}
    resource = {"attributes": _attrs({"service.name": "effirag", "openinference.project.name": runs.root.name})}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]}


def verl_records(runs: RunSet) -> Iterator[dict[str, Any]]:
    """One verl rollout record per trajectory (see the module docstring); the gold answers must be known."""
    for run in runs.qa:
        for t in run.trajectories:
            ex = run.examples.get(t.question_id)
            if ex is None:
                raise DataError(f"no gold answers for question {t.question_id!r} (the score needs them)",
                                path=run.folder / "questions.jsonl")  # fmt: skip
            cut = int(t.extras.get("prompt_chars", len(t.prompt)))
            yield {
                "input": t.prompt[:cut],
                "output": t.prompt[cut:],
                "gts": list(ex.answers),
                "score": exact_match(t.prediction or "", ex.answers),
                "step": 0,
            }
