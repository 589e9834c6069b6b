"""QA evaluation spread over Ray actors: each actor holds its own generator and retriever (its own index, or a client
of one shared ``effirag serve retrieval``) and runs whole chunks of :func:`effirag.eval.qa.evaluate_qa`.

The unit of work is the chunk because sampling is seeded per batched engine call (the engine seeds each round of a
batch with the chunk's seed plus the round), so a chunk run anywhere gives the episodes it gives in one process; a
finer split (question by question) would change the batches and so the samples. Chunks go to whichever actor is free
next and come back in any order; :func:`~effirag.eval.qa.evaluate_qa` saves them as they arrive and orders the
trajectories by question at the end, so the report and trajectories equal a one-process run's.

Ray is an optional extra (``pip install 'effirag[distributed]'``, :mod:`effirag.distributed`); it is imported only
when a runner runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from effirag.agent.engine import run_episodes
from effirag.agent.protocols.base import AgentProtocol
from effirag.distributed import import_ray, join_or_start
from effirag.errors import ConfigError
from effirag.eval.annotate import annotate_tokens
from effirag.eval.qa import ChunkJob
from effirag.llm.base import Generator
from effirag.retrieval.base import Retriever
from effirag.types import Trajectory

log = logging.getLogger(__name__)

WorkerFactory = Callable[[], tuple[Generator, Retriever | None]]
"""Builds one actor's (generator, retriever); it is pickled to the actors, so it must be a module-level function
(or a ``functools.partial`` of one) whose module the actors can import."""


class _Worker:
    """One actor: builds its generator and retriever once, then runs the chunks it is handed."""

    def __init__(self, make_worker: WorkerFactory, protocol: AgentProtocol) -> None:
        self.generator, self.retriever = make_worker()
        self.protocol = protocol

    def run(self, chunk: list[Any], config: Any) -> list[Trajectory]:
        trajs = run_episodes(self.generator, self.retriever, self.protocol, chunk, config)
        annotate_tokens(trajs, self.protocol, self.generator.count_tokens)
        return trajs


class RayChunkRunner:
    """``RayChunkRunner(make_worker, protocol, actors=2)``: a :class:`~effirag.eval.qa.ChunkRunner` over ``actors``
    Ray actors, each reserving ``num_cpus`` / ``num_gpus``.

    It joins the Ray instance this process already started, else the cluster at ``address`` (``"auto"``: the one
    ``ray start`` runs here), else starts a local one with ``actors`` × ``num_cpus`` CPUs (shut down at the end).
    On a cluster of several machines, the paths ``make_worker`` opens (model, index) must exist on every node.
    """

    def __init__(
        self,
        make_worker: WorkerFactory,
        protocol: AgentProtocol,
        actors: int,
        *,
        address: str | None = None,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
    ) -> None:
        if actors < 1:
            raise ConfigError("RayChunkRunner", "actors", actors, "must be >= 1")
        if num_cpus < 0 or num_gpus < 0:
            raise ConfigError("RayChunkRunner", "num_cpus/num_gpus", (num_cpus, num_gpus), "must be >= 0")
        self.make_worker, self.protocol, self.actors = make_worker, protocol, actors
        self.address, self.num_cpus, self.num_gpus = address, num_cpus, num_gpus

    def run(self, jobs: Sequence[ChunkJob]) -> Iterator[tuple[int, list[Trajectory]]]:
        if not jobs:
            return
        ray = import_ray()
        started = join_or_start(ray, self.address, self.actors * self.num_cpus)
        actor_cls = ray.remote(num_cpus=self.num_cpus, num_gpus=self.num_gpus)(_Worker)
        actors = [actor_cls.remote(self.make_worker, self.protocol) for _ in range(min(self.actors, len(jobs)))]
        log.info("eval qa: %d chunks over %d Ray actors", len(jobs), len(actors))
        try:
            queue = list(jobs)
            pending: dict[Any, tuple[Any, int]] = {}

            def submit(actor: Any) -> None:
                c, chunk, cfg = queue.pop(0)
                pending[actor.run.remote(chunk, cfg)] = (actor, c)

            for actor in actors:
                if queue:
                    submit(actor)
            while pending:
                [ref], _ = ray.wait(list(pending), num_returns=1)
                actor, c = pending.pop(ref)
                trajs = ray.get(ref)  # an actor's exception is raised here, as its own type
                if queue:
                    submit(actor)
                yield c, trajs
        finally:
            for actor in actors:
                ray.kill(actor)
            if started:
                ray.shutdown()
