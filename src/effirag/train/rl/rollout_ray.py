"""A training step's rollout chunks on Ray actors, sampled with the trainer's current weights.

Each actor builds, once, what the trainer holds (:mod:`effirag.train.rl.sources`): the policy network from the run's
``env.model`` (wrapped in the run's LoRA adapters when it has them, so that parameter names match), its tokenizer,
and its own retriever (the run's ``env.index`` loaded in the actor, or a client of its ``env.retriever`` URL). Before
each step the trainer's policy weights (the unwrapped model's ``state_dict``, on the CPU) are put once in Ray's object
store and every actor loads them strictly, so the actors sample from the policy being trained. Chunk i goes to actor
i mod N (an actor runs its calls in the order they were sent); the chunks' trajectories come back in row order.

A chunk keeps its seed wherever it runs (:mod:`effirag.train.rl.rollout_split`), so the episodes equal those of the
same chunks in the trainer's process when the actors compute on the same kind of device as the trainer.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from effirag.agent import EngineConfig, run_episodes
from effirag.agent.protocols.base import AgentProtocol
from effirag.distributed import import_ray, join_or_start
from effirag.retrieval.base import Retriever
from effirag.train.rl.rollout_split import Job, RolloutConfig
from effirag.types import QAExample, Trajectory

log = logging.getLogger(__name__)

WorkerFactory = Callable[[], tuple[Any, Any, Retriever | None]]
"""Builds one actor's (policy network, tokenizer, retriever); pickled to the actors, so a module-level function or a
``functools.partial`` of one."""


def rollout_worker(cfg: Any) -> tuple[Any, Any, Retriever | None]:
    """(policy network, tokenizer, retriever) of a GRPO or PPO run config, built in an actor; the network is on the
    actor's GPU when ``rollout.ray_gpus`` > 0."""
    from transformers import AutoTokenizer

    from effirag.env import make_retriever
    from effirag.train.rl.sources import policy_folder, policy_network

    tokenizer = AutoTokenizer.from_pretrained(policy_folder(cfg))
    model = policy_network(cfg)
    if cfg.rollout.ray_gpus > 0:
        model.to("cuda")
    return model, tokenizer, make_retriever(cfg.env, tokenizer)


def _absolute(cfg: Any) -> Any:
    """``cfg`` with its file paths absolute: an actor may not run in the trainer's working directory."""
    return dataclasses.replace(cfg, env=cfg.env.absolute())


class _Worker:
    """One actor: its policy, generator and retriever; loads weights, runs chunks."""

    def __init__(self, make_worker: WorkerFactory, protocol: AgentProtocol) -> None:
        from effirag.llm.hf import HFGenerator

        self.model, tokenizer, self.retriever = make_worker()
        self.model.eval()
        self.generator = HFGenerator.from_loaded(self.model, tokenizer, name="policy")
        self.protocol = protocol

    def load(self, weights: dict[str, Any]) -> None:
        self.model.load_state_dict(weights, strict=True)

    def run(self, rows: list[QAExample], config: EngineConfig) -> list[Trajectory]:
        return run_episodes(self.generator, self.retriever, self.protocol, rows, config)


class RayRollout:
    """``RayRollout(make_worker, protocol, split)(policy, jobs)``: the jobs' trajectories, one list per job, sampled
    by ``split.ray_actors`` actors with the ``policy`` network's current weights (see the module docstring).

    The actors start on the first call (joining or starting Ray as :func:`effirag.distributed.join_or_start` says)
    and live until :meth:`close`.
    """

    def __init__(self, make_worker: WorkerFactory, protocol: AgentProtocol, split: RolloutConfig) -> None:
        if split.ray_actors < 1:
            raise ValueError(f"RayRollout needs ray_actors >= 1, got {split.ray_actors}")
        self.ray = import_ray("RolloutConfig", "ray_actors")  # fail before any model is loaded
        self.make_worker, self.protocol, self.split = make_worker, protocol, split
        self.actors: list[Any] = []
        self.started = False

    def _start(self) -> None:
        s = self.split
        self.started = join_or_start(self.ray, s.ray_address or None, s.ray_actors * s.ray_cpus)
        actor_cls = self.ray.remote(num_cpus=s.ray_cpus, num_gpus=s.ray_gpus)(_Worker)
        self.actors = [actor_cls.remote(self.make_worker, self.protocol) for _ in range(s.ray_actors)]
        log.info("rollouts on %d Ray actors", len(self.actors))

    def __call__(self, policy: Any, jobs: Sequence[Job]) -> list[list[Trajectory]]:
        if not self.actors:
            self._start()
        ray = self.ray
        weights = {k: v.detach().to("cpu") for k, v in policy.state_dict().items()}
        ref = ray.put(weights)
        ray.get([a.load.remote(ref) for a in self.actors])  # an actor's load error is raised here
        refs = [self.actors[i % len(self.actors)].run.remote(rows, cfg) for i, (rows, cfg) in enumerate(jobs)]
        return list(ray.get(refs))

    def close(self) -> None:
        """Stop the actors, and Ray if this rollout started it."""
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []
        if self.started:
            self.ray.shutdown()
            self.started = False


def ray_rollout(cfg: Any, protocol: AgentProtocol) -> RayRollout | None:
    """The Ray rollout of a GRPO or PPO run config (None when ``rollout.ray_actors`` is 0): actors built by
    :func:`rollout_worker` from the config."""
    if not cfg.rollout.ray_actors:
        return None
    return RayRollout(partial(rollout_worker, _absolute(cfg)), protocol, cfg.rollout)
