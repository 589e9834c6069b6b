"""TRL's ``rollout_func`` backed by EffiRAG's rollout engine: multi-turn episodes with the trainer's current weights.

TRL's GRPOTrainer hands the rollout the batch's prompts, each question repeated ``num_generations`` times in
consecutive rows. :class:`EngineRollout` maps each prompt back to its question, runs one engine episode per row on the
token path (``EngineConfig.token_ids``: ids fed back, never re-encoded), and returns per row the episode's prompt ids,
completion ids (policy turns and inserted observations, in order), the behaviour log-probs (0 at inserted positions)
and ``env_mask`` (1 = policy token), which TRL multiplies into its loss mask so inserted tokens carry no loss. The
episode's :class:`~effirag.types.Trajectory` travels as the extra field ``trajectory`` to the reward functions.

One row is one training sequence, so protocols whose prompt is rebuilt between turns (several samples per episode,
see :mod:`effirag.train.samples`) are refused here with a clear error.
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
from effirag.train.samples import EpisodeSample, episode_samples
from effirag.types import QAExample, Trajectory

GeneratorFactory = Callable[[Any], TokenGenerator]


class ChunkRunner(Protocol):
    """Runs a step's chunks elsewhere with the trainer's current weights (Ray actors:
    :class:`effirag.train.rl.rollout_ray.RayRollout`) and returns each chunk's trajectories, in chunk order."""

    def __call__(self, trainer: Any, jobs: Sequence[Job]) -> list[list[Trajectory]]: ...

    def close(self) -> None:
        """Release what the runner holds (its actors)."""


def trainer_policy(trainer: Any) -> Any:
    """The trainer's live policy network, unwrapped from accelerate (a peft model when the run uses LoRA)."""
    return trainer.accelerator.unwrap_model(trainer.model)


def trainer_generator(trainer: Any) -> TokenGenerator:
    """An HF generator over the trainer's live policy (weights shared, not copied) and its tokenizer."""
    from effirag.llm.hf import HFGenerator

    return HFGenerator.from_loaded(trainer_policy(trainer), trainer.processing_class, name="policy")


@dataclasses.dataclass
class RolloutStats:
    """What the last rollout cost and produced (read by the step log)."""

    generation_s: float = 0.0
    retrieval_s: float = 0.0
    rollout_s: float = 0.0
    trajectories: list[Trajectory] = dataclasses.field(default_factory=list)
    samples: list[EpisodeSample] = dataclasses.field(default_factory=list)


class EngineRollout:
    """``rollout_func(prompts, trainer) -> dict`` for TRL's GRPOTrainer; see the module docstring.

    ``questions``: the training questions, whose text is the dataset's ``prompt`` column (texts must be unique).
    ``engine``: budgets and sampling (``n`` and ``token_ids`` are set here: one episode per row, token path on).
    ``generator``: builds the token generator from the trainer (default: :func:`trainer_generator`).
    ``chunks``: the step's rows are split into this many contiguous chunks of whole question groups, one engine call
    each (:mod:`effirag.train.rl.rollout_split`); ``runner``: runs them elsewhere (Ray actors) instead of here.
    Round r of chunk c at optimiser step s samples with seed ``engine.seed + 1000·s + 10⁹·c + r``, so a resumed run
    samples what an uninterrupted one would, and a chunk samples the same wherever it runs.
    """

    def __init__(
        self,
        questions: Sequence[QAExample],
        protocol: AgentProtocol,
        retriever: Retriever | None,
        engine: EngineConfig,
        generator: GeneratorFactory = trainer_generator,
        *,
        chunks: int = 1,
        runner: ChunkRunner | None = None,
    ) -> None:
        if chunks < 1:
            raise ValueError(f"chunks={chunks}: must be >= 1")
        self.by_prompt: dict[str, QAExample] = {}
        for q in questions:
            if q.question in self.by_prompt:
                raise ValueError(
                    f"questions {self.by_prompt[q.question].id!r} and {q.id!r} share the text {q.question!r}"
                )
            self.by_prompt[q.question] = q
        self.protocol = protocol
        self.retriever = retriever
        self.engine = engine
        self.generator = generator
        self.chunks = chunks
        self.runner = runner
        self.last = RolloutStats()

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any] | None]:
        t0 = time.perf_counter()
        missing = [p for p in prompts if p not in self.by_prompt]
        if missing:
            raise KeyError(f"rollout prompt {missing[0]!r} is not one of the {len(self.by_prompt)} training questions")
        trajs = self._episodes(prompts, trainer)
        filler = trainer.processing_class.pad_token_id
        samples = [self._one_sample(t, 0 if filler is None else int(filler)) for t in trajs]
        self.last = RolloutStats(
            generation_s=sum(t.generation_s for t in trajs),
            retrieval_s=sum(t.retrieval_s for t in trajs),
            rollout_s=time.perf_counter() - t0,
            trajectories=trajs,
            samples=samples,
        )
        # None when the backend gives no logprobs (a script); TRL reads them only for its vLLM correction.
        logprobs = (
            None if any(s.old_logprobs is None for s in samples) else [list(s.old_logprobs or ()) for s in samples]
        )
        return {
            "prompt_ids": [list(s.prompt_ids) for s in samples],
            "completion_ids": [list(s.completion_ids) for s in samples],
            "logprobs": logprobs,
            "env_mask": [list(s.mask) for s in samples],
            "trajectory": trajs,
        }

    def jobs(self, prompts: Sequence[str], step: int) -> list[Job]:
        """The chunks of optimiser step ``step``: (rows, engine config with the chunk's seed), in row order."""
        rounds = self.engine.max_steps
        return [
            (
                [self.by_prompt[p] for p in prompts[a:b]],
                dataclasses.replace(
                    self.engine, n=1, token_ids=True, seed=chunk_seed(self.engine.seed, step, c, rounds)
                ),
            )
            for c, (a, b) in enumerate(chunk_bounds(prompts, self.chunks))
        ]

    def _episodes(self, prompts: Sequence[str], trainer: Any) -> list[Trajectory]:
        """One episode per row, in row order: each chunk here with the trainer's generator, or on the runner."""
        jobs = self.jobs(prompts, int(trainer.state.global_step))
        if self.runner is not None:
            done = self.runner(trainer, jobs)
        else:
            gen = self.generator(trainer)
            done = [run_episodes(gen, self.retriever, self.protocol, rows, cfg) for rows, cfg in jobs]
        return [t for chunk in done for t in chunk]

    def close(self) -> None:
        """Release the runner's resources (its Ray actors, which a later call starts again)."""
        if self.runner is not None:
            self.runner.close()

    def _one_sample(self, traj: Trajectory, filler: int) -> EpisodeSample:
        samples = episode_samples(traj)
        if len(samples) > 1:
            raise ValueError(
                f"protocol {self.protocol.name!r} rebuilds its prompt between turns ({len(samples)} samples in one "
                "episode): GRPO and PPO train one sequence per episode and need an append-only protocol (README, "
                "'ReasonRAG under RL')"
            )
        if samples:
            return samples[0]
        # The policy ended at once (an end-of-sequence token, which backends do not return): one untrained padding
        # token stands for the empty completion so that the row still has a sequence; its mask is 0 (no loss).
        prompt = traj.extras["token_segments"][0][1]
        return EpisodeSample(traj.question_id, traj.sample_index, tuple(prompt), (filler,), (0,), (0.0,))
