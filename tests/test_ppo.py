"""PPO loss terms (effirag.train.ppo) on examples worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from effirag.train.ppo import clip_fraction, gae, kl_k3, ppo_policy_loss, token_rewards, value_loss, whiten


def test_gae_skips_inserted_tokens() -> None:
    """mask [1, 0, 1, 1]: policy tokens at 0, 2, 3; position 1 (reward 5, value 9) is inserted and ignored.
    γ = 0.9, λ = 0.5; seen by the recursion: r = [0, 0, 1], V = [0.5, 0.6, 0.8], V after the last = 0.
      t=3: δ = 1 + 0.9·0 − 0.8 = 0.2;          A = 0.2
      t=2: δ = 0 + 0.9·0.8 − 0.6 = 0.12;       A = 0.12 + 0.45·0.2 = 0.21
      t=0: δ = 0 + 0.9·0.6 − 0.5 = 0.04;       A = 0.04 + 0.45·0.21 = 0.1345
    returns = A + V at policy tokens: [0.6345, 0, 0.81, 1.0]."""
    adv, ret = gae([0.0, 5.0, 0.0, 1.0], [0.5, 9.0, 0.6, 0.8], [1, 0, 1, 1], gamma=0.9, lam=0.5)
    assert adv.tolist() == pytest.approx([0.1345, 0.0, 0.21, 0.2])
    assert ret.tolist() == pytest.approx([0.6345, 0.0, 0.81, 1.0])


def test_gae_gamma_lambda_one_is_return_minus_value() -> None:
    """γ = λ = 1: A_t = (sum of later policy rewards) − V_t: [1 − 0.5, _, 1 − 0.6, 1 − 0.8] = [0.5, 0, 0.4, 0.2];
    a trailing inserted span (mask 0 at the end) changes nothing."""
    adv, ret = gae([0.0, 0.0, 0.0, 1.0, 7.0], [0.5, 3.0, 0.6, 0.8, 2.0], [1, 0, 1, 1, 0])
    assert adv.tolist() == pytest.approx([0.5, 0.0, 0.4, 0.2, 0.0])
    assert ret.tolist() == pytest.approx([1.0, 0.0, 1.0, 1.0, 0.0])


def test_gae_batch_equals_rows() -> None:
    rows = ([0.0, 0.0, 1.0], [0.2, 0.1, 0.3], [1, 1, 0]), ([0.0, 2.0, 0.5], [0.0, 0.4, 0.1], [0, 1, 1])
    adv, ret = gae(*(torch.tensor([r[i] for r in rows], dtype=torch.float64) for i in range(3)), gamma=0.9, lam=0.8)
    for b, (r, v, m) in enumerate(rows):
        a1, r1 = gae(r, v, m, gamma=0.9, lam=0.8)
        assert adv[b].tolist() == pytest.approx(a1.tolist())
        assert ret[b].tolist() == pytest.approx(r1.tolist())


def test_ppo_policy_loss_by_hand() -> None:
    """ρ = [1.5, 0.5, 1.1], A = [1, −2, 3], mask [1, 1, 0], ε = 0.2:
      token 0: max(−1·1.5, −1·1.2) = −1.2      (clipped term larger)
      token 1: max(2·0.5, 2·0.8) = 1.6          (clipped term larger)
      token 2: masked out.
    loss = (−1.2 + 1.6) / 2 = 0.2; clip fraction 2 / 2 = 1."""
    new = torch.log(torch.tensor([1.5, 0.5, 1.1], dtype=torch.float64))
    old = torch.zeros(3, dtype=torch.float64)
    args = (new, old, [1.0, -2.0, 3.0], [1, 1, 0], 0.2)
    assert float(ppo_policy_loss(*args)) == pytest.approx(0.2)
    assert clip_fraction(*args) == pytest.approx(1.0)


def test_ppo_policy_loss_unclipped_gradient() -> None:
    """ρ = 1 (new = old), A = [2, −1]: loss = mean(−A·ρ) = −0.5; d loss / d logp_new = −A / 2 = [−1, 0.5]."""
    new = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    loss = ppo_policy_loss(new, torch.zeros(2, dtype=torch.float64), [2.0, -1.0], [1, 1], 0.2)
    loss.backward()
    assert float(loss.detach()) == pytest.approx(-0.5)
    assert new.grad is not None and new.grad.tolist() == pytest.approx([-1.0, 0.5])


def test_inserted_tokens_leave_loss_and_gradients_unchanged() -> None:
    """Changing the log-probs at mask-0 (inserted) positions changes neither the loss nor any gradient."""
    torch.manual_seed(0)
    mask = torch.tensor([1, 0, 0, 1, 1, 0])
    old, adv = torch.randn(6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
    base = torch.randn(6, dtype=torch.float64)
    results = []
    for noise in (0.0, 5.0):
        new = (base + noise * (1 - mask)).requires_grad_(True)
        loss = ppo_policy_loss(new, old, adv, mask, 0.2)
        loss.backward()
        assert new.grad is not None
        results.append((float(loss), (new.grad * mask).tolist(), (new.grad * (1 - mask)).tolist()))
    assert results[0][0] == pytest.approx(results[1][0])
    assert results[0][1] == pytest.approx(results[1][1])
    assert results[0][2] == results[1][2] == [0.0] * 6


def test_kl_k3_by_hand() -> None:
    """logp = ln 0.5, ref = ln 0.25: ref − logp = ln 0.5 ≈ −0.693147; k3 = 0.5 + 0.693147 − 1 = 0.193147.
    Equal log-probs give 0."""
    k = kl_k3([math.log(0.5), -1.0], [math.log(0.25), -1.0])
    assert k.tolist() == pytest.approx([0.5 + math.log(2) - 1.0, 0.0])


def test_value_loss_by_hand() -> None:
    """V = [1.0, 0.0], V_old = [0.5, 0.5], R = [0.6, 1.0], clip 0.2:
      token 0: (1.0 − 0.6)² = 0.16; V_clip = 0.7 → 0.01; max 0.16
      token 1: (0 − 1)² = 1;        V_clip = 0.3 → 0.49; max 1
    loss = ½ · (0.16 + 1) / 2 = 0.29."""
    assert float(value_loss([1.0, 0.0], [0.5, 0.5], [0.6, 1.0], [1, 1], 0.2)) == pytest.approx(0.29)


def test_token_rewards_by_hand() -> None:
    """KL [0.1, 0.5, 0.2, 0.0], mask [1, 0, 1, 0], β = 0.5, outcome 1: the last policy token is 2.
    r = [−0.05, 0, −0.1 + 1, 0] = [−0.05, 0, 0.9, 0]."""
    r = token_rewards(1.0, [0.1, 0.5, 0.2, 0.0], [1, 0, 1, 0], beta=0.5)
    assert r.tolist() == pytest.approx([-0.05, 0.0, 0.9, 0.0])
    batch = token_rewards([1.0, 0.0], [[0.1, 0.5, 0.2, 0.0], [0.0, 0.0, 0.0, 0.4]], [[1, 0, 1, 0], [0, 0, 0, 1]], 0.5)
    assert batch.flatten().tolist() == pytest.approx([-0.05, 0.0, 0.9, 0.0, 0.0, 0.0, 0.0, -0.2])
    with pytest.raises(ValueError, match="no policy token"):
        token_rewards([1.0, 1.0], [[0.0, 0.0], [0.0, 0.0]], [[1, 0], [0, 0]], 0.1)


def test_whiten_by_hand() -> None:
    """x = [1, 100, 3], mask [1, 0, 1]: mean 2, population variance 1 → [−1, 0, 1]; scale only → [1, 0, 3]."""
    assert whiten([1.0, 100.0, 3.0], [1, 0, 1]).tolist() == pytest.approx([-1.0, 0.0, 1.0])
    assert whiten([1.0, 100.0, 3.0], [1, 0, 1], shift_mean=False).tolist() == pytest.approx([1.0, 0.0, 3.0])


def test_shapes_must_agree() -> None:
    with pytest.raises(ValueError, match="one shape"):
        gae([0.0, 1.0], [0.0], [1, 1])
