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
from typing import Any

from effirag.agent import EngineConfig, run_episodes
from effirag.agent.protocols.base import AgentProtocol
from effirag.llm.base import TokenGenerator
from effirag.retrieval.base import Retriever
from effirag.train.samples import EpisodeSample, episode_samples
from effirag.types import QAExample, Trajectory

GeneratorFactory = Callable[[Any], TokenGenerator]


def trainer_generator(trainer: Any) -> TokenGenerator:
    """An HF generator over the trainer's live policy (weights shared, not copied) and its tokenizer."""
    from effirag.llm.hf import HFGenerator

    model = trainer.accelerator.unwrap_model(trainer.model)
    return HFGenerator.from_loaded(model, trainer.processing_class, name="policy")


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
    Round r of the rollout at optimiser step s samples with seed ``engine.seed + 1000·s + r``, so a resumed run
    samples what an uninterrupted one would.
    """

    def __init__(
        self,
        questions: Sequence[QAExample],
        protocol: AgentProtocol,
        retriever: Retriever | None,
        engine: EngineConfig,
        generator: GeneratorFactory = trainer_generator,
    ) -> None:
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
        self.last = RolloutStats()

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any] | None]:
        t0 = time.perf_counter()
        missing = [p for p in prompts if p not in self.by_prompt]
        if missing:
            raise KeyError(f"rollout prompt {missing[0]!r} is not one of the {len(self.by_prompt)} training questions")
        step = int(trainer.state.global_step)
        seed = None if self.engine.seed is None else self.engine.seed + 1000 * step
        cfg = dataclasses.replace(self.engine, n=1, token_ids=True, seed=seed)
        gen = self.generator(trainer)
        trajs = run_episodes(gen, self.retriever, self.protocol, [self.by_prompt[p] for p in prompts], cfg)
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

    def _one_sample(self, traj: Trajectory, filler: int) -> EpisodeSample:
        samples = episode_samples(traj)
        if len(samples) > 1:
            raise ValueError(
                f"protocol {self.protocol.name!r} rebuilds its prompt between turns ({len(samples)} samples in one "
                "episode): GRPO trains one sequence per episode and needs an append-only protocol"
            )
        if samples:
            return samples[0]
        # The policy ended at once (an end-of-sequence token, which backends do not return): one untrained padding
        # token stands for the empty completion so that the row still has a sequence; its mask is 0 (no loss).
        prompt = traj.extras["token_segments"][0][1]
        return EpisodeSample(traj.question_id, traj.sample_index, tuple(prompt), (filler,), (0,), (0.0,))
