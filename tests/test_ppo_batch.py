"""PPO's batch of episodes: position alignment, hand-worked token rewards / GAE / cost-discounted outcomes, and the
guarantee that inserted (and prompt / padding) positions carry no loss or gradient: changing the logits, values or
log-probs there leaves the PPO loss, the gradients and the advantages unchanged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from effirag.rewards.compose import RewardConfig
from effirag.train.objective import build_objective
from effirag.train.rl.ppo_batch import (
    PPOBatch,
    forward,
    minibatch_loss,
    pad_samples,
    shape_rewards,
    token_logprobs,
)
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.ppo_trainer import ValueHead, step_questions
from effirag.train.samples import EpisodeSample
from tiny_models import make_tiny_model

CFG = PPORunConfig(whiten=False, kl_coef=0.0, gamma=1.0, lam=1.0)
GAE = build_objective(RewardConfig(), "ppo").token_advantages  # the default PPO estimator: ADVANTAGES["gae"]


def _sample(prompt: list[int], completion: list[int], mask: list[int]) -> EpisodeSample:
    return EpisodeSample("q", 0, tuple(prompt), tuple(completion), tuple(mask), None)


def test_pad_samples_aligns_column_j_with_token_j_plus_1() -> None:
    """Prompt [5, 6], completion [7, 8, 9, 10] with 9 inserted: input [5, 6, 7, 8, 9, 10]; the full mask is
    [0, 0, 1, 1, 0, 1] and column j scores token j + 1, so the mask over the 5 columns is [0, 1, 1, 0, 1]. A shorter
    second row is right-padded with the pad id and masked out."""
    b = pad_samples([_sample([5, 6], [7, 8, 9, 10], [1, 1, 0, 1]), _sample([5], [7], [1])], pad_id=0)
    assert b.input_ids.tolist() == [[5, 6, 7, 8, 9, 10], [5, 7, 0, 0, 0, 0]]
    assert b.attention.tolist() == [[1] * 6, [1, 1, 0, 0, 0, 0]]
    assert b.mask.tolist() == [[0, 1, 1, 0, 1], [1, 0, 0, 0, 0]]


def test_token_logprobs_reads_the_next_tokens_probability() -> None:
    """Vocabulary of 2, logits [0, ln 3] everywhere: p(1) = 3/4, p(0) = 1/4. Input [1, 0, 1]: columns score tokens 0
    and 1, so log-probs [ln 1/4, ln 3/4]. At temperature 2 the logits halve: p(1) = √3/(1 + √3)."""
    logits = torch.tensor([[[0.0, torch.log(torch.tensor(3.0))]] * 3])
    ids = torch.tensor([[1, 0, 1]])
    got = token_logprobs(logits, ids, 1.0)
    assert torch.allclose(got, torch.log(torch.tensor([[0.25, 0.75]])))
    s3 = 3**0.5
    assert torch.allclose(token_logprobs(logits, ids, 2.0)[0, 1], torch.log(torch.tensor(s3 / (1 + s3))))


def test_shape_rewards_hand_worked_gae_over_policy_tokens() -> None:
    """Mask [1, 0, 1], outcome 1, β = 0: token rewards [0, 0, 1]. Values [0.5, 9, 0.25] (9 at the inserted column is
    ignored), γ = λ = 1: at column 2, A = 1 + 0 − 0.25 = 0.75; at column 0, δ = 0 + 0.25 − 0.5 = −0.25 and
    A = −0.25 + 0.75 = 0.5. Returns = A + V = [1, 0, 1]."""
    b = PPOBatch(torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4), torch.tensor([[1.0, 0.0, 1.0]]))
    b.old_logp = torch.zeros(1, 3)
    b.old_values = torch.tensor([[0.5, 9.0, 0.25]])
    shape_rewards(CFG, b, torch.tensor([1.0]), GAE)
    assert b.need("rewards").tolist() == [[0.0, 0.0, 1.0]]
    assert b.need("advantages").tolist() == [[0.5, 0.0, 0.75]]
    assert b.need("returns").tolist() == [[1.0, 0.0, 1.0]]


def test_ppo_advantages_come_from_the_estimator_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The token advantages are the chosen estimator's: a run's default is ADVANTAGES["gae"], and replacing that
    entry's token function (here: advantages = 2 × the token rewards, returns = the values) changes what PPO uses."""
    from effirag.train.algos import ADVANTAGES

    b = PPOBatch(torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4), torch.tensor([[1.0, 0.0, 1.0]]))
    b.old_logp, b.old_values = torch.zeros(1, 3), torch.tensor([[0.5, 9.0, 0.25]])
    est = replace(ADVANTAGES["gae"], tokens=lambda _cfg, tb: (2 * tb.rewards, tb.values))
    monkeypatch.setitem(ADVANTAGES, "gae", est)
    shape_rewards(CFG, b, torch.tensor([1.0]), build_objective(RewardConfig(), "ppo").token_advantages)
    assert b.need("advantages").tolist() == [[0.0, 0.0, 2.0]]
    assert b.need("returns").tolist() == [[0.5, 9.0, 0.25]]


