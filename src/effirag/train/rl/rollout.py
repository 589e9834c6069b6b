"""The trainer-neutral rollout: one step's multi-turn engine episodes with the policy's current weights, returned as
:class:`~effirag.train.samples.EpisodeSample` batches; and TRL's ``rollout_func`` as a thin adapter over it.

:class:`EngineRollout` runs one engine episode per row on the token path (``EngineConfig.token_ids``: ids fed back,
never re-encoded) and turns each episode's token ledger (``Trajectory.tokens``) into one sample: the prompt ids, the
completion ids (policy turns and inserted observations, in order), the behaviour log-probs (0 at inserted positions)
and the mask (1 = policy token). PPO calls :meth:`EngineRollout.run` with its policy network; TRL's GRPOTrainer calls
:class:`TRLRollout`, which maps TRL's prompts back to questions and the batch to TRL's dict (``env_mask`` is the mask,
which TRL multiplies into its loss mask; the :class:`~effirag.types.Trajectory` travels as the extra field
``trajectory`` to the reward functions).

A protocol whose prompt is rebuilt between turns (ReasonRAG: several samples per episode, see
:mod:`effirag.train.samples`) gives several rows per episode. PPO takes them (``per_turn=True``: one row per turn,
``RolloutBatch.episodes`` names each row's episode); TRL's GRPO needs exactly one row per episode, so without
``per_turn`` such a protocol is refused here with a clear error (README, "ReasonRAG under RL").
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from effirag.agent import EngineConfig, run_episodes
from effirag.agent.protocols.base import AgentProtocol
from effirag.llm.base import TokenGenerator
from effirag.retrieval.base import Retriever
from effirag.train.rl.rollout_split import Job, chunk_bounds, chunk_seed
from effirag.train.samples import EpisodeSample, episode_samples, ledger
from effirag.types import QAExample, Trajectory

GeneratorFactory = Callable[[Any], TokenGenerator]
"""The live policy network → a token generator sampling from its current weights."""


class ChunkRunner(Protocol):
    """Runs a step's chunks elsewhere with the policy's current weights (Ray actors:
    :class:`effirag.train.rl.rollout_ray.RayRollout`) and returns each chunk's trajectories, in chunk order."""

    def __call__(self, policy: Any, jobs: Sequence[Job]) -> list[list[Trajectory]]: ...

    def close(self) -> None:
        """Release what the runner holds (its actors)."""


def trainer_policy(trainer: Any) -> Any:
    """A TRL trainer's live policy network, unwrapped from accelerate (a peft model when the run uses LoRA)."""
    return trainer.accelerator.unwrap_model(trainer.model)


def hf_generator(tokenizer: Any, *, chat: bool = False) -> GeneratorFactory:
    """The default factory: an HF generator over the live policy (weights shared, not copied) and ``tokenizer``;
    ``chat``: episodes start in the tokenizer's chat template (an instruct policy)."""
    from effirag.llm.hf import HFGenerator

    return lambda policy: HFGenerator.from_loaded(policy, tokenizer, name="policy", chat=chat)


@dataclasses.dataclass
class RolloutBatch:
    """One step's rollout: a trajectory per row and its samples (one per episode; with ``per_turn``, one per turn of
    each episode), in row then turn order, ``episodes[i]`` the index of sample i's trajectory; and what it cost."""

    trajectories: list[Trajectory] = dataclasses.field(default_factory=list)
    samples: list[EpisodeSample] = dataclasses.field(default_factory=list)
    episodes: list[int] = dataclasses.field(default_factory=list)
    generation_s: float = 0.0
    retrieval_s: float = 0.0
    rollout_s: float = 0.0
    sync_s: float = 0.0  # building the generator from the policy (vLLM: loading the policy's weights into it)


