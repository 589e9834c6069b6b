"""Episode → training sample, token in, token out: the ids the policy saw and produced, which of them it produced,
and the log-probabilities it sampled them with.

The rollout engine's token path (``EngineConfig(token_ids=True)`` over a
:class:`~effirag.llm.base.TokenGenerator`) feeds the generator ids, never re-encoded text, and records each
episode's token ledger in ``trajectory.tokens`` (:class:`~effirag.types.TokenSegment`: kind, ids, behaviour
log-probs): ``prompt`` (the encoded prompt), ``generated`` (a turn's sampled ids and their behaviour log-probs),
``inserted`` (a retrieved observation) and ``feedback`` (engine feedback). A sample is a prompt segment and everything
after it up to the next prompt segment, so the tokens scored are exactly the tokens sampled. :func:`flatten` is the
one place a ledger becomes ids, a loss mask and behaviour log-probs: RL samples and SFT's labels
(:func:`effirag.train.masking.encode_segments`) both come from it.

Append-only protocols give one sample per episode: the prompt, then policy turns and inserted observations in order.
A protocol whose prompt is rebuilt between turns (ReasonRAG's stages) gives one sample per turn, each with the
prompt the policy was actually shown at that turn. Untrained tokens after the last policy turn of a sample (an
observation that no turn followed) carry no loss and are dropped, and a turn that sampled no token gives no sample.

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
from effirag.types import TokenKind, TokenSegment, Trajectory


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


def flatten(segments: Sequence[TokenSegment]) -> tuple[list[int], list[int], list[float] | None]:
    """The ids of ``segments`` in order, the loss mask (1 on ``generated`` ids, 0 elsewhere) and the behaviour
    log-probs (0.0 at untrained ids; None when a generated segment has none)."""
    ids: list[int] = []
    mask: list[int] = []
    lps: list[float] | None = []
    for seg in segments:
        ids += seg.ids
        mask += [int(seg.trained)] * len(seg.ids)
        if lps is not None and seg.trained and seg.logprobs is None:
            lps = None
        elif lps is not None:
            lps += seg.logprobs if seg.trained and seg.logprobs is not None else [0.0] * len(seg.ids)
    return ids, mask, lps


def ledger(traj: Trajectory) -> list[TokenSegment]:
    """The trajectory's token ledger, which must start with its prompt (DataError names the episode otherwise)."""
    where = f"trajectory {traj.question_id!r} sample {traj.sample_index}"
    if not traj.tokens:
        raise DataError(f"{where} has no token ledger (run the engine with EngineConfig(token_ids=True))")
    if traj.tokens[0].kind is not TokenKind.PROMPT:
        raise DataError(f"{where}: its token ledger starts with {traj.tokens[0].kind.value!r}, not the prompt")
    return list(traj.tokens)


def episode_samples(traj: Trajectory, rewards: Mapping[str, float] | None = None) -> list[EpisodeSample]:
    """The training samples of one engine episode (one per prompt segment that a policy turn follows)."""
    samples: list[EpisodeSample] = []
    groups: list[list[TokenSegment]] = []
    for seg in ledger(traj):
        if seg.kind is TokenKind.PROMPT:
            groups.append([seg])
        else:
            groups[-1].append(seg)
    for group in groups:
        body = group[1:]
        while body and not body[-1].trained:
            body.pop()  # untrained tail: no loss on it
        if not body:
            continue
        ids, mask, lps = flatten(body)
        if not any(mask):
            continue  # the turn sampled no token (an end-of-sequence at once): nothing to train under this prompt
        samples.append(
            EpisodeSample(
                question_id=traj.question_id,
                sample_index=traj.sample_index,
                prompt_ids=group[0].ids,
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
