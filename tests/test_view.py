"""The run viewer (`effirag view`), its plots, the complete `eval qa` metrics it shows, and the trace exports.

The run is small and real: TeaRAG through the scripted LLM over the six-passage index in mode ``kag`` (so every search
step records its Knowledge Association Graph), plus a Search-R1 run of the same questions and a hand-written RL log.
Tokens are whitespace-split (the scripted LLM has no tokenizer), so every ledger number below can be counted by eye.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from effirag.agent import EngineConfig, get_protocol
from effirag.cli.main import app
from effirag.eval.qa import evaluate_qa
from effirag.llm.scripted import ScriptedGenerator
from effirag.rewards.judges import StepView
from effirag.types import Action, QAExample, Trajectory
from effirag.view import write_report
from effirag.view.runs import load_runs
from effirag.view.traces import openinference, verl_records

EXAMPLES = [
    QAExample("q-capital", "What is the capital of the Netherlands?", ("Amsterdam",), hops=1, qtype="single-hop"),
    QAExample("q-painter", "Who painted The Night Watch?", ("Rembrandt",), hops=2, qtype="compositional"),
    QAExample("q-founded", "When was the Dutch East India Company founded?", ("1602",), hops=2, qtype="compositional"),
    QAExample("q-port", "Which city has the largest port in Europe?", ("Rotterdam",), hops=1, qtype="single-hop"),
]
TEARAG = {
    "capital of the Netherlands?": [
        "<entities> Netherlands </entities>\n<subquery> What is the capital of the Netherlands? </subquery>",
        "<summary> Amsterdam is the capital. </summary>\nFinal answer: Amsterdam",
    ],
    "The Night Watch?": [
        "<entities> The Night Watch </entities>\n<subquery> Who painted The Night Watch? </subquery>",
        "<summary> It hangs in Amsterdam. </summary>\nFinal answer: Vermeer",
    ],
    "Company founded?": ["I am not sure", "still not sure"],
    "largest port": ["Final answer: Rotterdam"],
}
T = "<think> t </think>\n"  # Search-R1's format: <think> before every action
SEARCHR1 = {
    "capital of the Netherlands?": [T + "<answer> Amsterdam </answer>"],
    "The Night Watch?": [T + "<search> Night Watch painter </search>", T + "<answer> Rembrandt </answer>"],
    "Company founded?": [T + "<answer> 1700 </answer>"],
    "largest port": [T + "<answer> Rotterdam </answer>"],
}
RL_STEPS = [
    {
        "step": s,
        "loss": 0.5 / s,
        "kl": 0.01 * s,
        "reward/em": 0.2 * s,
        "reward/format": 0.9,
        "mode_share/passage": p,
        "mode_share/graph": 1 - p,
    }
    for s, p in ((1, 0.8), (2, 0.6), (3, 0.5))
]


class CapitalJudge:
    """A stand-in oracle: a search about a capital is an over-search (the policy knows capitals); reasoning steps are
    never under-searches."""

    def over_search(self, steps: Sequence[StepView]) -> list[bool]:
        return ["capital" in (s.query or "") for s in steps]

    def under_search(self, steps: Sequence[StepView]) -> list[bool]:
        return [False for _ in steps]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, small_retriever: Any) -> Path:
    root = tmp_path_factory.mktemp("view-run")
    cfg = EngineConfig(max_steps=2, k=2)
    for name, script, judge in (("tearag", TEARAG, CapitalJudge()), ("searchr1", SEARCHR1, None)):
        evaluate_qa(EXAMPLES, ScriptedGenerator(script), small_retriever, get_protocol(name), cfg,
                    out_dir=root / name, judge=judge)  # fmt: skip
    (root / "grpo").mkdir()
    (root / "grpo" / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RL_STEPS))
    return root


def _trajectories(folder: Path) -> list[Trajectory]:
    return [Trajectory.from_dict(json.loads(x)) for x in (folder / "trajectories.jsonl").read_text().splitlines()]


def test_eval_report_has_token_split_and_oracle_rates(run_dir: Path) -> None:
    """TeaRAG, whitespace tokens. q-capital: turn 1 ("<entities>", "Netherlands", "</entities>", "<subquery>" and the
    7 words of the subquery, "</subquery>": 12 words) is reasoning; turn 2 "<summary> Amsterdam is the capital.
    </summary> Final answer: Amsterdam" is 9 words: summary 4 ("Amsterdam is the capital."), answer 1, the other 4
    reasoning. q-painter alike: 12 reasoning, then summary 4 ("It hangs in Amsterdam."), answer 1, reasoning 4.
    q-founded: "I am not sure" + "still not sure" = 7 reasoning (invalid turns). q-port: "Final answer: Rotterdam",
    answer 1, reasoning 2. Means over 4: reasoning (16 + 16 + 7 + 2)/4 = 10.25, answer 3/4, summary 8/4 = 2.
    Oracle: two search steps, the capital one judged an over-search → OSR 1/2; no reasoning step → USR 0."""
    report = json.loads((run_dir / "tearag" / "report.json").read_text())
    tokens = report["tokens"]
    assert (tokens["reasoning"], tokens["answer"], tokens["summary"]) == (10.25, 0.75, 2.0)
    assert tokens["reasoning"] + tokens["answer"] + tokens["summary"] == tokens["generated"]
    assert report["oracle"] == {"osr": 0.5, "usr": 0.0, "search_steps": 2, "reasoning_steps": 0}
    assert report["retrieval_turns"] == 0.5 and set(report["latency_s"]) == {"retrieval", "kag_ppr", "generation"}
    assert report["latency_s"]["kag_ppr"] > 0.0  # the KAG+PPR stage of the two kag searches was timed
    assert "oracle" not in json.loads((run_dir / "searchr1" / "report.json").read_text())  # no judge given


def test_kag_steps_record_their_graph(run_dir: Path) -> None:
    trajs = _trajectories(run_dir / "tearag")
    searches = [s for t in trajs for s in t.steps if s.action is Action.SEARCH]
    assert len(searches) == 2
    for s in searches:
        kag = s.extras["kag"]
        ids = {n["id"] for n in kag["graph"]["nodes"]}
        assert {f"c:{it.id}" if it.kind.value == "chunk" else f"t:{it.id}" for it in s.items} <= ids
        assert set(kag["scores"]) == ids and "q" in ids


def test_plots_are_written(tmp_path: Path, run_dir: Path) -> None:
    rep = write_report(run_dir, tmp_path / "report.html")
    names = {"steps_by_hops", "tokens_by_protocol", "accuracy_vs_tokens", "rl_rewards", "rl_mode_shares"}
    assert set(rep.plots) == names
    for path in rep.plots.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5_000, path
    html = rep.html.read_text()
    assert html.count('src="data:image/png;base64,') == len(names)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing from the network


def test_cli_view_and_bad_folder(tmp_path: Path, run_dir: Path) -> None:
    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["view", str(run_dir / "tearag"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "4 questions" in res.output and out.is_file()
    res = CliRunner().invoke(app, ["view", str(tmp_path / "empty")])
    assert res.exit_code != 0 and "run folder not found" in res.output


SPEC_ATTRIBUTES = {  # OpenInference semantic conventions (spec/semantic_conventions.md) used by the export
    "openinference.span.kind", "input.value", "input.mime_type", "output.value", "output.mime_type",
    "llm.model_name", "llm.token_count.prompt", "llm.token_count.completion", "llm.token_count.total", "metadata",
    "session.id",
}  # fmt: skip
DOCUMENT = re.compile(r"retrieval\.documents\.\d+\.document\.(id|content|score|metadata)")


def test_openinference_export_follows_the_spec(run_dir: Path) -> None:
    doc = openinference(load_runs(run_dir))
    [rs] = doc["resourceSpans"]
    [scope] = rs["scopeSpans"]
    spans = scope["spans"]
    kinds: dict[str, int] = {}
    by_id = {s["spanId"]: s for s in spans}
    for s in spans:
        attrs = {a["key"]: a["value"] for a in s["attributes"]}
        bad = [k for k in attrs if k not in SPEC_ATTRIBUTES and not DOCUMENT.fullmatch(k)]
        assert not bad, bad
        kind = attrs["openinference.span.kind"]["stringValue"]
        kinds[kind] = kinds.get(kind, 0) + 1
        assert re.fullmatch(r"[0-9a-f]{32}", s["traceId"]) and re.fullmatch(r"[0-9a-f]{16}", s["spanId"])
        assert int(s["startTimeUnixNano"]) < int(s["endTimeUnixNano"])
        if kind == "AGENT":
            assert "parentSpanId" not in s
        else:
            assert by_id[s["parentSpanId"]]["traceId"] == s["traceId"]
        if kind == "RETRIEVER":
            assert "retrieval.documents.0.document.id" in attrs and "doubleValue" in attrs[
                "retrieval.documents.0.document.score"]  # fmt: skip
    trajs = _trajectories(run_dir / "tearag") + _trajectories(run_dir / "searchr1")
    assert kinds == {
        "AGENT": len(trajs),
        "LLM": sum(len(t.steps) for t in trajs),
        "RETRIEVER": sum(t.n_searches for t in trajs),  # 2 TeaRAG searches + 1 Search-R1 search
    }
    assert kinds["RETRIEVER"] == 3


def test_verl_jsonl_has_one_line_per_trajectory(tmp_path: Path, run_dir: Path) -> None:
    out = tmp_path / "rollouts.jsonl"
    res = CliRunner().invoke(app, ["export", "traces", str(run_dir / "tearag"), "-f", "verl-jsonl", "--out", str(out)])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [set(r) for r in lines] == [{"input", "output", "gts", "score", "step"}] * 4
    assert [r["score"] for r in lines] == [1.0, 0.0, 0.0, 1.0]  # Amsterdam ✓, Vermeer ✗, no answer, Rotterdam ✓
    assert [r["gts"] for r in lines] == [list(e.answers) for e in EXAMPLES]
    assert lines[0]["input"].endswith("Question: What is the capital of the Netherlands?\n")
    assert lines[0]["output"].endswith("Final answer: Amsterdam")
    res = CliRunner().invoke(app, ["export", "traces", str(run_dir / "tearag"), "-f", "otlp"])
    assert res.exit_code != 0 and "openinference, verl-jsonl" in res.output
    assert list(verl_records(load_runs(run_dir / "searchr1")))[1]["score"] == 1.0  # Rembrandt


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium() -> Any:
    """Headless Debian chromium driven by selenium through the system's chromedriver, logging the console."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,1800"):  # fmt: skip
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    return webdriver.Chrome(service=Service(driver), options=opts)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_report_in_headless_chromium(tmp_path: Path, run_dir: Path) -> None:
    """The page in a real browser: no console error; 8 questions listed (4 per QA run); the status filter "wrong"
    leaves q-painter (TeaRAG: Vermeer) and q-founded (Search-R1: 1700); the first KAG step draws every node of its
    graph; the ledger of q-capital's TeaRAG step 2 reads reasoning 4, answer 1, summary 4, inserted 0 (see
    test_eval_report_has_token_split_and_oracle_rates) and step 1's inserted count is the trajectory's."""
    from selenium.webdriver.support.ui import Select

    rep = write_report(run_dir, tmp_path / "report.html")
    browser = _chromium()
    try:
        browser.get(rep.html.resolve().as_uri())
        js = browser.execute_script
        assert js("return document.querySelectorAll('.question').length") == 8
        assert js("return document.querySelectorAll('.question:not(.hidden)').length") == 8
        Select(browser.find_element("id", "f-status")).select_by_value("wrong")
        visible = js("return Array.from(document.querySelectorAll('.question:not(.hidden)')).map(q => q.dataset.run"
                     " + '/' + q.querySelector('b').textContent)")  # fmt: skip
        assert sorted(visible) == ["searchr1/q-founded", "tearag/q-painter"]
        assert browser.find_element("id", "shown").text == "2"
        Select(browser.find_element("id", "f-status")).select_by_value("*")
        js("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        [t0] = [t for t in _trajectories(run_dir / "tearag") if t.question_id == "q-capital"]
        listed = js("return Array.from(document.querySelectorAll('.question'))"
                    ".map(q => q.dataset.run + '/' + q.querySelector('b').textContent)")  # fmt: skip
        tea = listed.index("tearag/q-capital")
        q = f"document.getElementById('q-{tea}')"
        n_nodes = js(f"return {q}.querySelector('li.step svg.kag').querySelectorAll('circle.node').length")
        assert n_nodes == len(t0.steps[0].extras["kag"]["graph"]["nodes"]) > 5
        assert js(f"return {q}.querySelectorAll('li.step svg.kag circle.node.kept').length") == len(t0.steps[0].items)
        ledger = "return Array.from({q}.querySelectorAll('li.step')[{i}].querySelectorAll('table.ledger td'))" \
                 ".map(td => [td.dataset.kind, Number(td.textContent)])"  # fmt: skip
        assert dict(js(ledger.format(q=q, i=1))) == {"reasoning": 4, "answer": 1, "summary": 4, "inserted": 0}
        assert dict(js(ledger.format(q=q, i=0)))["inserted"] == t0.steps[0].inserted_tokens > 0
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        shot = tmp_path / "viewer.png"
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 20_000
    finally:
        browser.quit()


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_mcts_report_in_headless_chromium(tmp_path: Path) -> None:
    """An MCTS folder's page (test_mcts_resume's three trees) in a real browser: no console error; each question's
    tree SVG draws as many nodes as its tree JSON, laid out inside the SVG once its block is opened; hovering text is
    there (each node's <title> holds its whole step text); every pair of pairs.jsonl is a visible row."""
    from test_mcts_resume import mine

    mine(tmp_path / "mcts")
    rep = write_report(tmp_path / "mcts", tmp_path / "mcts.html")
    browser = _chromium()
    try:
        browser.get(rep.html.resolve().as_uri())
        js = browser.execute_script
        assert js("return document.querySelectorAll('.mcts-question').length") == 3
        js("document.querySelectorAll('.mcts-question > details').forEach(d => { d.open = true; })")
        for qid in ("spain", "france", "lyon"):
            nodes = json.loads((tmp_path / "mcts" / "trees" / f"{qid}.json").read_text())["nodes"]
            q = f"document.querySelector('.mcts-question[data-question=\"{qid}\"]')"
            assert js(f"return {q}.querySelectorAll('svg.mcts g.node').length") == len(nodes)
            inside = (
                f"var s = {q}.querySelector('svg.mcts').getBoundingClientRect(); return Array.from("
                f"{q}.querySelectorAll('svg.mcts g.node')).every(g => {{ var b = g.getBoundingClientRect(); "
                "return b.width > 0 && b.left >= s.left && b.right <= s.right && b.bottom <= s.bottom; })"
            )
            assert js(inside), qid
            titles = js(f"return Array.from({q}.querySelectorAll('svg.mcts g.node > title')).map(t => t.textContent)")
            assert all(n["text"] in t for n, t in zip(nodes, titles, strict=True))
        n_pairs = len((tmp_path / "mcts" / "pairs.jsonl").read_text().splitlines())
        visible = "return Array.from(document.querySelectorAll('tr.pair-row')).filter(r => r.offsetHeight > 0).length"
        assert js(visible) == n_pairs > 0
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
        shot = tmp_path / "mcts.png"
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 20_000
    finally:
        browser.quit()


def test_world_oracle_through_eval_qa_and_the_cli_judge(tmp_path: Path) -> None:
    """On a tiny EffiRAG-World: one question searches a fact the policy knows (over-search), the other a fact it does
    not know (a needed search) → OSR 1/2. `eval qa --judge auto` picks the world oracle for questions beside a
    world.json and none elsewhere; `--judge world` without a world fails with one line."""
    import typer

    from effirag.cli.agent import env_config
    from effirag.env import EnvConfig, make_judge
    from effirag.rewards.judges import WorldJudge
    from effirag.world import World, generate_world, load_world_config
    from test_engine_support import LexicalRetriever
    from test_world import TINY

    world_dir = tmp_path / "world"
    generate_world(load_world_config("demo", overrides=TINY), world_dir)
    world = World.load(world_dir)
    known = world.known_facts()[0]
    unknown = next(f for f in world.facts.values() if f.id not in world.known)
    examples = [QAExample("k", "Known one?", ("x",)), QAExample("u", "Unknown one?", ("y",))]
    script = {
        "Known one?": [f"<search> {known.question} </search>", "<answer> x </answer>"],
        "Unknown one?": [f"<search> {unknown.question} </search>", "<answer> z </answer>"],
    }
    report, trajs = evaluate_qa(examples, ScriptedGenerator(script), LexicalRetriever(), get_protocol("searchr1"),
                                EngineConfig(max_steps=3, k=1), judge=WorldJudge(world))  # fmt: skip
    assert [t.steps[0].extras["oracle"] for t in trajs] == ["over-search", "ok"]
    assert report["oracle"] == {"osr": 0.5, "usr": 0.0, "search_steps": 2, "reasoning_steps": 0}
    judge = make_judge(EnvConfig(judge="auto", questions=str(world_dir / "questions_test.jsonl")), None)
    assert isinstance(judge, WorldJudge)
    assert make_judge(EnvConfig(judge="auto", questions=str(tmp_path / "questions.jsonl")), None) is None
    with pytest.raises(typer.Exit):
        env_config(None, "scripted:s.json", None, [], judge="world", questions=tmp_path / "questions.jsonl")


def test_view_judges_an_unjudged_run_with_world(tmp_path: Path) -> None:
    """A Search-R1 run recorded without a judge shows no verdict; `view --world` judges its searches for the page."""
    from effirag.world import World, generate_world, load_world_config
    from test_engine_support import LexicalRetriever
    from test_world import TINY

    world_dir = tmp_path / "world"
    generate_world(load_world_config("demo", overrides=TINY), world_dir)
    known = World.load(world_dir).known_facts()[0]
    script = {"Known one?": [f"<search> {known.question} </search>", "<answer> x </answer>"]}
    evaluate_qa([QAExample("k", "Known one?", ("x",))], ScriptedGenerator(script), LexicalRetriever(),
                get_protocol("searchr1"), EngineConfig(max_steps=3, k=1), out_dir=tmp_path / "run")  # fmt: skip
    assert 'class="oracle' not in write_report(tmp_path / "run", tmp_path / "a.html").html.read_text()
    res = CliRunner().invoke(app, ["view", str(tmp_path / "run"), "-o", str(tmp_path / "b.html"), "--world",
                                   str(world_dir)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert 'class="oracle over-search"' in (tmp_path / "b.html").read_text()
    assert "oracle" not in (tmp_path / "run" / "trajectories.jsonl").read_text()  # the run's files are untouched


def test_rl_log_mode_shares() -> None:
    """Searches in modes passage, graph, passage, hybrid (a step without a query is no search) → shares 2/4, 1/4,
    1/4; no search at all → no share keys."""
    from effirag.train.rl.log import mode_shares
    from effirag.types import Step

    def traj(*modes: str | None) -> Trajectory:
        steps = [Step(Action.SEARCH, query="q", mode=m) if m else Step(Action.ANSWER, answer="a") for m in modes]
        return Trajectory("q", "q?", "routerag", steps)

    shares = mode_shares([traj("passage", "graph", None), traj("passage", "hybrid")])
    assert shares == {"mode_share/graph": 0.25, "mode_share/hybrid": 0.25, "mode_share/passage": 0.5}
    assert mode_shares([traj(None)]) == {}


def test_rl_log_counts_search_free_reasoning_steps() -> None:
    """Two episodes: search, reasoning, answer; reasoning, reasoning, answer → 3 reasoning steps over 2 questions
    (1.5 a question) and 1 search (0.5)."""
    from effirag.train.rl.log import episode_stats
    from effirag.train.rl.rollout import RolloutBatch
    from effirag.types import Step

    def traj(*actions: Action) -> Trajectory:
        steps = [Step(a, query="q" if a is Action.SEARCH else None, answer="a" if a is Action.ANSWER else None)
                 for a in actions]  # fmt: skip
        return Trajectory("q", "q?", "hiprag", steps)

    r, s, a = Action.REASON, Action.SEARCH, Action.ANSWER
    stats = episode_stats(RolloutBatch(trajectories=[traj(s, r, a), traj(r, r, a)]))
    assert (stats["reasoning_steps_per_q"], stats["searches_per_q"]) == (1.5, 0.5)
