"""`effirag view` on training outputs, each made by a real tiny run: an MCTS folder (`mine_trees` with the
deterministic variant policy of test_mcts_resume over three questions), a step-level DPO log (`effirag train dpo` on
that folder's pairs, tiny Qwen2, 2 steps) and an IP-DPO log (`run_ipdpo`, 2 rounds, the scripted TeaRAG paths of
test_ipdpo_round: 4 pairs and one DPO step per round). The page's tree SVG must draw every node of each tree JSON with
its visits and value, list every pair, and show one row per IP-DPO round; the folder kinds are detected from their
files, and a folder of no known kind is refused naming the files looked for.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.errors import DataError
from effirag.view import write_report
from effirag.view.runs import folder_kinds, load_runs
from effirag.view.tree_svg import ROW, layout

runner = CliRunner()


@pytest.fixture(scope="module")
def mcts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_mcts_resume import mine

    out = tmp_path_factory.mktemp("view-mcts") / "mcts"
    mine(out)
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("view-tiny"), arch="qwen2", seed=7)


@pytest.fixture(scope="module")
def dpo_dir(tmp_path_factory: pytest.TempPathFactory, mcts_dir: Path, tiny_model: Path) -> Path:
    out = tmp_path_factory.mktemp("view-dpo") / "dpo"
    args = ["train", "dpo", "--data", str(mcts_dir / "pairs.jsonl"), "--config", "configs/dpo/reasonrag_step_dpo.yaml"]
    args += [f"model={tiny_model}", f"output_dir={out}", "train.max_steps=2", "train.batch_size=2", "save_steps=2"]
    res = runner.invoke(app, [*args, "train.learning_rate=1e-3"])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def ipdpo_dir(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    """Two IP-DPO rounds; the environment (questions, TeaRAG, lexical retriever, tail similarity) and the scripted
    sampler are test_ipdpo_round's, so each round samples the same ten hand-worked paths and pairs them into 4."""
    import test_ipdpo_round as hand
    from effirag.agent import EngineConfig, get_protocol
    from effirag.env import EnvConfig
    from effirag.llm.scripted import ScriptedGenerator
    from effirag.train.dpo import ipdpo
    from effirag.train.dpo.config import DPOTrainConfig, IPDPORunConfig
    from test_engine_support import LexicalRetriever

    out = tmp_path_factory.mktemp("view-ipdpo") / "ipdpo"
    env = EnvConfig(model=str(tiny_model), protocol="tearag", engine=EngineConfig(max_steps=4, max_new_tokens=200, k=1))
    cfg = IPDPORunConfig(env=env, output_dir=str(out), rounds=2, samples_per_question=5, eta=(1.0, 0.5),
                         epochs=(1.0, 1.0),
                         train=DPOTrainConfig(learning_rate=1e-3, batch_size=4))  # fmt: skip
    env = (hand.QUESTIONS, get_protocol("tearag"), LexicalRetriever(), hand.tail_sim)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ipdpo, "_environment", lambda cfg, tokenizer: env)
        ipdpo.run_ipdpo(cfg, generator=lambda model, tok: ScriptedGenerator(hand.SCRIPT, tok))
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _blocks(html: str, cls: str) -> dict[str, str]:
    """The HTML of each ``<div class="CLS" ... data-question="ID">`` block up to the next one, by question id."""
    parts = re.split(rf'(?=<div class="{cls}" )', html)
    return {re.search(r'data-question="([^"]+)"', p).group(1): p for p in parts[1:]}  # type: ignore[union-attr]


