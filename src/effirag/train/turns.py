"""One training sequence per turn for protocols whose prompt is rebuilt every turn (ReasonRAG), with the episode's
reward and advantage shared by its turns.

ReasonRAG shows the policy a new stage prompt at every turn (the history re-rendered, not appended), so an episode is
not one token sequence: :func:`~effirag.train.samples.episode_samples` cuts it into one
:class:`~effirag.train.samples.EpisodeSample` per turn, each with the prompt the policy actually saw and its own mask
(1 on the turn's sampled tokens). :func:`turn_samples` pairs every such sample with the values of its episode, so that
a policy-gradient update scores each turn's tokens under that turn's prompt and credits the whole episode's outcome to
each of its turns: the reward r and advantage A of episode e are those of each of its samples (for GRPO, A is e's
group-relative advantage; for PPO, r is the outcome placed at the last policy token of each of e's samples).

:func:`episode_weights` gives each sample 1 / (turns of its episode), so that a loss averaged over samples can weigh
every episode once (as an append-only episode weighs) instead of once per turn. A loss averaged over tokens (PPO's)
needs no weight: splitting an episode leaves each of its tokens counted once
(:func:`effirag.train.rl.ppo_trainer.turn_rows`). Append-only protocols give one sample per episode: the expansion is
then the identity and every weight is 1. See the README, "ReasonRAG under RL".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from effirag.train.samples import EpisodeSample, episode_samples
from effirag.types import Trajectory


@dataclass(frozen=True)
class TurnSample:
    """One training sequence of one turn and the values it shares with its episode's other turns."""

    sample: EpisodeSample
    episode: int  # index of its episode in the batch
    reward: float  # the episode's reward
    advantage: float  # the episode's advantage (0.0 where the trainer computes its own from the reward)


def turn_samples(
    trajectories: Sequence[Trajectory], rewards: Sequence[float], advantages: Sequence[float] | None = None
) -> list[TurnSample]:
    """Every turn of every episode as its own sample, in episode then turn order, each carrying its episode's
    ``rewards[e]`` and ``advantages[e]``. An episode whose policy ended at once has no turn to train and contributes
    no sample."""
    if len(rewards) != len(trajectories):
        raise ValueError(f"{len(rewards)} rewards for {len(trajectories)} trajectories")
    if advantages is not None and len(advantages) != len(trajectories):
        raise ValueError(f"{len(advantages)} advantages for {len(trajectories)} trajectories")
    out: list[TurnSample] = []
    for e, traj in enumerate(trajectories):
        adv = 0.0 if advantages is None else float(advantages[e])
        for sample in episode_samples(traj, {"total": float(rewards[e])}):
            out.append(TurnSample(sample, e, float(rewards[e]), adv))
    return out


def episode_weights(samples: Sequence[TurnSample]) -> list[float]:
    """1 / (number of samples of the same episode) per sample: each episode sums to 1."""
    turns = Counter(s.episode for s in samples)
    return [1.0 / turns[s.episode] for s in samples]
