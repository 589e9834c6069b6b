"""GRPO of a chat policy (recipes/smollm2/grpo_searchr1.yaml and grpo_hiprag.yaml): ``env.model ...?chat=1`` makes the
rollouts start in the policy's chat template (HF and vLLM generators; the closed-book judge's re-answers too), and
``env.holdout`` leaves the evaluation questions out of training; each recipe runs one step at a tiny size (a tiny
Llama with a chat template stands in for SmolLM2; rollouts on HF here, on vLLM in tests/on_vllm/test_vllm_rl.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effirag.env import EnvConfig, load_run_config
from effirag.errors import ConfigError
from effirag.llm.live import LivePolicy
from effirag.llm.scripted import ScriptedGenerator
from effirag.rewards.judges import LLMJudgeConfig, reanswer

REPO = Path(__file__).resolve().parents[1]
RECIPES = {p: REPO / "recipes" / "smollm2" / f"grpo_{p}.yaml" for p in ("searchr1", "hiprag")}


class ChatScripted(ScriptedGenerator):
    """A scripted generator that wraps an episode's prompt as a chat backend does."""

    def format_prompt(self, text: str) -> str:
        return f"<u>{text}</u><a>"


def test_recipes_train_a_chat_policy_on_vllm_rollouts_without_the_held_out_questions() -> None:
    from effirag.train.rl.grpo import GRPORunConfig

    for protocol, recipe in RECIPES.items():
        cfg = load_run_config(GRPORunConfig, recipe, ["env.inference=none"])
        assert cfg.env.chat and cfg.env.model_dir == "runs/sft-smollm2-lora", recipe
        assert cfg.env.protocol == protocol and cfg.env.holdout == 30 and cfg.lora.enabled
        assert cfg.rollout.generator == "vllm" and cfg.max_steps * cfg.questions_per_step <= 40
    hiprag = load_run_config(GRPORunConfig, RECIPES["hiprag"], ["env.inference=none"])
    assert hiprag.env.judge == "closed-book" and hiprag.objective.hiprag_weight == 1.0
    searchr1 = load_run_config(GRPORunConfig, RECIPES["searchr1"], ["env.inference=none"])
    assert searchr1.objective.outcome == "em" and searchr1.objective.format_weight > 0


def test_chat_flag_of_the_policy_spec() -> None:
    assert EnvConfig(model="hf:m?chat=1").chat and EnvConfig(model="vllm:m?eager=1&chat=true").chat
    assert not EnvConfig(model="m").chat and not EnvConfig(model="hf:m?chat=0").chat
    assert not EnvConfig(model="openai:http://h/v1#m?tokenizer=t").chat
    assert EnvConfig(model="hf:m?chat=1").model_dir == "m"


