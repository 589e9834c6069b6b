"""The c_g / c_e profiler of Dynamic Search-R1's latency cost: the pure fit by hand, the timing loop on a fake clock."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from effirag.llm.base import Completion, GenerationConfig
from effirag.rewards.cost import latency_cost
from effirag.rewards.profiling import fit_token_costs, profile_token_costs


def test_fit_token_costs_hand_worked() -> None:
    """Four calls following t = 0.5 + 0.001·P + 0.02·G exactly:
    (P, G) = (100, 10) → 0.5 + 0.1 + 0.2 = 0.8; (1000, 10) → 0.5 + 1.0 + 0.2 = 1.7;
    (100, 50) → 0.5 + 0.1 + 1.0 = 1.6; (1000, 50) → 0.5 + 1.0 + 1.0 = 2.5.
    The least-squares fit recovers overhead 0.5, c_e 0.001, c_g 0.02 with zero residual."""
    c = fit_token_costs([100, 1000, 100, 1000], [10, 10, 50, 50], [0.8, 1.7, 1.6, 2.5])
    assert (c.overhead_s, c.c_e, c.c_g) == pytest.approx((0.5, 0.001, 0.02))
    assert c.rms_residual_s == pytest.approx(0.0, abs=1e-12) and c.n_calls == 4


def test_fit_token_costs_needs_variation_and_clamps() -> None:
    """Constant G cannot separate c_g from the overhead → refused. Times falling with P give a negative c_e → 0."""
    with pytest.raises(ValueError, match="vary"):
        fit_token_costs([10, 20, 30], [5, 5, 5], [1.0, 1.1, 1.2])
    c = fit_token_costs([100, 1000, 100, 1000], [10, 10, 50, 50], [0.8, 0.7, 1.6, 1.5])
    assert c.c_e == 0.0 and c.c_g == pytest.approx(0.02)


class FakeTimedGenerator:
    """A Generator whose every call advances a fake clock by 0.05 + 0.002·P + 0.03·G seconds, P = words in the
    prompt, G = generated tokens (it always generates max_new_tokens words)."""

    name = "fake:timed"

    def __init__(self) -> None:
        self.now = 0.0
        self.calls = 0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        self.calls += 1
        out = []
        for p in prompts:
            g = config.max_new_tokens
            self.now += 0.05 + 0.002 * self.count_tokens(p) + 0.03 * g
            out.append([Completion(" ".join(["w"] * g), tuple(range(g)), "length")])
        return out


def test_profile_token_costs_on_fake_clock() -> None:
    """Grid 2 prompt sizes × 2 new-token counts × 2 repeats = 8 timed calls + 1 warm-up; the fit recovers the fake's
    coefficients exactly: c_e = 0.002, c_g = 0.03, overhead 0.05. They then weigh a trajectory of 100 generated and
    400 inserted tokens: 100·0.03 + 400·0.002 = 3.0 + 0.8 = 3.8 s."""
    gen = FakeTimedGenerator()
    costs = profile_token_costs(gen, prompt_tokens=(20, 200), new_tokens=(1, 16), repeats=2, clock=lambda: gen.now)
    assert gen.calls == 9 and costs.n_calls == 8
    assert (costs.c_e, costs.c_g, costs.overhead_s) == pytest.approx((0.002, 0.03, 0.05))
    assert latency_cost(100, 400, costs.c_g, costs.c_e) == pytest.approx(3.8)
    with pytest.raises(ValueError, match="two distinct"):
        profile_token_costs(gen, prompt_tokens=(20,), new_tokens=(1, 16))
