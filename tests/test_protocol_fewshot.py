"""Few-shot prompts for base models: demos from a training split, written in each protocol's own (parsable) format."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.agent.protocols.fewshot import (
    Demo,
    DemoHop,
    check_disjoint,
    demo_from_example,
    demo_script,
    demo_turns,
    split_demos,
)
from effirag.cli.main import app
from effirag.errors import ConfigError, DataError
from effirag.llm.scripted import ScriptedGenerator
from effirag.types import Passage, QAExample, SubQuestion

P1 = Passage("p1", "Blue River", "Blue River is a film directed by Ana Lopez.")
P2 = Passage("p2", "Ana Lopez", "Ana Lopez was born in Lyon.")
P3 = Passage("p3", "Lyon", "Lyon is a city in France, on the Rhone river, with a long history of silk weaving.")
PASSAGES = {p.id: p for p in (P1, P2, P3)}
TWO_HOP = QAExample(
    "m1",
    "Where was the director of Blue River born?",
    ("Lyon",),
    decomposition=(
        SubQuestion("Who directed Blue River?", "Ana Lopez", "p1"),
        SubQuestion("Where was #1 born?", "Lyon", "p2"),
    ),
)
ONE_HOP = QAExample("s1", "What country is Lyon in?", ("France",), supporting_ids=("p3",))
NO_GOLD = QAExample("x1", "What is missing?", ("nothing",), supporting_ids=("p404",))
INSTRUCT_SEARCHR1 = (
    "You are a search agent using the Search-R1 protocol. Reason inside <think> </think> whenever you receive new "
    "information. When you lack a fact, search for it with <search> query </search>; the results come back between "
    "<information> and </information>. Search as often as you need. When you are sure, write only the final answer "
    "inside <answer> </answer>, for example <answer> Paris </answer>.\nQuestion: Q?\n"
)


def test_demo_resolves_hop_references_and_takes_gold_passages() -> None:
    d = demo_from_example(TWO_HOP, PASSAGES)
    assert d == Demo(
        "m1",
        TWO_HOP.question,
        "Lyon",
        (DemoHop("Who directed Blue River?", "Ana Lopez", P1), DemoHop("Where was Ana Lopez born?", "Lyon", P2)),
    )
    single = demo_from_example(ONE_HOP, PASSAGES)
    assert single is not None and single.hops == (DemoHop(ONE_HOP.question, "France", P3),)
    assert demo_from_example(NO_GOLD, PASSAGES) is None


def test_split_takes_the_shortest_usable_demos_and_removes_them_from_the_evaluated_questions() -> None:
    demos, rest = split_demos([ONE_HOP, NO_GOLD, TWO_HOP], PASSAGES, 1)
    # TWO_HOP's two passages (86 characters) are shorter than ONE_HOP's one (87)
    assert [d.id for d in demos] == ["m1"]
    assert [ex.id for ex in rest] == ["s1", "x1"]
    with pytest.raises(DataError, match="only 2 questions have gold passages"):
        split_demos([ONE_HOP, NO_GOLD, TWO_HOP], PASSAGES, 3)


def test_a_demo_that_is_an_evaluated_question_is_refused() -> None:
    demos, _ = split_demos([TWO_HOP], PASSAGES, 1)
    check_disjoint(demos, ["What country is Lyon in?"], ["s1"])
    with pytest.raises(DataError, match="m1"):
        check_disjoint(demos, ["  where was the director of BLUE RIVER born? "])
    with pytest.raises(DataError, match="also an evaluated question"):
        check_disjoint(demos, ["other"], ["m1"])


def test_instruct_prompts_are_unchanged_without_demos() -> None:
    assert get_protocol("searchr1").build_prompt("Q?") == INSTRUCT_SEARCHR1
    assert get_protocol("zeroshot").build_prompt("Q?") == (
        "Answer the question (zero-shot baseline). Write only the answer, inside <answer> </answer>, for example "
        "<answer> Paris </answer>.\nQuestion: Q?\n"
    )


@pytest.mark.parametrize("name", ["searchr1", "hiprag", "zeroshot", "naive"])
def test_fewshot_prompt_shows_parsable_demos_before_the_question(name: str) -> None:
    demo = demo_from_example(TWO_HOP, PASSAGES)
    assert demo is not None
    proto = get_protocol(name).use_demos([demo])
    prompt = proto.build_prompt("Q?", "CTX" if proto.pre_retrieval_mode else None)
    turns = demo_turns(proto, demo)
    assert turns in prompt and prompt.endswith(proto.question_block("Q?", "CTX" if proto.pre_retrieval_mode else None))
    assert prompt.index(TWO_HOP.question) < prompt.index(turns) < prompt.rindex("Q?")
    assert turns.endswith("<answer> Lyon </answer>")
    # the demo's turns are what the protocol's own parser accepts (replay fails loudly on any invalid turn)
    written = proto.write_turns(demo_script(proto, demo), random.Random(0))
    context = proto.wrap_observation(proto.render_items(demo.documents())) if proto.pre_retrieval_mode else None
    assert proto.training_segments(demo.question, written, context)
    if name in ("searchr1", "hiprag"):
        assert "<search> Where was Ana Lopez born? </search>" in turns and P2.text in turns
    if name == "hiprag":  # each searched step closes with its conclusion, all inside one <think> block
        assert turns.startswith("<think>") and turns.count("<conclusion>") == 2 and "</think>\n<answer>" in turns
    if name == "naive":
        assert P1.text in prompt and P2.text in prompt


def test_protocols_without_a_fewshot_variant_refuse_demos() -> None:
    demo = demo_from_example(TWO_HOP, PASSAGES)
    assert demo is not None
    with pytest.raises(ConfigError, match="tearag has no few-shot prompt variant"):
        get_protocol("tearag").use_demos([demo])


def test_the_engine_shows_the_model_the_fewshot_prompt() -> None:
    demo = demo_from_example(ONE_HOP, PASSAGES)
    assert demo is not None
    gen = ScriptedGenerator(["<answer> Paris </answer>"])
    [t] = run_episodes(gen, None, get_protocol("zeroshot").use_demos([demo]), ["Capital of France?"], EngineConfig())
    assert t.prediction == "Paris" and t.format_ok
    assert gen.prompts[0].endswith(
        "Question: What country is Lyon in?\n<answer> France </answer>\n\nQuestion: Capital of France?\n"
    )


ROWS = [
    ("Who wrote Hamlet?", "Shakespeare", "Hamlet is a play by Shakespeare."),
    (
        "Who painted the Mona Lisa, the famous portrait?",
        "Leonardo",
        "The Mona Lisa was painted by Leonardo da Vinci in Florence over many years.",
    ),
    ("What is the capital of Peru?", "Lima", "Lima is the capital of Peru and its largest city by far."),
]


def _questions(tmp: Path) -> Path:
    """A MuSiQue-layout file of three questions whose paragraphs carry the gold passages."""
    rows: list[dict[str, Any]] = []
    for i, (q, a, text) in enumerate(ROWS):
        rows.append({
            "id": f"q{i}", "question": q, "answer": a, "answer_aliases": [],
            "paragraphs": [{"idx": 0, "title": f"T{i}", "paragraph_text": text, "is_supporting": True}],
            "question_decomposition": [{"id": 1, "question": q, "answer": a, "paragraph_support_idx": 0}],
        })  # fmt: skip
    path = tmp / "questions.json"
    path.write_text(json.dumps(rows))
    return path


def test_eval_qa_fewshot_draws_demos_from_the_file_and_never_evaluates_them(tmp_path: Path) -> None:
    questions = _questions(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["<answer> Leonardo </answer>", "<answer> Lima </answer>"]))
    args = ["eval", "qa", "--questions", str(questions), "--protocol", "zeroshot", "--backend", f"scripted:{script}"]
    r = CliRunner().invoke(
        app,
        [
            *args,
            "--prompt-style",
            "fewshot",
            "--demos",
            str(questions),
            "--shots",
            "1",
            "--json",
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["n"] == 2 and report["em"] == 1.0  # q0 (the shortest) became the demo and is not evaluated
    rows = [json.loads(line) for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(row["question"] for row in rows) == [
        "What is the capital of Peru?",
        "Who painted the Mona Lisa, the famous portrait?",
    ]
    bad = CliRunner().invoke(app, [*args, "--prompt-style", "fewshot"])
    assert bad.exit_code == 2 and "needs --demos" in bad.output