class EngineRollout:
    """``run(rows, step, policy) -> RolloutBatch``: one engine episode per row (see the module docstring).

    ``engine``: budgets and sampling (``n`` and ``token_ids`` are set here: one episode per row, token path on).
    ``generator``: builds the token generator from the policy network. ``pad_id``: the id standing for the empty
    completion of an episode the policy ended at once (mask 0, no loss). ``per_turn``: a protocol whose prompt is
    rebuilt between turns gives one sample per turn (PPO); False refuses it (one sample per episode: TRL's GRPO).
    ``chunks``: the step's rows are split into this many contiguous chunks of whole question groups, one engine call
    each (:mod:`effirag.train.rl.rollout_split`); ``runner``: runs them elsewhere (Ray actors) instead of here.
    Round r of chunk c at optimiser step s samples with seed ``engine.seed + 1000·s + 10⁹·c + r``, so a resumed run
    samples what an uninterrupted one would, and a chunk samples the same wherever it runs.
    """

    def __init__(
        self,
        protocol: AgentProtocol,
        retriever: Retriever | None,
        engine: EngineConfig,
        generator: GeneratorFactory,
        *,
        pad_id: int = 0,
        chunks: int = 1,
        runner: ChunkRunner | None = None,
        per_turn: bool = False,
    ) -> None:
        if chunks < 1:
            raise ValueError(f"chunks={chunks}: must be >= 1")
        self.protocol = protocol
        self.retriever = retriever
        self.engine = engine
        self.generator = generator
        self.pad_id = pad_id
        self.chunks = chunks
        self.runner = runner
        self.per_turn = per_turn
        self.last = RolloutBatch()
        # the generator of the last run's episodes (None: a runner sampled them elsewhere)
        self._sampler: TokenGenerator | None = None

    def run(self, rows: Sequence[QAExample], step: int, policy: Any) -> RolloutBatch:
        """The episodes of optimiser step ``step`` (0-based), one per row, sampled from ``policy``; kept in
        :attr:`last` for the step log."""
        t0 = time.perf_counter()
        jobs = self.jobs(rows, step)
        sync_s = 0.0
        self._sampler = None
        if self.runner is not None:
            done = self.runner(policy, jobs)
        else:
            gen = self._sampler = self.generator(policy)
            sync_s = time.perf_counter() - t0
            done = [run_episodes(gen, self.retriever, self.protocol, chunk, cfg) for chunk, cfg in jobs]
        trajs = [t for chunk in done for t in chunk]
        per_episode = [self._samples(t) for t in trajs]
        self.last = RolloutBatch(
            trajectories=trajs,
            samples=[s for ss in per_episode for s in ss],
            episodes=[e for e, ss in enumerate(per_episode) for _ in ss],
            generation_s=sum(t.generation_s for t in trajs),
            retrieval_s=sum(t.retrieval_s for t in trajs),
            rollout_s=time.perf_counter() - t0,
            sync_s=sync_s,
        )
        return self.last

    def sampler(self, policy: Any) -> TokenGenerator:
        """The generator the last :meth:`run` sampled its episodes with (the policy's weights of this step: what the
        step judge's re-answers must come from), or, when a runner sampled them elsewhere, one built from
        ``policy``."""
        return self._sampler if self._sampler is not None else self.generator(policy)

    def jobs(self, rows: Sequence[QAExample], step: int) -> list[Job]:
        """The chunks of optimiser step ``step``: (rows, engine config with the chunk's seed), in row order."""
        rounds = self.engine.max_steps
        return [
            (
                list(rows[a:b]),
                dataclasses.replace(
                    self.engine, n=1, token_ids=True, seed=chunk_seed(self.engine.seed, step, c, rounds)
                ),
            )
            for c, (a, b) in enumerate(chunk_bounds([q.question for q in rows], self.chunks))
        ]

    def close(self) -> None:
        """Release the runner's resources (its Ray actors, which a later call starts again) and the generator's (a vLLM
        engine)."""
        if self.runner is not None:
            self.runner.close()
        close = getattr(self.generator, "close", None)
        if callable(close):
            close()

    def _samples(self, traj: Trajectory) -> list[EpisodeSample]:
        samples = episode_samples(traj)
        if len(samples) > 1 and not self.per_turn:
            raise ValueError(
                f"protocol {self.protocol.name!r} rebuilds its prompt between turns ({len(samples)} samples in one "
                "episode): GRPO trains one sequence per episode and needs an append-only protocol; PPO takes it "
                "(README, 'ReasonRAG under RL')"
            )
        if samples:
            return samples
        # The policy ended at once (an end-of-sequence token, which backends do not return): one untrained padding
        # token stands for the empty completion so that the row still has a sequence; its mask is 0 (no loss).
        prompt = ledger(traj)[0].ids
        return [EpisodeSample(traj.question_id, traj.sample_index, prompt, (self.pad_id,), (0,), (0.0,))]


class TRLRollout:
    """TRL's ``rollout_func(prompts, trainer) -> dict`` over an :class:`EngineRollout`.

    ``questions``: the training questions, whose text is the dataset's ``prompt`` column (texts must be unique). The
    step is the trainer's ``state.global_step``, the policy its unwrapped model."""

    def __init__(self, rollout: EngineRollout, questions: Sequence[QAExample]) -> None:
        self.rollout = rollout
        self.by_prompt: dict[str, QAExample] = {}
        for q in questions:
            if q.question in self.by_prompt:
                raise ValueError(
                    f"questions {self.by_prompt[q.question].id!r} and {q.id!r} share the text {q.question!r}"
                )
            self.by_prompt[q.question] = q

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any] | None]:
        missing = [p for p in prompts if p not in self.by_prompt]
        if missing:
            raise KeyError(f"rollout prompt {missing[0]!r} is not one of the {len(self.by_prompt)} training questions")
        rows = [self.by_prompt[p] for p in prompts]
        batch = self.rollout.run(rows, int(trainer.state.global_step), trainer_policy(trainer))
        samples = batch.samples
        # None when the backend gives no logprobs (a script); TRL reads them only for its vLLM correction.
        logprobs = (
            None if any(s.old_logprobs is None for s in samples) else [list(s.old_logprobs or ()) for s in samples]
        )
        return {
            "prompt_ids": [list(s.prompt_ids) for s in samples],
            "completion_ids": [list(s.completion_ids) for s in samples],
            "logprobs": logprobs,
            "env_mask": [list(s.mask) for s in samples],
            "trajectory": batch.trajectories,
        }