def test_kl_penalty_enters_each_policy_token_and_k1_is_the_log_ratio() -> None:
    """β = 0.5, k1: old − ref = [0.2, 5, −0.4] → KL [0.2, 0 (inserted), −0.4]; token rewards = −β·KL + outcome 1 at the
    last policy token = [−0.1, 0, 1.2]."""
    cfg = replace(CFG, kl_coef=0.5, kl_estimator="k1")
    b = PPOBatch(torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4), torch.tensor([[1.0, 0.0, 1.0]]))
    b.old_logp, b.ref_logp = torch.tensor([[-1.0, 3.0, -2.0]]), torch.tensor([[-1.2, -2.0, -1.6]])
    b.old_values = torch.zeros(1, 3)
    shape_rewards(cfg, b, torch.tensor([1.0]), GAE)
    assert torch.allclose(b.need("kl"), torch.tensor([[0.2, 0.0, -0.4]]))
    assert torch.allclose(b.need("rewards"), torch.tensor([[-0.1, 0.0, 1.2]]))


def test_step_questions_cover_every_question_once_per_epoch_and_depend_only_on_seed_and_step() -> None:
    steps = [step_questions(5, s, 2, seed=3) for s in range(5)]  # 10 picks = two epochs of 5
    flat = [i for s in steps for i in s]
    assert sorted(flat[:5]) == sorted(flat[5:]) == [0, 1, 2, 3, 4]
    assert step_questions(5, 3, 2, seed=3) == steps[3]
    assert [step_questions(5, s, 2, seed=4) for s in range(5)] != steps


