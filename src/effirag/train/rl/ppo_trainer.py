"""PPO of the agent, ours: multi-turn rollouts from EffiRAG's engine, token-level rewards, GAE, clipped losses.

One step (Dynamic Search-R1 §3, Table 1 and eqs. 4-5):

1. **Rollout** — ``questions_per_step`` questions (an epoch-wise permutation drawn from (seed, epoch)), each run
   ``samples_per_question`` times by :class:`~effirag.train.rl.rollout.EngineRollout` with the current weights on the
   token path: the ids trained on are the ids sampled, never re-tokenised text.
2. **Outcome** — the composed reward r of each episode (:mod:`effirag.rewards.compose`) made the outcome by the run's
   advantage estimator (:mod:`effirag.train.algos`): r itself (``gae``), or with ``objective.cost`` set the
   cost-discounted max(r·ε, r − α·c) of eq. 5 (``dsr1_cost``).
3. **Old and reference log-probs, old values** — no-grad forward passes of the policy (with its value head, or
   the separate critic) and of the frozen reference (only when ``kl_coef`` > 0: a copy of the start model, or with
   LoRA the policy with its adapters off, :mod:`effirag.train.rl.ppo_lora`).
   A protocol whose prompt is rebuilt between turns (ReasonRAG) is trained one sequence per turn: see
   :func:`turn_rows`.
4. **Advantages** — token rewards = −β·KL_t at policy tokens + the outcome at the last policy token; GAE over policy
   tokens only; optional whitening (:mod:`effirag.train.rl.ppo_batch`, :mod:`effirag.train.ppo`).
5. **Update** — ``ppo_epochs`` passes of shuffled mini-batches: clipped surrogate + ``vf_coef`` · clipped value loss,
   global grad-norm clipping (per model with a separate critic), AdamW over the policy's trainable parameters
   (every weight, or the LoRA adapters) and the value model's.

The value model (:mod:`effirag.train.rl.ppo_critic`) is by default a linear layer on the policy's last hidden state
(``critic: shared``): one model in memory and one forward pass give both log-probs and values, which is what a CPU
(or a 7B on one GPU) can afford; the value loss then also shapes the shared trunk, weighted by ``vf_coef``.
``critic: separate`` trains a value model of its own (Search-R1's and verl's PPO). The policy and critic run in eval
mode (dropout off) throughout, so that the ratio is exactly 1 before the first update of each step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from effirag.agent.protocols.base import AgentProtocol
from effirag.retrieval.base import Retriever
from effirag.rewards.judges import Judge
from effirag.train.objective import Objective, build_objective
from effirag.train.ppo import masked_mean
from effirag.train.rl.log import episode_stats
from effirag.train.rl.ppo_batch import PPOBatch, forward, minibatch_loss, pad_samples, shape_rewards, token_logprobs
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.ppo_critic import SeparateCritic, ValueHead, logits_and_values
from effirag.train.rl.rollout import EngineRollout
from effirag.train.turns import TurnSample, turn_samples
from effirag.types import QAExample, Trajectory


@dataclass
class PPOParts:
    """What one PPO run trains and reads (assembled by :func:`build_ppo`)."""

    cfg: PPORunConfig
    policy: Any
    ref: Any
    head: ValueHead
    tokenizer: Any
    optimizer: torch.optim.Optimizer
    rollout: EngineRollout
    questions: list[QAExample]
    objective: Objective
    critic: SeparateCritic | None = None  # critic: separate (its head is ``head``); None: the shared head
    mismatch: dict[str, float] = field(default_factory=dict)  # the last step's trainer-vs-sampler log-prob gap

    @property
    def trained(self) -> list[torch.nn.Parameter]:
        return self.policy_params + self.critic_params

    @property
    def policy_params(self) -> list[torch.nn.Parameter]:
        return [p for p in self.policy.parameters() if p.requires_grad]

    @property
    def critic_params(self) -> list[torch.nn.Parameter]:
        value_model = self.critic if self.critic is not None else self.head
        return [p for p in value_model.parameters() if p.requires_grad]

    def clip_groups(self) -> dict[str, list[torch.nn.Parameter]]:
        """The parameters whose gradient norm is clipped together, by log name: one global norm over the policy and
        its shared head, or the policy and the separate critic each on their own (two models, as verl clips them)."""
        if self.critic is None:
            return {"grad_norm": self.trained}
        return {"grad_norm": self.policy_params, "critic_grad_norm": self.critic_params}


def build_ppo(
    cfg: PPORunConfig,
    policy: Any,
    ref: Any,
    tokenizer: Any,
    questions: Sequence[QAExample],
    protocol: AgentProtocol,
    retriever: Retriever | None,
    judge: Judge | None = None,
    critic: SeparateCritic | None = None,
) -> PPOParts:
    """Value head, optimiser and rollout around a loaded ``policy`` (trained in place) and ``ref`` (frozen or None);
    the objective is built and checked here (its terms, their resources, its estimator). With a separate ``critic``
    (:func:`~effirag.train.rl.ppo_critic.load_critic`) its head is the value head and it has its own parameter group
    (``critic_lr``)."""
    from effirag.train.rl.rollout_ray import ray_rollout
    from effirag.train.rl.vllm_sync import rollout_generator

    objective = build_objective(cfg.objective, "ppo", judge, owner="PPORunConfig", field="env.judge")
    policy.eval()
    if isinstance(ref, torch.nn.Module):  # a LoRA run's reference is the policy itself, adapters off: no own weights
        ref.eval().requires_grad_(False)
    head = critic.head if critic is not None else ValueHead(int(policy.config.hidden_size), cfg.seed).to(policy.device)
    pad = tokenizer.pad_token_id
    rollout = EngineRollout(
        protocol,
        retriever,
        cfg.rollout_engine,
        rollout_generator(cfg, tokenizer),
        pad_id=0 if pad is None else int(pad),
        chunks=cfg.rollout.n_chunks,
        runner=ray_rollout(cfg, protocol),
        per_turn=True,
    )
    policy_params = [p for p in policy.parameters() if p.requires_grad]
    value_params = [p for p in (head if critic is None else critic).parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [{"params": policy_params + value_params}]
    if critic is not None:
        groups = [{"params": policy_params}, {"params": value_params, "lr": cfg.critic_lr or cfg.lr}]
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return PPOParts(cfg, policy, ref, head, tokenizer, optimizer, rollout, list(questions), objective, critic)


def step_questions(n_questions: int, step: int, per_step: int, seed: int) -> list[int]:
    """Indices of the questions of ``step``: consecutive slices of a stream of permutations, one per epoch, each drawn
    from (seed, epoch), so any step's questions are known without replaying the ones before it."""
    out = []
    for pos in range(step * per_step, (step + 1) * per_step):
        epoch, i = divmod(pos, n_questions)
        out.append(int(np.random.default_rng([seed, epoch]).permutation(n_questions)[i]))
    return out


