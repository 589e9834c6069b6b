"""GRPO on TRL's GRPOTrainer with EffiRAG rollouts: the advantages *inside the trainer* for hand-worked groups, and
inserted tokens carrying no loss or gradient.

Rollouts come from a scripted policy over a character-level tokenizer (one token per character), so every cost is
countable by hand; the trainer's model is a tiny random-init Qwen2 (its vocabulary covers ASCII ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from effirag.agent import EngineConfig, get_protocol
from effirag.env import EnvConfig
from effirag.llm.scripted import ScriptedGenerator
from effirag.rewards.compose import RewardConfig
from effirag.train.rl.grpo import GRPORunConfig, build_grpo_trainer
from effirag.types import QAExample
from test_engine_support import LexicalRetriever
from tiny_models import make_tiny_model

torch = pytest.importorskip("torch")

Q1 = QAExample("q1", "What is the capital of France?", ("Paris",))
Q2 = QAExample("q2", "Which city is on the Rhone?", ("Lyon",))
# Q1's group: right and short (24 chars), right and long (54), wrong (23).
G1 = ["<answer> Paris </answer>", "<think> It is Paris. </think> <answer> Paris </answer>", "<answer> Rome </answer>"]
# Q2's group: all right (equal rewards), 23, 42 and 23 chars.
G2 = ["<answer> Lyon </answer>", "<think> x </think> <answer> Lyon </answer>", "<answer> Lyon </answer>"]


class CharTokenizer:
    """One token per character (ids are code points): token counts are character counts."""

    def encode(self, text: str) -> list[int]:
        ids = [ord(c) for c in text]
        assert max(ids, default=0) < 384, f"non-ASCII text {text!r} is outside the tiny model's vocabulary"
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("grpo_tiny"), arch="qwen2", seed=7)


def _trainer(model_dir: Path, tmp: Path, script: dict[str, list[str]], reward: RewardConfig, **kw: Any) -> Any:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg = GRPORunConfig(
        output_dir=str(tmp),
        num_generations=3,
        questions_per_step=2,
        objective=reward,
        scale_rewards="none" if reward.cost != "none" else "group",
        env=EnvConfig(
            engine=EngineConfig(max_steps=3, max_new_tokens=64, max_inserted_tokens=400, max_total_tokens=4096, k=1)
        ),
        **kw,
    )
    gen = ScriptedGenerator(script, CharTokenizer())
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    parts = build_grpo_trainer(
        cfg, model, tok, [Q1, Q2], get_protocol("searchr1"), LexicalRetriever(), generator=lambda _t: gen, use_cpu=True
    )
    parts.trainer.model.train()
    return parts


def _rows() -> list[dict[str, Any]]:
    return [{"prompt": q.question, "golds": list(q.answers), "qid": q.id} for q in (Q1, Q2) for _ in range(3)]


def test_cost_aware_advantage_is_the_one_the_trainer_uses(model_dir: Path, tmp_path: Path) -> None:
    """Reward = EM, memory cost = generated + inserted tokens (characters here; nothing is inserted), α = 0.5.

    Q1: r = (1, 1, 0): mean 2/3, deviations (1/3, 1/3, −2/3), population var 2/9, std 0.471405,
    z(r) = (0.707107, 0.707107, −1.414214); c = (24, 54, 23): mean 101/3, deviations (−29/3, 61/3, −32/3),
    var = (841 + 3721 + 1024)/9/3 = 5586/27 = 206.889, std 14.383630, z(c) = (−0.672067, 1.413658, −0.741591);
    A = z(r) − 0.5·z(c) = (1.043141, 0.000278, −1.043418).
    Q2 (all rewards equal): z(r) = 0; c = (23, 42, 23): mean 88/3, deviations (−19/3, 38/3, −19/3), var 722/9,
    std 8.956686, z(c) = (−0.707107, 1.414214, −0.707107); A = −0.5·z(c) = (0.353553, −0.707107, 0.353553).
    TRL (scale_rewards="none") subtracts each group's mean, which is 0, so these are its advantages.
    """
    script = {Q1.question: G1, Q2.question: G2}
    parts = _trainer(model_dir, tmp_path, script, RewardConfig(cost="memory", cost_alpha=0.5))
    out = parts.trainer._generate_and_score_completions(_rows())
    trajs = parts.rollout.last.trajectories
    assert [t.generated_tokens for t in trajs] == [24, 54, 23, 23, 42, 23]
    assert [t.inserted_tokens for t in trajs] == [0] * 6
    expected = [1.043141, 0.000278, -1.043418, 0.353553, -0.707107, 0.353553]
    assert out["advantages"].tolist() == pytest.approx(expected, abs=1e-5)


def test_plain_grpo_equal_rewards_give_zero_advantage(model_dir: Path, tmp_path: Path) -> None:
    """Without a cost, TRL standardises EM per group with its sample std (ddof = 1) + 1e-4.
    Q1: r = (1, 1, 0), mean 2/3, sample std = sqrt((1/9 + 1/9 + 4/9)/2) = 0.577350:
    A = (1/3, 1/3, −2/3) / 0.577450 = (0.577250, 0.577250, −1.154501). Q2: all rewards 1, std 0: A = (0, 0, 0)."""
    script = {Q1.question: G1, Q2.question: G2}
    parts = _trainer(model_dir, tmp_path, script, RewardConfig())
    out = parts.trainer._generate_and_score_completions(_rows())
    expected = [0.577250, 0.577250, -1.154501, 0.0, 0.0, 0.0]
    assert out["advantages"].tolist() == pytest.approx(expected, abs=1e-5)


def _loss_and_grads(trainer: Any, inputs: dict[str, Any], where: Any | None) -> tuple[float, list[Any]]:
    """The trainer's loss and parameter gradients, with the scores of the completion tokens at ``where`` (rows, K)
    changed. TRL's fused LM head turns each position's logits into the log-prob of its label and the entropy, so
    changing those two (scaled and shifted, keeping their dependence on the weights) is changing the logits there."""
    model = trainer.model
    model.zero_grad()
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, which this test does not run
    handle = None
    if where is not None:
        gen = torch.Generator().manual_seed(0)
        shift = torch.randn(*where.shape, generator=gen) * 5.0 * where
        scale = 1.0 + 3.0 * torch.rand(*where.shape, generator=gen) * where

        def hook(_m: Any, _args: Any, kwargs: Any, out: Any) -> Any:
            k = where.shape[1]  # the last K positions score the completion tokens
            lp, ent = out.log_probs, out.entropy
            out.log_probs = torch.cat([lp[:, :-k], lp[:, -k:] * scale + shift], dim=1)
            out.entropy = torch.cat([ent[:, :-k], ent[:, -k:] * scale + shift], dim=1)
            return out

        handle = model.register_forward_hook(hook, with_kwargs=True)
    try:
        loss = trainer.compute_loss(model, inputs)
        loss.backward()
    finally:
        if handle is not None:
            handle.remove()
    return float(loss.detach()), [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_inserted_tokens_carry_no_loss_or_gradient(model_dir: Path, tmp_path: Path) -> None:
    """Every episode searches once (an observation is inserted) and then answers. Large random changes to the logits
    that score inserted tokens leave loss and gradients unchanged; the same change at policy tokens does not."""
    search = "<search> Lyon Rhone </search>"
    script = {
        Q1.question: [search] * 3 + ["<answer> Paris </answer>", "<answer> Rome </answer>", "<answer> Nice </answer>"],
        Q2.question: [search] * 3 + ["<answer> Lyon </answer>", "<answer> Lyon </answer>", "<answer> Nice </answer>"],
    }
    parts = _trainer(model_dir, tmp_path, script, RewardConfig(), beta=0.04)
    inputs = parts.trainer._generate_and_score_completions(_rows())
    env = inputs["tool_mask"]  # TRL's name for env_mask: (rows, K), 1 = policy token
    assert (env == 0).any() and (env == 1).any()
    assert all(t.inserted_tokens > 0 for t in parts.rollout.last.trajectories)
    base_loss, base_grads = _loss_and_grads(parts.trainer, inputs, None)
    loss, grads = _loss_and_grads(parts.trainer, inputs, (env == 0).float())
    assert len(grads) == len(base_grads) > 0
    assert loss == pytest.approx(base_loss, abs=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads, base_grads, strict=True))
    moved, moved_grads = _loss_and_grads(parts.trainer, inputs, (env == 1).float())
    assert abs(moved - base_loss) > 1e-3
    assert not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(moved_grads, base_grads, strict=True))


def test_rollout_refuses_rebuilt_prompts_and_unknown_questions() -> None:
    """ReasonRAG rebuilds its prompt each turn (one sample per turn): GRPO's one-row-per-episode layout refuses it."""
    from effirag.train.rl.rollout import EngineRollout, TRLRollout

    script = {Q1.question: ["<query> Lyon </query>", "<evidence> x </evidence>", "<answer> Paris </answer>"]}
    gen = ScriptedGenerator(script, CharTokenizer())
    rollout = EngineRollout(get_protocol("reasonrag"), LexicalRetriever(), EngineConfig(k=1), lambda _p: gen)
    with pytest.raises(ValueError, match="rebuilds its prompt between turns"):
        rollout.run([Q1], 0, None)
    with pytest.raises(KeyError, match="not one of the 1 training questions"):
        TRLRollout(rollout, [Q1])(["Who?"], None)
    with pytest.raises(ValueError, match="share the text"):
        TRLRollout(rollout, [Q1, QAExample("q9", Q1.question, ("x",))])
