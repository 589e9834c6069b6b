"""Measure Dynamic Search-R1's latency coefficients on a running backend: c_g (seconds per generated token) and c_e
(seconds per encoded — prefilled — token), the weights of :func:`effirag.rewards.cost.latency_cost` (eq. 3).

Dynamic Search-R1 (§3.3, eq. 3 and the paragraph after it) defines c_g and c_e as the average latency of one generated
and one encoded (retrieved) token and profiles them "with different input and output sizes" on its own GPU and model
(0.4098 ms and 0.0568 ms for Qwen-2.5-7B on one A100), noting they must be set for each model and hardware. Its
memory-bound cost is the token count |y| and has no coefficient. ``effirag profile cost`` runs
:func:`profile_token_costs` and writes :func:`cost_config` as a YAML the dsr1 recipes take.

This module does I/O (it times real generate calls); the fit itself, :func:`fit_token_costs`, is pure. Each timed call
has P prompt tokens and G generated tokens; the model t = overhead + c_e·P + c_g·G is fitted by least squares over a
grid of (P, G) that varies both independently. G is the number of tokens the backend really generated (a model may
stop early at its end-of-sequence token), P the policy tokenizer's count of the prompt.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from effirag.llm.base import GenerationConfig, Generator

log = logging.getLogger(__name__)

FILLER = "The river town kept its old stone bridge, its market square and a library that opened every morning at nine. "


@dataclass(frozen=True)
class TokenCosts:
    """Fitted latency coefficients: ``c_g`` s/generated token, ``c_e`` s/encoded token, ``overhead_s`` per call."""

    c_g: float
    c_e: float
    overhead_s: float
    n_calls: int
    rms_residual_s: float


def fit_token_costs(
    prompt_tokens: Sequence[float], generated_tokens: Sequence[float], seconds: Sequence[float]
) -> TokenCosts:
    """Least-squares fit of t = overhead + c_e·P + c_g·G over timed calls (pure).

    Needs at least 3 calls whose (1, P, G) rows span three dimensions (P and G must both vary). A negative fitted
    coefficient (timing noise on a fast backend) is clamped to 0 and logged, since a cost cannot be negative.
    """
    p = np.asarray(prompt_tokens, dtype=np.float64)
    g = np.asarray(generated_tokens, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    if not (p.shape == g.shape == t.shape) or p.ndim != 1:
        raise ValueError(
            f"prompt_tokens, generated_tokens and seconds differ in shape: {p.shape}, {g.shape}, {t.shape}"
        )
    x = np.stack([np.ones_like(p), p, g], axis=1)  # (n_calls, 3)
    if p.size < 3 or np.linalg.matrix_rank(x) < 3:
        raise ValueError("need >= 3 timed calls in which both prompt and generated token counts vary")
    (a, c_e, c_g), *_ = np.linalg.lstsq(x, t, rcond=None)
    rms = float(np.sqrt(np.mean((x @ np.array([a, c_e, c_g]) - t) ** 2)))
    if c_g < 0 or c_e < 0:
        log.warning("negative fitted token cost (c_g=%.3g, c_e=%.3g) clamped to 0: timings too noisy", c_g, c_e)
    return TokenCosts(max(float(c_g), 0.0), max(float(c_e), 0.0), float(a), int(p.size), rms)


def _prompt_of(generator: Generator, n_tokens: int) -> tuple[str, int]:
    per_sentence = max(generator.count_tokens(FILLER), 1)
    text = FILLER * max(1, math.ceil(n_tokens / per_sentence))
    return text, generator.count_tokens(text)


def profile_token_costs(
    generator: Generator,
    *,
    prompt_tokens: Sequence[int] = (64, 512),
    new_tokens: Sequence[int] = (1, 32),
    repeats: int = 3,
    clock: Callable[[], float] = time.perf_counter,
) -> TokenCosts:
    """Time greedy ``generate`` calls over the grid ``prompt_tokens`` × ``new_tokens`` (``repeats`` each, after one
    untimed warm-up call) and fit c_g and c_e with :func:`fit_token_costs`.

    Prompt sizes are approximate (whole filler sentences); the fit uses the exact counts. ``clock`` is injectable so
    that the procedure can be tested without real time.
    """
    if repeats < 1 or len(set(prompt_tokens)) < 2 or len(set(new_tokens)) < 2:
        raise ValueError("need repeats >= 1 and at least two distinct prompt_tokens and new_tokens values")
    prompts = [_prompt_of(generator, n) for n in prompt_tokens]
    generator.generate([prompts[0][0]], GenerationConfig(max_new_tokens=min(new_tokens)))  # warm-up, untimed
    ps: list[float] = []
    gs: list[float] = []
    ts: list[float] = []
    for _ in range(repeats):
        for text, n_prompt in prompts:
            for g in new_tokens:
                t0 = clock()
                out = generator.generate([text], GenerationConfig(max_new_tokens=g))
                ts.append(clock() - t0)
                ps.append(n_prompt)
                gs.append(len(out[0][0].token_ids))
    costs = fit_token_costs(ps, gs, ts)
    log.info("%s: c_g=%.3g s/token, c_e=%.3g s/token (%d calls)", generator.name, costs.c_g, costs.c_e, len(ts))
    return costs


def cost_config(costs: TokenCosts, extends: str | None = None) -> dict[str, object]:
    """The training-config values of measured ``costs`` (pure): ``objective.c_g`` and ``objective.c_e`` in seconds per
    token, under ``extends: RECIPE`` when given (then the file is a whole run config: the recipe, these values)."""
    out: dict[str, object] = {"extends": extends} if extends else {}
    out["objective"] = {"c_g": float(f"{costs.c_g:.4g}"), "c_e": float(f"{costs.c_e:.4g}")}
    return out