def test_mcts_page_draws_every_node_and_lists_every_pair(tmp_path: Path, mcts_dir: Path) -> None:
    rep = write_report(mcts_dir, tmp_path / "mcts.html")
    html = rep.html.read_text(encoding="utf-8")
    records = _lines(mcts_dir / "trees.jsonl")
    pairs = _lines(mcts_dir / "pairs.jsonl")
    assert [r["question_id"] for r in records] == ["spain", "france", "lyon"] and len(pairs) > 0
    assert html.count('<tr class="tree-row"') == 3
    blocks = _blocks(html, "mcts-question")
    assert list(blocks) == ["spain", "france", "lyon"]
    for rec in records:
        qid, block = rec["question_id"], blocks[rec["question_id"]]
        nodes = json.loads((mcts_dir / "trees" / f"{qid}.json").read_text(encoding="utf-8"))["nodes"]
        drawn = re.findall(r'<g class="node[^"]*" data-id="(\d+)" data-stage="(\w+)" data-visits="(\d+)" '
                           r'data-value="([^"]+)">', block)  # fmt: skip
        assert len(drawn) == len(nodes) == rec["nodes"]
        assert drawn == [(str(n["id"]), n["stage"], str(n["visits"]), str(n["value"])) for n in nodes]
        assert block.count('<g class="node terminal') == rec["terminal"] == sum(n["terminal"] for n in nodes)
        assert block.count('<tr class="tree-node"') == len(nodes)
        mine = [p for p in pairs if p["question_id"] == qid]
        assert block.count('<tr class="pair-row">') == len(mine) == rec["pairs"]
        assert re.findall(r'<path class="pair" data-chosen="(\d+)" data-rejected="(\d+)"', block) == [
            (str(p["chosen_node"]), str(p["rejected_node"])) for p in mine
        ]
    assert "<script" not in html and not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    res = runner.invoke(app, ["view", str(mcts_dir), "-o", str(tmp_path / "cli.html")])
    assert res.exit_code == 0, res.output
    assert f"3 MCTS trees with {len(pairs)} pairs from 1 MCTS folder(s)" in res.output


def test_tree_layout_puts_parents_over_their_children(mcts_dir: Path) -> None:
    nodes = json.loads((mcts_dir / "trees" / "spain.json").read_text(encoding="utf-8"))["nodes"]
    pos = layout(nodes)
    assert set(pos) == {n["id"] for n in nodes}
    leaves = [pos[n["id"]][0] for n in nodes if not n["children"]]
    assert len(set(leaves)) == len(leaves)  # one column per leaf
    for n in nodes:
        assert pos[n["id"]][1] == pos[0][1] + ROW * n["depth"]
        if n["children"]:
            kids = [pos[k][0] for k in n["children"]]
            assert pos[n["id"]][0] == (kids[0] + kids[-1]) / 2


@pytest.mark.slow
def test_dpo_page_has_config_steps_and_curves(tmp_path: Path, dpo_dir: Path, mcts_dir: Path) -> None:
    assert folder_kinds(dpo_dir) == ["dpo"]
    rep = write_report(dpo_dir, tmp_path / "dpo.html")
    html = rep.html.read_text(encoding="utf-8")
    steps = _lines(dpo_dir / "steps.jsonl")
    assert len(steps) == 2 and html.count('<tr class="dpo-step">') == 2
    n_pairs = len(_lines(mcts_dir / "pairs.jsonl"))
    assert f"DPO run dpo</b>: 2 optimiser steps; {n_pairs} pairs in " in html
    assert f"loss {steps[-1]['loss']:.4g}" in html and "<td>train.beta</td><td>0.1</td>" in html
    assert set(rep.plots) == {"pref_curves"} and rep.plots["pref_curves"].stat().st_size > 20_000
    assert 'id="questions"' not in html and "<script" not in html  # no QA run: no question list, no script


