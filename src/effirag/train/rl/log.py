"""The per-step JSONL log of an RL run: reward and its components, answer quality, efficiency, TRL's optimisation
statistics, the share of searches per retrieval mode (``mode_share/<mode>``) and where the step's seconds went.

One record per optimiser step in ``OUTPUT_DIR/steps.jsonl``. Episode statistics come from the rollout's trajectories
(per question = per trajectory, averaged over the step's rows); TRL's own logged values (``kl``, ``entropy``,
``clip_ratio/*``, ``loss``, ``grad_norm``, the reward function's ``reward/*`` components) are copied. Seconds:
``generation_s`` / ``retrieval_s`` summed over the step's episodes (batched generation time split among them),
``rollout_s`` the rollout's wall time, ``sync_s`` the part of it spent building the step's generator from the policy
(vLLM: loading the trainer's weights into the engine; the first step also starts the engine); with a
:class:`CallTimer` attached (:func:`instrument`), ``reward_s`` (the reward functions), ``logprob_s`` (TRL's log-prob
passes without gradient: old and reference log-probs) and ``overhead_s`` (EffiRAG's own share: the rollout's wall time
beyond sync, generation and retrieval — episode bookkeeping, parsing, token assembly — plus the reward); ``update_s``
is the rest of the step (the loss's forward and backward pass, the optimiser, TRL's bookkeeping).
On resume, records of steps after the checkpoint are dropped before training continues, so the log has each step once.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from effirag.train.rl.rollout import EngineRollout, RolloutBatch
from effirag.types import Action

TRL_KEYS = ("loss", "grad_norm", "learning_rate", "kl", "entropy", "reward", "reward_std", "frac_reward_zero_std")


def read_steps(path: str | Path) -> list[dict[str, Any]]:
    """The records of a steps.jsonl log, in order."""
    p = Path(path)
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def episode_stats(rollout: RolloutBatch) -> dict[str, float]:
    """Means over a rollout's episodes: format, tokens, searches and search-free reasoning steps per question."""
    trajs = rollout.trajectories
    n = max(1, len(trajs))
    return {
        "questions": float(len(trajs)),
        "format_rate": sum(t.format_ok for t in trajs) / n,
        "generated_tokens_per_q": sum(t.generated_tokens for t in trajs) / n,
        "inserted_tokens_per_q": sum(t.inserted_tokens for t in trajs) / n,
        "searches_per_q": sum(t.n_searches for t in trajs) / n,
        # steps that answer without a search (HiPRAG's non-search step, TeaRAG's memory step): the efficient action
        # the process rewards select, so its rate over training shows whether it is being sampled at all
        "reasoning_steps_per_q": sum(s.action is Action.REASON for t in trajs for s in t.steps) / n,
        "generation_s": rollout.generation_s,
        "retrieval_s": rollout.retrieval_s,
        "rollout_s": rollout.rollout_s,
        "sync_s": rollout.sync_s,
        **mode_shares(trajs),
    }


class CallTimer:
    """Wall seconds spent inside wrapped callables since the last :meth:`reset`, summed per bucket."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def reset(self) -> None:
        self.seconds.clear()

    def wrap(self, fn: Callable[..., Any], bucket: Callable[[], str | None]) -> Callable[..., Any]:
        """``fn`` timed into the bucket that ``bucket()`` names at call time (None: not timed)."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            name = bucket()
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if name is not None:
                    self.seconds[name] += time.perf_counter() - t0

        timed.__name__ = getattr(fn, "__name__", "timed")
        return timed


def instrument(trainer: Any) -> CallTimer:
    """Time a TRL GRPOTrainer's reward functions (``reward_s``) and its log-prob passes run without gradient (old
    and reference log-probs, ``logprob_s``); the passes with gradient belong to the update."""
    import torch

    timer = CallTimer()
    trainer.reward_funcs = [timer.wrap(f, lambda: "reward_s") for f in trainer.reward_funcs]
    trainer._get_per_token_logps_and_entropies = timer.wrap(
        trainer._get_per_token_logps_and_entropies, lambda: None if torch.is_grad_enabled() else "logprob_s"
    )
    return timer


def step_seconds(step_s: float, stats: dict[str, float], timed: dict[str, float]) -> dict[str, float]:
    """The step's seconds by part: ``timed`` holds ``reward_s`` and ``logprob_s`` (0 when not timed); the rollout's
    ``sync_s`` (``stats``, 0 when absent) is its own part, not overhead."""
    reward_s, logprob_s = timed.get("reward_s", 0.0), timed.get("logprob_s", 0.0)
    engine_s = max(0.0, stats["rollout_s"] - stats.get("sync_s", 0.0) - stats["generation_s"] - stats["retrieval_s"])
    return {
        "step_s": step_s,
        "reward_s": reward_s,
        "logprob_s": logprob_s,
        "overhead_s": engine_s + reward_s,
        "update_s": max(0.0, step_s - stats["rollout_s"] - reward_s - logprob_s),
    }


def mode_shares(trajectories: Any) -> dict[str, float]:
    """``mode_share/<mode>``: the share of the episodes' searches that used each retrieval mode (RouteRAG's routing
    over training); empty when no episode searched."""
    modes = [s.mode for t in trajectories for s in t.steps if s.query is not None and s.mode]
    return {f"mode_share/{m}": modes.count(m) / len(modes) for m in sorted(set(modes))}


class StepLog(TrainerCallback):  # type: ignore[misc]
    """Writes one JSON record per optimiser step to ``path`` (see the module docstring)."""

    def __init__(self, path: str | Path, rollout: EngineRollout, timer: CallTimer | None = None) -> None:
        self.path = Path(path)
        self.rollout = rollout
        self.timer = timer
        self._t0 = time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_file():  # a resumed run: keep the steps up to the checkpoint it continues from
            kept = [r for r in read_steps(self.path) if r["step"] <= state.global_step]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._t0 = time.perf_counter()
        if self.timer is not None:
            self.timer.reset()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        logs = logs or {}
        if "loss" not in logs:  # the end-of-training summary, not a step
            return
        step_s = time.perf_counter() - self._t0
        rec: dict[str, Any] = {"step": int(state.global_step)}
        numbers = {k: float(v) for k, v in logs.items() if isinstance(v, int | float)}  # TRL logs None for no data
        rec.update(
            {k: v for k, v in numbers.items() if k in TRL_KEYS or k.startswith(("reward/", "clip_ratio/", "sampling/"))}
        )
        rec.update(episode_stats(self.rollout.last))
        rec["em"] = rec.get("reward/em", float("nan"))
        rec.update(step_seconds(step_s, rec, dict(self.timer.seconds) if self.timer else {}))
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")


def plot_steps(steps_path: str | Path, png: str | Path, loss_label: str = "GRPO loss") -> None:
    """Loss and reward curves of a steps.jsonl log: loss on the left; the scalar reward (``reward/total``) and EM on
    the right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = read_steps(steps_path)
    x = [r["step"] for r in steps]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.plot(x, [r.get("loss", float("nan")) for r in steps])
    left.set_xlabel("optimiser step")
    left.set_ylabel(loss_label)
    for key in ("reward/total", "em"):
        right.plot(x, [r.get(key, float("nan")) for r in steps], label=key)
    right.set_xlabel("optimiser step")
    right.legend()
    for ax in (left, right):
        ax.grid(alpha=0.3)
    fig.suptitle(Path(steps_path).parent.name)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