@torch.no_grad()
def prepare(parts: PPOParts, samples: Sequence[Any], outcome: Sequence[float]) -> PPOBatch | None:
    """The step's batch (one row per sample, ``outcome[i]`` the outcome of sample i's episode) with old / reference
    log-probs, old values, rewards and advantages; None when no sample has a policy token (the policy ended every
    episode at once: there is nothing to train on)."""
    cfg = parts.cfg
    keep = [i for i, s in enumerate(samples) if s.policy_tokens > 0]
    if not keep:
        return None
    pad = parts.tokenizer.pad_token_id
    batch = pad_samples([samples[i] for i in keep], 0 if pad is None else int(pad)).to(parts.policy.device)
    logits, values = logits_and_values(parts.policy, parts.head, parts.critic, batch, cfg.temperature)
    batch.old_logp, batch.old_values = token_logprobs(logits, batch.input_ids, cfg.temperature), values
    if cfg.rollout.generator != "hf":
        parts.mismatch = sampler_mismatch(cfg, batch, token_logprobs(logits, batch.input_ids, 1.0))
    if parts.ref is not None:
        ref_logits, _ = forward(parts.ref, None, batch, cfg.temperature)
        batch.ref_logp = token_logprobs(ref_logits, batch.input_ids, cfg.temperature)
    outcomes = torch.tensor([outcome[i] for i in keep], dtype=torch.float32, device=batch.mask.device)
    shape_rewards(cfg, batch, outcomes, parts.objective.token_advantages)
    return batch


def sampler_mismatch(cfg: PPORunConfig, batch: PPOBatch, raw_logp: torch.Tensor) -> dict[str, float]:
    """The trainer's raw log-probs ``raw_logp`` [B, T] against the sampler's (vLLM's) behaviour log-probs: the gap's
    mean and max over policy tokens (TRL's names), and with ``rollout.tis_cap`` the batch's TIS weights."""
    from effirag.train.rl.vllm_sync import logprob_gap, tis_weights

    behaviour = batch.need("behaviour_logp")
    mean, top = logprob_gap(raw_logp, behaviour, batch.mask)
    out = {"sampling/sampling_logp_difference/mean": mean, "sampling/sampling_logp_difference/max": top}
    if cfg.rollout.tis_cap > 0:
        batch.tis = tis_weights(raw_logp, behaviour, batch.mask, cfg.rollout.tis_cap)
        out["sampling/importance_sampling_ratio/mean"] = float(masked_mean(batch.tis, batch.mask))
    return out