def test_rollout_generators_start_episodes_in_the_chat_template(tmp_path: Path) -> None:
    """rollout.generator=hf over a chat policy: the generator wraps the prompt in the tokenizer's template; a plain
    policy's does not. Ray actors (no chat) are refused for a chat policy."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from effirag.train.rl.grpo import GRPORunConfig
    from effirag.train.rl.vllm_sync import VLLMSync, rollout_generator
    from tiny_models import make_tiny_model

    model_dir = make_tiny_model(tmp_path / "m", arch="llama", seed=1)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    for spec, wrapped in ((f"hf:{model_dir}?chat=1", True), (str(model_dir), False)):
        cfg = load_run_config(GRPORunConfig, None, [f"env.model={spec}", "rollout.generator=hf"])
        gen = rollout_generator(cfg, tok)(model)
        text = gen.format_prompt("Question: x?")
        assert text.startswith("<|user|>\n") == wrapped and "Question: x?" in text, (spec, text)
    cfg = load_run_config(GRPORunConfig, None, [f"env.model=hf:{model_dir}?chat=1", "rollout.generator=vllm"])
    sync = rollout_generator(cfg, tok)
    assert isinstance(sync, VLLMSync) and sync.chat and sync.model_dir == str(model_dir)
    with pytest.raises(ConfigError, match="ray_actors"):
        load_run_config(GRPORunConfig, None, ["env.model=hf:m?chat=1", "rollout.ray_actors=2"])


def test_closed_book_reanswers_are_asked_in_the_chat_template() -> None:
    """The judge's re-answer prompt goes through the policy's chat wrapping, directly and through a live policy."""
    query = "Who directed Glass Harbor?"
    plain = LLMJudgeConfig().reanswer_prompt.format(query=query)
    gen = ChatScripted({"Glass Harbor": ["Mira Talvenor\n"] * 2})
    assert reanswer(gen, [query], LLMJudgeConfig()) == ["Mira Talvenor"]
    assert gen.prompts == [f"<u>{plain}</u><a>"]
    live = LivePolicy()
    live.bind(lambda: gen)
    assert reanswer(live, [query], LLMJudgeConfig()) == ["Mira Talvenor"]
    assert gen.prompts[-1] == f"<u>{plain}</u><a>"
    other = ScriptedGenerator({"Glass Harbor": ["x\n"]})
    assert reanswer(other, [query], LLMJudgeConfig()) == ["x"] and other.prompts == [plain]


def test_holdout_leaves_the_first_questions_out(shared_data: Path) -> None:
    questions = shared_data / "musique_mini" / "questions.json"
    ids = [q["id"] for q in json.loads(questions.read_text("utf-8"))]
    from effirag.agent.protocols import get_protocol
    from effirag.env.build import _questions

    cfg = EnvConfig(questions=str(questions), holdout=30, max_questions=5)
    got, _ = _questions(cfg, get_protocol("searchr1"))
    assert [q.id for q in got] == ids[30:35]
    with pytest.raises(ConfigError, match="holdout"):
        EnvConfig(holdout=-1)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["searchr1", "hiprag"])
def test_recipe_one_grpo_step_at_a_tiny_size(protocol: str, shared_data: Path, tmp_path: Path) -> None:
    """The recipe with a tiny chat Llama for the SFT policy, 2 training questions, HF rollouts, one step: the step is
    logged (HiPRAG: its reward term), and the merged policy keeps the chat template."""
    from effirag.data.questions import load_questions
    from effirag.retrieval.index import IndexConfig, build_index
    from effirag.train.rl.grpo import GRPORunConfig
    from effirag.train.rl.log import read_steps
    from effirag.train.rl.run import run_grpo
    from tiny_models import make_tiny_model

    questions = shared_data / "musique_mini" / "questions.json"
    passages = list({p.id: p for p in load_questions(questions).passages}.values())
    build_index(passages, tmp_path / "index", config=IndexConfig(dense=False), corpus_path="mem")
    model = make_tiny_model(tmp_path / "model", arch="llama", seed=3, max_positions=4096)
    small = [
        f"env.model=hf:{model}?chat=1", f"env.index={tmp_path / 'index'}", f"env.questions={questions}",
        "env.max_questions=2", "max_steps=1", "save_steps=1", "num_generations=2", "questions_per_step=1",
        "env.engine.max_steps=2", "env.engine.max_new_tokens=8", "env.engine.max_inserted_tokens=48",
        "env.engine.max_total_tokens=1024", "rollout.generator=hf", f"output_dir={tmp_path / 'run'}",
    ]  # fmt: skip
    cfg = load_run_config(GRPORunConfig, RECIPES[protocol], small)
    res = run_grpo(cfg)
    steps = read_steps(tmp_path / "run" / "steps.jsonl")
    assert res.steps == 1 and len(steps) == 1
    assert ("reward/hiprag" in steps[0]) == (protocol == "hiprag")
    policy = tmp_path / "run" / "policy"
    assert (tmp_path / "run" / "adapter" / "adapter_config.json").is_file()
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(policy).chat_template
