"""``effirag.env``: the ``env:`` section every run config shares (EnvConfig), how a run config file is loaded (the
policy's inference settings under ``env:``, the layout before ``env:`` refused naming the new key) and what
``build_env`` checks and builds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from effirag.env import EnvConfig, build_env, load_run_config, with_settings
from effirag.errors import ConfigError
from effirag.train.dpo.config import IPDPORunConfig
from effirag.train.mcts.config import MCTSRunConfig
from effirag.train.rl.grpo import GRPORunConfig
from effirag.train.rl.ppo_config import PPORunConfig


@pytest.mark.parametrize(
    ("override", "moved"),
    [
        ("model=/m", "env.model"),
        ("questions=q.jsonl", "env.questions"),
        ("index=idx", "env.index"),
        ("world=w", "env.judge (as world:DIR)"),
        ("engine.k=2", "env.engine"),
        ("reward.outcome=f1", "objective"),
        ("backend=hf:/m", "env.model"),
    ],
)
def test_the_layout_before_env_is_refused_naming_the_new_key(override: str, moved: str) -> None:
    key = override.split("=")[0].split(".")[0]
    for cls in (GRPORunConfig, PPORunConfig, IPDPORunConfig, MCTSRunConfig):
        if key == "reward" and cls in (IPDPORunConfig, MCTSRunConfig):
            continue  # they have no objective section: an unknown key, refused as any other
        with pytest.raises(ConfigError, match=rf"{cls.__name__}\.{key}=.*moved to {re.escape(moved)}"):
            load_run_config(cls, None, [override])


def test_one_env_section_reads_the_same_in_every_run_config() -> None:
    sets = ["env.model=/m", "env.questions=q.jsonl", "env.index=idx", "env.engine.k=2", "env.protocol=tearag"]
    envs = [load_run_config(cls, None, sets).env for cls in (GRPORunConfig, PPORunConfig, IPDPORunConfig)]
    assert envs[0] == envs[1] == envs[2] == EnvConfig(model="/m", questions="q.jsonl", index="idx", protocol="tearag",
                                                      engine=envs[0].engine)  # fmt: skip
    assert envs[0].engine.k == 2
    grpo = load_run_config(GRPORunConfig, None, ["objective.outcome=f1", "objective.format_weight=0.5"])
    assert (grpo.objective.outcome, grpo.objective.format_weight) == ("f1", 0.5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"protocol": "nope"}, "EnvConfig.protocol='nope': unknown protocol 'nope'; known: searchr1"),
        ({"index": "i", "retriever": "http://h:1"}, "EnvConfig.retriever='http://h:1': give index or retriever"),
        ({"retriever": "h:1"}, "EnvConfig.retriever='h:1': must be an http"),
        ({"retriever": "http://h:1", "reranker": "rr"}, "EnvConfig.reranker='rr': needs the index in-process"),
        ({"judge": "world"}, "EnvConfig.judge='world': expected world:DIR"),
        ({"judge": "oracle:x"}, "EnvConfig.judge='oracle:x'"),
        ({"max_questions": -1}, "EnvConfig.max_questions=-1"),
        ({"shots": -2}, "EnvConfig.shots=-2"),
    ],
)
def test_bad_values_are_refused_naming_field_and_value(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        EnvConfig(**kwargs)  # type: ignore[arg-type]


def test_the_policy_as_backend_and_as_folder(tmp_path: Path) -> None:
    assert (EnvConfig(model="runs/p").backend, EnvConfig(model="runs/p").model_dir) == ("hf:runs/p", "runs/p")
    assert EnvConfig(model="vllm:/m?max_model_len=64").model_dir == "/m"
    assert EnvConfig(model="openai:http://h:1/v1#m").model_dir == ""
    assert EnvConfig(model=f"hf:{tmp_path}").trainer_model("X") == str(tmp_path)
    for bad in ("", "vllm:/m", str(tmp_path / "missing"), "scripted:s.json"):
        with pytest.raises(ConfigError, match=r"X\.env\.model=.*local Hugging Face model directory"):
            EnvConfig(model=bad).trainer_model("X")


def test_absolute_keeps_the_backend_prefix_the_query_and_a_reranker_kind(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    env = EnvConfig(model="hf:m?device=cpu", index="i", questions="q.jsonl", reranker="cross-encoder:ce").absolute()
    assert (env.model, env.index, env.questions) == (f"hf:{tmp_path / 'm'}?device=cpu", str(tmp_path / "i"),
                                                     str(tmp_path / "q.jsonl"))  # fmt: skip
    assert env.reranker == f"cross-encoder:{tmp_path / 'ce'}"
    assert EnvConfig(model="openai:http://h:1/v1#m").absolute().model == "openai:http://h:1/v1#m"


def test_inference_settings_go_under_the_section_and_its_own_keys_win(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "inference.yaml").write_text("protocol: hiprag\nreranker: ../rr\nk: 1\nmax_steps: 6\n")
    merged, used = with_settings({"model": str(ckpt), "inference": "auto", "engine": {"k": 3}})
    assert merged == {"model": str(ckpt), "inference": "auto", "protocol": "hiprag", "reranker": str(tmp_path / "rr"),
                      "engine": {"k": 3, "max_steps": 6}}  # fmt: skip
    assert (used.source, used.overridden) == (ckpt, ("k",))
    unset, none = with_settings({"model": str(ckpt)})  # a run config's default: no settings
    assert unset == {"model": str(ckpt)} and none.settings is None
    cfg = load_run_config(MCTSRunConfig, None, [f"env.model=hf:{ckpt}", "env.inference=auto", "env.questions=q"])
    assert (cfg.env.protocol, cfg.env.engine.k, cfg.env.engine.max_steps) == ("hiprag", 1, 6)
    with pytest.raises(ConfigError, match=r"EnvConfig\.inference='nowhere': no such settings file"):
        with_settings({"model": str(ckpt), "inference": "nowhere"})


def test_build_env_checks_the_retrieval_and_loads_questions_and_judge(tmp_path: Path) -> None:
    """A retrieving protocol needs an index (or a retriever URL) that exists; a zero-shot one needs none. The
    questions are cut to max_questions; judge auto finds world.json beside the questions file."""
    questions = tmp_path / "questions.jsonl"
    rows = [{"id": f"q{i}", "question": f"Question {i}?", "golden_answers": [str(i)]} for i in range(3)]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = tmp_path / "s.json"
    script.write_text(json.dumps(["<answer> 0 </answer>"]))
    with pytest.raises(ConfigError, match=r"EnvConfig\.index='': protocol 'searchr1' retrieves"):
        build_env(EnvConfig(model=f"scripted:{script}"), object())
    with pytest.raises(ConfigError, match=r"Run\.env\.index='.*nothing': index folder not found"):
        build_env(EnvConfig(index=str(tmp_path / "nothing")), object(), owner="Run")
    with pytest.raises(ConfigError, match=r"Run\.env\.questions='': a questions file is required"):
        build_env(EnvConfig(protocol="zeroshot"), object(), need_questions=True, owner="Run")
    env = build_env(
        EnvConfig(model=f"scripted:{script}", protocol="zeroshot", questions=str(questions), max_questions=2)
    )
    assert [q.id for q in env.questions] == ["q0", "q1"] and env.retriever is None and env.judge is None
    assert env.policy is env.generator and env.protocol.name == "zeroshot"
    trainer = build_env(EnvConfig(protocol="zeroshot", questions=str(questions)), object())
    assert trainer.generator is None and len(trainer.questions) == 3
    with pytest.raises(ValueError, match="holds no generator"):
        _ = trainer.policy
    with pytest.raises(ConfigError, match=r"EnvConfig\.judge=.*no EffiRAG-World there"):
        build_env(EnvConfig(protocol="zeroshot", judge=f"world:{tmp_path}"), object())