def update(parts: PPOParts, batch: PPOBatch, step: int) -> dict[str, float]:
    """``ppo_epochs`` passes of shuffled mini-batches (order drawn from (seed, step)); mean statistics."""
    cfg = parts.cfg
    order = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    rows = batch.input_ids.shape[0]
    stats: dict[str, list[float]] = {}
    max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
    for _ in range(cfg.ppo_epochs):
        perm = torch.randperm(rows, generator=order)
        for start in range(0, rows, cfg.mini_batch_size):
            mb = batch.rows(perm[start : start + cfg.mini_batch_size].to(batch.mask.device))
            logits, values = logits_and_values(parts.policy, parts.head, parts.critic, mb, cfg.temperature)
            loss, st = minibatch_loss(cfg, logits, values, mb)
            parts.optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            norms = {k: float(torch.nn.utils.clip_grad_norm_(ps, max_norm)) for k, ps in parts.clip_groups().items()}
            parts.optimizer.step()
            for k, v in {**st, "loss": float(loss.detach()), **norms}.items():
                stats.setdefault(k, []).append(v)
    return {k: float(np.mean(v)) for k, v in stats.items()}


def turn_rows(trajectories: Sequence[Trajectory], outcome: Sequence[float]) -> list[TurnSample]:
    """PPO's training rows: one per turn of each episode (:func:`~effirag.train.turns.turn_samples`; an append-only
    episode is one row), each with the prompt the policy saw at that turn, its mask over that turn's sampled tokens,
    and its episode's outcome; an episode the policy ended at once has none.

    Credit: the episode's outcome is placed at the last policy token of *every* one of its turn rows, and GAE runs
    within each row against the value head. With the configs' γ = λ = 1 and the outcome the only non-KL reward, a
    token's return is then the outcome less the KL penalties after it in its own turn: what GAE over the concatenated
    episode would give, except that the later turns' KL penalties are not charged to it, and without bootstrapping
    across a rebuilt prompt (the next turn's value is read under a different context). With γ < 1 an earlier turn
    is not discounted for the turns after it. Sharing the episode's *advantage* instead would need an episode-level
    baseline that PPO's per-token value head does not give; this choice keeps it.

    Weight: PPO's losses are means over all policy tokens of a mini-batch, so splitting an episode into turns leaves
    each of its tokens counted once and the episode weighed as its policy tokens, exactly as an append-only episode
    is; :func:`~effirag.train.turns.episode_weights` (1 / turns) is for per-sequence means and would here weigh a
    ReasonRAG token below a Search-R1 one, so it is not applied."""
    return turn_samples(trajectories, outcome)


def ppo_step(parts: PPOParts, step: int) -> dict[str, Any]:
    """Rollout, rewards, advantages and update of step ``step`` (0-based); its log record (``step`` is 1-based)."""
    cfg = parts.cfg
    t0 = time.perf_counter()
    rows = [parts.questions[i] for i in step_questions(len(parts.questions), step, cfg.questions_per_step, cfg.seed)]
    rows = [q for q in rows for _ in range(cfg.samples_per_question)]
    rollout = parts.rollout.run(rows, step, parts.policy)
    trajs = rollout.trajectories
    group = cfg.samples_per_question
    components = parts.objective.components(trajs, [list(q.answers) for q in rows], group)
    outcome = parts.objective.outcomes(components, trajs, group)
    t1 = time.perf_counter()
    turns = turn_rows(trajs, outcome)
    batch = prepare(parts, [t.sample for t in turns], [t.reward for t in turns])
    t2 = time.perf_counter()
    rec: dict[str, Any] = {"step": step + 1, "learning_rate": cfg.lr}
    if batch is not None:
        rec.update(update(parts, batch, step))
        rec["kl"] = float(masked_mean(batch.need("kl"), batch.mask))
        rec["clip_ratio/region_mean"] = rec["clip_fraction"]
        rec["value_mean"] = float(masked_mean(batch.need("old_values"), batch.mask))
    rec["empty_episodes"] = len(trajs) - len({t.episode for t in turns})
    rec["turn_rows"] = len(turns)
    rec["reward"] = float(np.mean(outcome))
    rec.update({f"reward/{k}": float(np.mean(v)) for k, v in components.items()})
    rec["em"] = rec["reward/em"]
    rec.update(episode_stats(rollout))
    rec.update(parts.mismatch)
    rec["logprob_s"] = t2 - t1
    rec["update_s"] = time.perf_counter() - t2
    rec["step_s"] = time.perf_counter() - t0
    return rec
