"""Episode → training sample, token in, token out: the ids the policy saw and produced, which of them it produced,
and the log-probabilities it sampled them with.

The rollout engine's token path (``EngineConfig(token_ids=True)`` over a
:class:`~effirag.llm.base.TokenGenerator`) feeds the generator ids, never re-encoded text, and records each
episode's segments in ``trajectory.extras["token_segments"]`` as ``[kind, ids, logprobs]``: ``prompt`` (the
encoded prompt), ``generated`` (a turn's sampled ids and their behaviour log-probs), ``inserted`` (a retrieved
observation) and ``feedback`` (engine feedback). A sample is a prompt segment and everything after it up to the next
prompt segment, so the tokens scored are exactly the tokens sampled.

Append-only protocols give one sample per episode: the prompt, then policy turns and inserted observations in order.
A protocol whose prompt is rebuilt between turns (ReasonRAG's stages) gives one sample per turn, each with the
prompt the policy was actually shown at that turn. Untrained tokens after the last policy turn of a sample (an
observation that no turn followed) carry no loss and are dropped.

Where the protocol's parser keeps less text than the turn sampled (or a stop string ends inside a token), every
sampled id stays in the context and in the sample: the ids are the truth, the text transcript is for parsing. An
end-of-sequence token is not returned by the backends, so it is in neither. The behaviour log-probs are the
backend's: for the HF backend the model's own distribution (log-softmax of the raw logits), which is the sampling
distribution at temperature 1; at another temperature a trainer rescales the logits itself (TRL divides by its
``temperature``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from effirag.errors import DataError
from effirag.types import Trajectory

POLICY_KINDS = frozenset({"generated"})
UNTRAINED_KINDS = frozenset({"inserted", "feedback"})


@dataclass(frozen=True)
class EpisodeSample:
    """One training sequence: ``prompt_ids + completion_ids`` as the policy saw them.

    ``mask[j]`` is 1 where ``completion_ids[j]`` was sampled by the policy and 0 where the environment inserted it
    (TRL's ``env_mask``). ``old_logprobs[j]`` is the behaviour log-probability of a policy token as sampled (0.0 at
    inserted positions); None when the backend gave none (a scripted generator). ``turn`` numbers the samples of one
    episode (always 0 for append-only protocols). ``rewards`` holds the episode's reward components by name.
    """

    question_id: str
    sample_index: int
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    mask: tuple[int, ...]
    old_logprobs: tuple[float, ...] | None
    turn: int = 0
    rewards: Mapping[str, float] = field(default_factory=dict)

    @property
    def input_ids(self) -> tuple[int, ...]:
        return self.prompt_ids + self.completion_ids

    @property
    def full_mask(self) -> tuple[int, ...]:
        """Mask over :attr:`input_ids`: 0 for the prompt, then :attr:`mask`."""
        return (0,) * len(self.prompt_ids) + self.mask

    @property
    def policy_tokens(self) -> int:
        return sum(self.mask)

    @property
    def inserted_tokens(self) -> int:
        return len(self.mask) - sum(self.mask)


def _segments(traj: Trajectory) -> list[tuple[str, list[int], list[float] | None]]:
    raw = traj.extras.get("token_segments")
    where = f"trajectory {traj.question_id!r} sample {traj.sample_index}"
    if not isinstance(raw, list) or not raw:
        raise DataError(f"{where} has no extras['token_segments'] (run the engine with EngineConfig(token_ids=True))")
    out = []
    for i, seg in enumerate(raw):
        kind, ids, lps = seg
        if kind != "prompt" and kind not in POLICY_KINDS and kind not in UNTRAINED_KINDS:
            raise DataError(f"{where}: token segment {i} has unknown kind {kind!r}")
        if lps is not None and len(lps) != len(ids):
            raise DataError(f"{where}: token segment {i} has {len(lps)} logprobs for {len(ids)} ids")
        out.append((str(kind), [int(x) for x in ids], None if lps is None else [float(x) for x in lps]))
    if out[0][0] != "prompt":
        raise DataError(f"{where}: token segments start with {out[0][0]!r}, not the prompt")
    return out


def episode_samples(traj: Trajectory, rewards: Mapping[str, float] | None = None) -> list[EpisodeSample]:
    """The training samples of one engine episode (one per prompt segment that a policy turn follows)."""
    samples: list[EpisodeSample] = []
    groups: list[list[tuple[str, list[int], list[float] | None]]] = []
    for seg in _segments(traj):
        if seg[0] == "prompt":
            groups.append([seg])
        else:
            groups[-1].append(seg)
    for group in groups:
        body = group[1:]
        while body and body[-1][0] not in POLICY_KINDS:
            body.pop()  # untrained tail: no loss on it
        if not body:
            continue
        ids: list[int] = []
        mask: list[int] = []
        lps: list[float] | None = []
        for kind, seg_ids, seg_lps in body:
            policy = kind in POLICY_KINDS
            ids += seg_ids
            mask += [int(policy)] * len(seg_ids)
            if lps is not None and policy and seg_lps is None:
                lps = None
            elif lps is not None:
                lps += seg_lps if policy and seg_lps is not None else [0.0] * len(seg_ids)
        samples.append(
            EpisodeSample(
                question_id=traj.question_id,
                sample_index=traj.sample_index,
                prompt_ids=tuple(group[0][1]),
                completion_ids=tuple(ids),
                mask=tuple(mask),
                old_logprobs=None if lps is None else tuple(lps),
                turn=len(samples),
                rewards=dict(rewards or {}),
            )
        )
    return samples


def samples_from_episodes(
    trajectories: Sequence[Trajectory], rewards: Sequence[Mapping[str, float]] | None = None
) -> list[EpisodeSample]:
    """All samples of ``trajectories`` in order; ``rewards[i]`` (components by name) goes with trajectory i."""
    if rewards is not None and len(rewards) != len(trajectories):
        raise ValueError(f"{len(rewards)} reward dicts for {len(trajectories)} trajectories")
    out: list[EpisodeSample] = []
    for i, t in enumerate(trajectories):
        out += episode_samples(t, None if rewards is None else rewards[i])
    return out


def sample_record(sample: EpisodeSample) -> dict[str, Any]:
    """A JSON-ready dict of one sample (ids, mask, logprobs, rewards) for preference-data or debugging files."""
    return {
        "question_id": sample.question_id,
        "sample_index": sample.sample_index,
        "turn": sample.turn,
        "prompt_ids": list(sample.prompt_ids),
        "completion_ids": list(sample.completion_ids),
        "mask": list(sample.mask),
        "old_logprobs": None if sample.old_logprobs is None else list(sample.old_logprobs),
        "rewards": dict(sample.rewards),
    }
