"""The viewer's self-contained HTML page: summary table, plots (inline PNG), filterable question list; MCTS trees
(:mod:`effirag.view.mcts`) and DPO / IP-DPO logs (:mod:`effirag.view.dpo`) in sections of their own.

Nothing is fetched from the network: the style sheet and the filter script (a few lines of vanilla JavaScript) are
inline, plots are ``data:`` URIs and KAG graphs inline SVG. Filters: status (correct / wrong / format failure),
run, protocol, hop count, question type, and "over-search only"; the count of shown questions updates as they change.
The MCTS and DPO sections need no script (collapsible ``<details>``, SVG tooltips).
"""

from __future__ import annotations

import base64
from html import escape
from typing import Any

from effirag.view.dpo import dpo_section, ipdpo_section
from effirag.view.files import config_html
from effirag.view.mcts import mcts_questions, mcts_summary
from effirag.view.question import counts, question_html
from effirag.view.runs import Row, RunSet, rows, run_means

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}
th{background:#f3f3f3}.meta{color:#777;font-size:12px}.badge{border-radius:3px;padding:0 5px;margin-right:3px;
font-size:12px;color:#fff}.badge.correct{background:#2ca02c}.badge.wrong{background:#d62728}
.badge.format{background:#7f7f7f}.badge.unscored{background:#bcbd22}.badge.over{background:#ff7f0e}
.badge.under{background:#9467bd}.question{border-bottom:1px solid #eee;padding:3px 0}.hidden{display:none}
pre.text{white-space:pre-wrap;background:#f8f8f8;padding:4px;margin:3px 0;font-size:12px}
.step{margin:6px 0}.action{font-weight:bold}.oracle.over-search{color:#ff7f0e}.oracle.under-search{color:#9467bd}
.error{color:#d62728}.budget{font-size:12px;margin:2px 0}.track{display:inline-block;width:200px;height:8px;
background:#eee;margin-left:8px}.fill{display:block;height:8px;background:#1f77b4}.budget.over .fill{background:#d62728}
#filters label{margin-right:12px;font-size:13px}figure{display:inline-block;margin:4px}
figure img{max-width:560px;border:1px solid #eee}table.items td:last-child{max-width:600px}
div.tree{overflow-x:auto;border:1px solid #eee;margin:4px 0}details.clip summary{cursor:pointer}
details.clip pre.text{max-width:700px}.mcts-question{border-bottom:1px solid #eee;padding:3px 0}
img#plot-pref_curves{max-width:1150px}
"""

SCRIPT = """
(function(){
  var qs=Array.prototype.slice.call(document.querySelectorAll('.question'));
  var sel=Array.prototype.slice.call(document.querySelectorAll('#filters select'));
  var over=document.getElementById('f-over');
  function apply(){
    var shown=0;
    qs.forEach(function(q){
      var ok=sel.every(function(s){return s.value==='*'||q.dataset[s.dataset.key]===s.value;});
      if(over.checked&&q.dataset.over!=='1'){ok=false;}
      q.classList.toggle('hidden',!ok);
      if(ok){shown++;}
    });
    document.getElementById('shown').textContent=String(shown);
  }
  sel.forEach(function(s){s.addEventListener('change',apply);});
  over.addEventListener('change',apply);
  apply();
})();
"""

FILTERS = (("status", "status"), ("run", "run"), ("protocol", "protocol"), ("hops", "hops"), ("type", "type"))


def _fmt(v: Any, pct: bool = False) -> str:
    if isinstance(v, float):
        if v != v:
            return "-"
        return f"{100 * v:.1f}" if pct else f"{v:.1f}"
    return escape(str(v))


def summary_table(runs: RunSet) -> str:
    """One row per QA run: questions, EM, format rate, steps, retrieval turns, tokens by kind, OSR / USR, latency."""
    cols = ["run", "protocol", "n", "EM %", "format %", "steps", "retrievals", "reasoning", "answer", "summary",
            "inserted", "tokens", "OSR %", "USR %", "gen s", "retr s", "KAG+PPR ms"]  # fmt: skip
    out = [f'<table id="summary"><tr>{"".join(f"<th>{c}</th>" for c in cols)}</tr>'] if runs.qa else []
    for run in runs.qa:
        m = run_means(run)
        rep = run.report or {}
        oracle, lat = rep.get("oracle", {}), rep.get("latency_s", {})
        cells = [
            run.name, run.protocol, m["n"], _fmt(m["em"], True), _fmt(m["format"], True), f"{m['steps']:.2f}",
            f"{m['retrievals']:.2f}", *(_fmt(m[k]) for k in ("reasoning", "answer", "summary", "inserted", "tokens")),
            *(_fmt(oracle[k], True) if k in oracle else "-" for k in ("osr", "usr")),
            f"{lat['generation']:.2f}" if "generation" in lat else "-",
            f"{lat['retrieval']:.3f}" if "retrieval" in lat else "-",
            f"{1000 * lat['kag_ppr']:.2f}" if "kag_ppr" in lat else "-",
        ]  # fmt: skip
        out.append(f'<tr class="run">{"".join(f"<td>{c}</td>" for c in cells)}</tr>')
    out.append("</table>" if runs.qa else "")
    for rl in runs.rl:
        last = rl.steps[-1] if rl.steps else {}
        shown = ", ".join(f"{k} {v:.4g}" for k, v in last.items() if isinstance(v, int | float))
        out.append(f'<p class="rl"><b>RL run {escape(rl.name)}</b>: {len(rl.steps)} steps; last: {escape(shown)}</p>')
        out.append(config_html(rl.config))
    return "".join(out)


def _filters(all_rows: list[Row]) -> str:
    values = {
        "status": [r.status for r in all_rows],
        "run": [r.run for r in all_rows],
        "protocol": [r.trajectory.protocol for r in all_rows],
        "hops": [r.hops for r in all_rows],
        "type": [r.qtype for r in all_rows],
    }
    out = []
    for key, label in FILTERS:
        options = "".join(f'<option value="{escape(v)}">{escape(v)} ({n})</option>' for v, n in counts(values[key]))
        out.append(
            f'<label>{label} <select id="f-{key}" data-key="{key}"><option value="*">all</option>{options}</select>'
            "</label>"
        )
    out.append('<label><input type="checkbox" id="f-over"> over-search only</label>')
    return f'<div id="filters">{"".join(out)}</div>'


def build_html(runs: RunSet, plots: dict[str, bytes], title: str) -> str:
    """The whole page for ``runs`` with ``plots`` (name → PNG bytes) embedded."""
    figures = "".join(
        f'<figure><img alt="{escape(name)}" id="plot-{escape(name)}" '
        f'src="data:image/png;base64,{base64.b64encode(png).decode()}"><figcaption>{escape(name)}</figcaption></figure>'
        for name, png in plots.items()
    )
    body = [f"<h1>{escape(title)}</h1>"]
    if runs.qa or runs.rl:
        body.append(f"<h2>Summary</h2>{summary_table(runs)}")
    if plots:
        body.append(f'<h2>Plots</h2><div id="plots">{figures}</div>')
    if runs.dpo or runs.ipdpo:
        pref = "".join(dpo_section(r) for r in runs.dpo) + "".join(ipdpo_section(r) for r in runs.ipdpo)
        body.append(f'<h2>Preference training</h2><div id="pref">{pref}</div>')
    if runs.mcts:
        trees = "".join(mcts_summary(r) + f'<div class="mcts-questions">{mcts_questions(r)}</div>' for r in runs.mcts)
        body.append(f'<h2>MCTS trees</h2><div id="mcts">{trees}</div>')
    if runs.qa:
        all_rows = [r for run in runs.qa for r in rows(run)]
        by_run = {run.name: run for run in runs.qa}
        questions = "".join(question_html(by_run[r.run], r, f"q-{i}") for i, r in enumerate(all_rows))
        body.append(
            f'<h2>Questions (<span id="shown">{len(all_rows)}</span> of <span id="total">{len(all_rows)}</span> shown)'
            f'</h2>{_filters(all_rows)}<div id="questions">{questions}</div><script>{SCRIPT}</script>'
        )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>"
    )