@pytest.mark.slow
def test_ipdpo_page_has_one_row_per_round_and_the_round_pairs(tmp_path: Path, ipdpo_dir: Path) -> None:
    assert folder_kinds(ipdpo_dir) == ["ipdpo"]
    rep = write_report(ipdpo_dir, tmp_path / "ipdpo.html")
    html = rep.html.read_text(encoding="utf-8")
    rounds = _lines(ipdpo_dir / "rounds.jsonl")
    assert [r["round"] for r in rounds] == [1, 2] and [r["pairs"] for r in rounds] == [4, 4]
    rows = re.findall(r'<tr class="round" data-round="(\d+)">(.*?)</tr>', html)
    assert [r for r, _ in rows] == ["1", "2"]
    for (_, cells), rec in zip(rows, rounds, strict=True):
        values = re.findall(r"<td>([^<]*)</td>", cells)
        # round, questions, samples, pairs, dropped, format %, EM %: 10 paths of 2 questions, 4 pairs, format 8/10
        assert values[:7] == [str(rec["round"]), "2", "10", "4", "0", "80", f"{100 * rec['em']:.3g}"]
    assert "<td>1</td><td>2</td><td>" in rows[0][1] and "<td>0.5</td><td>1</td><td>" in rows[1][1]  # η, DPO steps
    assert [re.findall(r"<td>([^<]*)</td>", c)[-1] for _, c in rows] == ["sampled", "sampled"]  # paths from
    assert html.count('<tr class="ipdpo-pair">') == 8 and html.count('<tr class="dpo-step">') == 2
    assert set(rep.plots) == {"pref_curves", "ipdpo_rounds"}
    assert all(p.stat().st_size > 10_000 for p in rep.plots.values())


@pytest.mark.slow
def test_folder_kinds_and_a_folder_of_none(tmp_path: Path, mcts_dir: Path, dpo_dir: Path, ipdpo_dir: Path) -> None:
    """A folder of runs (here links to the three) holds every kind; an RL log is told from a DPO log by its keys, or,
    before its first step, by its config naming a pairs file; an unfinished MCTS folder (pairs.jsonl, no trees.jsonl)
    is none of the kinds and is refused with the folder and the four files looked for."""
    both = tmp_path / "both"
    both.mkdir()
    for f in (mcts_dir, dpo_dir, ipdpo_dir):
        (both / f.name).symlink_to(f, target_is_directory=True)
    runs = load_runs(both)
    assert ([r.name for r in runs.mcts], [r.name for r in runs.dpo], [r.name for r in runs.ipdpo]) == (
        ["mcts"], ["dpo"], ["ipdpo"]
    )  # fmt: skip
    assert folder_kinds(mcts_dir) == ["mcts"]
    rl = tmp_path / "rl"
    rl.mkdir()
    (rl / "steps.jsonl").write_text(json.dumps({"step": 1, "loss": 0.1, "reward/em": 0.5, "kl": 0.0}) + "\n")
    assert folder_kinds(rl) == ["rl"]
    fresh = tmp_path / "fresh-dpo"
    fresh.mkdir()
    (fresh / "steps.jsonl").write_text("")
    (fresh / "config.yaml").write_text("model: m\ndata: pairs.jsonl\ntrain:\n  beta: 0.1\n")
    assert folder_kinds(fresh) == ["dpo"]
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "pairs.jsonl").write_text("")
    (cut / "config.json").write_text("{}")
    with pytest.raises(DataError) as err:
        load_runs(cut)
    for name in (str(cut), "trajectories.jsonl", "steps.jsonl", "rounds.jsonl", "trees.jsonl"):
        assert name in str(err.value), name
    res = runner.invoke(app, ["view", str(cut)])
    assert res.exit_code != 0 and "trees.jsonl (an MCTS folder: `data mcts`)" in res.output


def test_a_tree_file_with_a_bad_node_is_refused(tmp_path: Path, mcts_dir: Path) -> None:
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(mcts_dir, bad)
    doc = json.loads((bad / "trees" / "france.json").read_text(encoding="utf-8"))
    del doc["nodes"][2]["children"]
    (bad / "trees" / "france.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(DataError, match=r"france\.json, record nodes\[2\], field 'children': not a tree node"):
        load_runs(bad)