def _prepared(seed: int = 0) -> tuple[PPOBatch, torch.Tensor]:
    """Two rows, mask with inserted and padding columns, random old log-probs / values / advantages / returns."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]])
    b = PPOBatch(torch.randint(0, 7, (2, 7), generator=g), torch.ones(2, 7, dtype=torch.long), mask)
    b.old_logp = -torch.rand(2, 6, generator=g)
    b.old_values, b.advantages, b.returns = (torch.randn(2, 6, generator=g) for _ in range(3))
    return b, torch.randn(2, 7, 7, generator=g)


def test_logits_and_values_at_unmasked_columns_do_not_reach_loss_or_gradient() -> None:
    """Large random changes to the logits and values of every mask-0 column (and the last position, which scores no
    token) leave the loss and its gradient unchanged, and the gradient there is 0; the same change at one policy
    column changes the loss."""
    b, logits0 = _prepared()
    b.old_logp = token_logprobs(logits0, b.input_ids, 1.0)  # ratio 1: nothing clipped before the change
    values0 = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))

    def loss_and_grads(logits: torch.Tensor, values: torch.Tensor) -> tuple[float, torch.Tensor, torch.Tensor]:
        lg, vl = logits.clone().requires_grad_(True), values.clone().requires_grad_(True)
        loss, _ = minibatch_loss(CFG, lg, vl, b)
        loss.backward()  # type: ignore[no-untyped-call]
        assert lg.grad is not None and vl.grad is not None
        return float(loss.detach()), lg.grad, vl.grad

    off = torch.cat([b.mask == 0, torch.ones(2, 1, dtype=torch.bool)], dim=1)  # [B, L]
    noise = 50 * torch.randn(2, 7, 7, generator=torch.Generator().manual_seed(2))
    base = loss_and_grads(logits0, values0)
    moved = loss_and_grads(logits0 + noise * off.unsqueeze(-1), values0 + 30.0 * (b.mask == 0))
    assert moved[0] == pytest.approx(base[0], abs=1e-6)
    assert torch.allclose(moved[1], base[1], atol=1e-6) and torch.allclose(moved[2], base[2], atol=1e-6)
    assert float(base[1][off].abs().max()) == 0.0 and float(base[2][b.mask == 0].abs().max()) == 0.0
    on = torch.zeros(2, 7, dtype=torch.bool)
    on[0, 1] = True  # a policy column
    small = 0.01 * noise * on.unsqueeze(-1)
    assert loss_and_grads(logits0 + small, values0)[0] != pytest.approx(base[0], abs=1e-5)


def test_logprobs_and_values_at_inserted_columns_do_not_change_rewards_or_advantages() -> None:
    """Old / reference log-probs and old values at mask-0 columns changed wildly: the same token rewards, advantages
    (whitened) and returns; changing the reference at policy columns changes rewards and advantages."""
    cfg = replace(CFG, kl_coef=0.1, whiten=True)
    b, _ = _prepared()
    b.ref_logp = -torch.rand(2, 6, generator=torch.Generator().manual_seed(3))
    off = b.mask == 0
    shape_rewards(cfg, b, torch.tensor([1.0, 0.5]), GAE)
    moved = PPOBatch(b.input_ids, b.attention, b.mask)
    moved.old_logp = b.need("old_logp") + 7.0 * off
    moved.ref_logp = b.need("ref_logp") - 5.0 * off
    moved.old_values = b.need("old_values") + 11.0 * off
    shape_rewards(cfg, moved, torch.tensor([1.0, 0.5]), GAE)
    for name in ("rewards", "advantages", "returns"):
        assert torch.allclose(moved.need(name), b.need(name)), name
    moved.ref_logp = moved.need("ref_logp") - 1.0 * ~off
    shape_rewards(cfg, moved, torch.tensor([1.0, 0.5]), GAE)
    assert not torch.allclose(moved.need("rewards"), b.need("rewards"))
    assert not torch.allclose(moved.need("advantages"), b.need("advantages"))


def test_inserted_logits_of_a_real_model_leave_its_parameter_gradients_unchanged(tmp_path: Path) -> None:
    """Through a tiny Qwen2 policy and its value head: a hook adds large noise to the lm_head output at every mask-0
    column; every parameter's gradient of the PPO loss is unchanged (and differs when the noise hits a policy
    column)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(make_tiny_model(tmp_path / "m", seed=3)).eval()
    head = ValueHead(64, 0)
    samples = [_sample([11, 12, 13], [40, 41, 42, 43, 44], [1, 1, 0, 0, 1]), _sample([11, 14], [50, 51], [1, 1])]
    b = pad_samples(samples, pad_id=0)
    with torch.no_grad():
        logits, values = forward(model, head, b, 1.0)
        b.old_logp, b.old_values = token_logprobs(logits, b.input_ids, 1.0), values
    shape_rewards(replace(CFG, whiten=True), b, torch.tensor([1.0, 0.0]), GAE)
    vocab = logits.shape[-1]

    def grads(where: torch.Tensor | None) -> list[torch.Tensor]:
        hook = None
        if where is not None:
            noise = 40 * torch.randn(*where.shape, vocab, generator=torch.Generator().manual_seed(5))
            hook = model.lm_head.register_forward_hook(lambda _m, _i, out: out + noise * where.unsqueeze(-1))
        model.zero_grad()
        head.zero_grad()
        lg, vl = forward(model, head, b, 1.0)
        assert vl is not None
        minibatch_loss(CFG, lg, vl, b)[0].backward()  # type: ignore[no-untyped-call]
        if hook is not None:
            hook.remove()
        params = [*model.parameters(), *head.parameters()]
        return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]

    off = torch.cat([b.mask == 0, torch.ones(2, 1, dtype=torch.bool)], dim=1)
    base, moved = grads(None), grads(off)
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(base, moved, strict=True))
    on = torch.zeros_like(off)
    on[0, 2] = True  # column 2 of row 0 scores token 40, a policy token
    assert not all(torch.allclose(x, y, atol=1e-6) for x, y in zip(base, grads(on), strict=True))
