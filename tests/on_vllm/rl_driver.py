"""GRPO and PPO on vLLM rollouts (``rollout.generator: vllm``) for tests/on_vllm/test_vllm_rl.py, results as JSON.

A script run in a subprocess by the test (vLLM's engine starts once, in this process, under
``if __name__ == "__main__":``):

    python rl_driver.py MODEL_DIR WORK_DIR OUT.json

Records: (1) a 2-step GRPO run: which trained tensors changed, TRL's logged trainer-vs-vLLM log-prob gap per step;
(2) after the run, the log-probs of a fixed continuation under the trainer's policy and under vLLM, both before and
after loading the trained weights into vLLM; (3) a 2-step PPO run sharing the engine (weights synced every step):
the changed tensors and the logged gap.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import bm25s  # noqa: F401  # as a trainer holding a BM25 index: numba's llvmlite loaded before vLLM starts
from vllm_support import QUESTIONS, teacher_logprobs, vllm_prompt_logprobs

FIXED = "<think> the river </think> <search> Lyon river </search>"


def _changed(before: dict[str, Any], policy: Any) -> dict[str, bool]:
    return {k: not bool((v == before[k]).all()) for k, v in policy.state_dict().items()}


def _gaps(history: list[dict[str, Any]]) -> list[list[float]]:
    keys = ("sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max")
    return [[float(r[k]) for k in keys] for r in history if keys[0] in r]


def main() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from effirag.agent import EngineConfig, get_protocol
    from effirag.env import EnvConfig
    from effirag.rewards.compose import RewardConfig
    from effirag.train.rl.grpo import GRPORunConfig, build_grpo_trainer
    from effirag.train.rl.ppo_config import PPORunConfig
    from effirag.train.rl.ppo_trainer import build_ppo, ppo_step
    from effirag.train.rl.rollout import trainer_policy
    from effirag.train.rl.rollout_split import RolloutConfig
    from effirag.types import QAExample
    from test_engine_support import LexicalRetriever

    model, work, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    questions = [QAExample(f"q{i}", q, ("Lyon",)) for i, q in enumerate(QUESTIONS)]
    engine = EngineConfig(max_steps=2, max_new_tokens=12, max_inserted_tokens=48, max_total_tokens=1024, k=1)
    rollout = RolloutConfig(generator="vllm", vllm_kv_cache_gb=0.25)
    reward = RewardConfig(cost="memory", cost_alpha=1.0)  # episodes of different lengths: non-zero advantages
    env = EnvConfig(model=str(model), engine=engine)
    cfg = GRPORunConfig(
        env=env, output_dir=str(work / "grpo"), rollout=rollout, objective=reward,
        num_generations=2, questions_per_step=2, learning_rate=0.01, max_steps=2, save_steps=2,
    )  # fmt: skip
    tok = AutoTokenizer.from_pretrained(str(model))
    policy = AutoModelForCausalLM.from_pretrained(str(model))
    start = {k: v.clone() for k, v in policy.state_dict().items()}
    proto = get_protocol("searchr1")
    parts = build_grpo_trainer(cfg, policy, tok, questions, proto, LexicalRetriever(), use_cpu=True)
    parts.trainer.train()
    trained = trainer_policy(parts.trainer)
    result: dict[str, Any] = {
        "grpo_changed": _changed(start, trained),
        "grpo_gaps": _gaps(parts.trainer.state.log_history),
        "grpo_log": parts.trainer.state.log_history,
    }

    sync = parts.rollout.generator  # the run's VLLMSync: its engine holds the weights of the last step's rollout
    prompt = tok.encode(QUESTIONS[1], add_special_tokens=True)
    fixed = tok.encode(FIXED, add_special_tokens=False)
    result["trainer_lp"] = teacher_logprobs(trained, prompt, fixed)
    result["vllm_lp_stale"] = vllm_prompt_logprobs(sync.generator.llm, prompt, fixed)
    sync(trained)  # the sync a next step would do
    result["vllm_lp_synced"] = vllm_prompt_logprobs(sync.generator.llm, prompt, fixed)
    result["sync_s"] = sync.sync_s

    ppo_cfg = PPORunConfig(
        env=env, output_dir=str(work / "ppo"), rollout=rollout,
        questions_per_step=2, samples_per_question=2, mini_batch_size=2, lr=0.01, steps=2, kl_coef=0.0,
        objective=RewardConfig(cost="memory", cost_alpha=0.01),
    )  # fmt: skip
    ppo_policy = AutoModelForCausalLM.from_pretrained(str(model))
    ppo = build_ppo(ppo_cfg, ppo_policy, None, tok, questions, proto, LexicalRetriever())
    ppo.rollout.generator = sync  # one engine for both runs (each step loads the PPO policy's weights)
    recs = [ppo_step(ppo, s) for s in range(2)]
    result["ppo_changed"] = _changed(start, ppo_policy)
    result["ppo_gaps"] = _gaps(recs)
    sync.close()
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
