"""HTML of one question in the viewer: its steps, retrieved items, token ledger, budget bars and KAG graphs."""

from __future__ import annotations

from html import escape
from typing import Any

from effirag.types import Step
from effirag.view.runs import KINDS, QARun, Row, ledger
from effirag.view.svg import kag_svg

ORACLE_NOTE = {
    "over-search": "over-search: the policy already knew the fact this search asked for",
    "under-search": "under-search: the step asserted a fact the policy did not know and did not retrieve",
    "ok": "oracle: fine",
}


def bar(label: str, used: int, limit: int | None, cls: str) -> str:
    """A budget bar: ``used`` against ``limit`` (a plain count without a known limit)."""
    if not limit:
        return f'<div class="budget {cls}" data-used="{used}">{escape(label)}: {used}</div>'
    pct = min(100.0, 100.0 * used / limit)
    over = " over" if used > limit else ""
    return (
        f'<div class="budget {cls}{over}" data-used="{used}" data-limit="{limit}">{escape(label)}: {used} / {limit}'
        f'<span class="track"><span class="fill" style="width:{pct:.1f}%"></span></span></div>'
    )


def question_html(run: QARun, row: Row, qid: str) -> str:
    """``<div class="question">`` with data attributes the filters read, and its collapsible detail."""
    t, ex = row.trajectory, row.example
    gold = escape(" | ".join(ex.answers)) if ex is not None else "?"
    data = {
        "status": row.status,
        "protocol": t.protocol,
        "run": run.name,
        "hops": row.hops,
        "type": row.qtype,
        "over": "1" if row.over_search else "0",
        "under": "1" if row.under_search else "0",
    }
    attrs = " ".join(f'data-{k}="{escape(v)}"' for k, v in data.items())
    badges = f'<span class="badge {row.status}">{row.status}</span>'
    if row.over_search:
        badges += f'<span class="badge over">{row.over_search} over-search</span>'
    if row.under_search:
        badges += f'<span class="badge under">{row.under_search} under-search</span>'
    head = (
        f'<summary>{badges} <b>{escape(t.question_id)}</b> <span class="meta">[{escape(run.name)} · {row.hops}-hop '
        f"{escape(row.qtype)}]</span> {escape(t.question)} → <i>{escape(repr(t.prediction))}</i> "
        f'<span class="meta">(gold {gold})</span></summary>'
    )
    used = int(t.extras.get("used_tokens", t.generated_tokens + t.inserted_tokens))
    bars = bar("steps", len(t.steps), run.limit("max_steps"), "steps") + bar(
        "tokens", used, run.limit("max_total_tokens"), "tokens"
    )
    steps = "".join(step_html(run, i, s) for i, s in enumerate(t.steps, start=1))
    totals = _ledger_table([ledger(s) for s in t.steps], "total")
    return (
        f'<div class="question" id="{qid}" {attrs}><details>{head}<div class="body">'
        f'<div class="budgets">{bars}</div><ol class="steps">{steps}</ol>{totals}</div></details></div>'
    )


def _ledger_table(entries: list[dict[str, int]], cls: str) -> str:
    sums = {k: sum(e[k] for e in entries) for k in (*KINDS, "inserted")}
    cells = "".join(f'<td data-kind="{k}">{v}</td>' for k, v in sums.items())
    head = "".join(f"<th>{k}</th>" for k in ("generated reasoning", "generated answer", "generated summary"))
    return f'<table class="ledger {cls}"><tr>{head}<th>inserted observation</th></tr><tr>{cells}</tr></table>'


def step_html(run: QARun, n: int, s: Step) -> str:
    """One ``<li class="step">``: action, query and mode, oracle verdict, the model's text, items, ledger, graph."""
    head = f'<span class="action {s.action.value}" data-step="{n}">{s.action.value}</span>'
    if s.query:
        head += f" <b>{escape(s.query)}</b>"
    if s.mode:
        head += f' <span class="meta">mode {escape(s.mode)}</span>'
    if s.entities:
        head += f' <span class="meta">entities: {escape("; ".join(s.entities))}</span>'
    verdict = s.extras.get("oracle")
    if verdict:
        head += (
            f' <span class="oracle {escape(verdict)}" title="{escape(ORACLE_NOTE.get(verdict, ""))}">{verdict}</span>'
        )
    if s.error:
        head += f' <span class="error">{escape(s.error)}</span>'
    timing = f"generation {s.generation_s:.3f} s, retrieval {s.retrieval_s:.3f} s"
    if "kag_ppr" in s.timings:
        timing += f", KAG+PPR {1000 * s.timings['kag_ppr']:.2f} ms"
    body = [
        f'<div class="head">{head}</div>',
        f'<pre class="text">{escape(s.text)}</pre>',
        _items_table(s),
        _ledger_table([ledger(s)], "step"),
        f'<div class="meta">{timing}</div>',
    ]
    kag = s.extras.get("kag")
    if isinstance(kag, dict) and "graph" in kag:
        kept = [f"{'c' if it.kind.value == 'chunk' else 't'}:{it.id}" for it in s.items]
        body.append(f'<div class="graph">{kag_svg(kag, kept)}</div>')
    return f'<li class="step" data-action="{s.action.value}">{"".join(body)}</li>'


def _items_table(s: Step) -> str:
    if not s.items:
        return ""
    rows = "".join(
        f'<tr class="item {it.kind.value}"><td>{it.kind.value}</td><td>{escape(it.id)}</td>'
        f"<td>{escape(it.title)}</td><td>{it.score:.4f}</td><td>{'' if it.tokens is None else it.tokens}</td>"
        f"<td>{escape(it.text)}</td></tr>"
        for it in s.items
    )
    return (
        '<table class="items"><tr><th>kind</th><th>id</th><th>title</th><th>score</th><th>tokens</th><th>text</th>'
        f"</tr>{rows}</table>"
    )


def counts(values: list[Any]) -> list[tuple[str, int]]:
    """Distinct values with their counts, sorted by value: the options of a filter."""
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return sorted(out.items())
