"""How a training step's rollout is split: contiguous chunks of whole question groups, each one batched engine call
with its own seed, run in this process or on Ray actors (:mod:`effirag.train.rl.rollout_ray`).

Why chunks and not rows: the engine samples a whole batch from one seed (round r of a call seeded s uses s + r), so
the episodes of a row depend on the batch it is in. A chunk is the unit that gives the same episodes wherever it runs:
``chunks=2`` in this process and ``chunks=2`` on two actors sample the same tokens. ``chunks=1`` is one call over all
rows, the rollout of a run without this section.

Seeds (:func:`chunk_seed`): chunk c of optimiser step s is seeded ``seed + 1000·s + CHUNK_STRIDE·c`` and its round r
uses that + r. Chunk 0 keeps the unsplit seed; the rounds of an episode stay below 1000 (``engine.max_steps`` < 1000)
and steps below ``CHUNK_STRIDE / 1000`` (one million), so no two (step, chunk, round) share a seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from effirag.agent import EngineConfig
from effirag.config import check, option
from effirag.types import QAExample

CHUNK_STRIDE = 1_000_000_000
"""Seed distance between the chunks of one step: larger than any step's seed band (1000 seeds per step)."""
STEP_STRIDE = 1000
"""Seed distance between optimiser steps (the engine adds the round, < 1000, to a call's seed)."""

GENERATORS = ("hf", "vllm")
"""Rollout generators (besides vllm-server:URL, refused until implemented)."""
Job = tuple[list[QAExample], EngineConfig]
"""One chunk of a step: its rows and its engine config (the chunk's seed included)."""


@dataclass(frozen=True)
class RolloutConfig:
    """Where a step's rollout runs: one engine call in this process (the defaults), several chunks, or Ray actors."""

    chunks: int = option(
        1,
        help="Split each step's rows into this many contiguous chunks of whole question groups, each one engine call "
        "with its own seed (seed + 1000·step + 1e9·chunk); 1: one call over all rows. With ray_actors > 0 and "
        "chunks 1, the chunks are ray_actors.",
    )
    ray_actors: int = option(
        0,
        help="Ray actors sampling the chunks (0: in this process). Each loads the policy from model (with the run's "
        "LoRA wrapping) and its own retriever (index, or the retriever URL), and takes the current weights before "
        "every step. Needs the distributed extra (ray).",
    )
    ray_address: str = option(
        "",
        help="Ray to use: '' joins the Ray this process started, else starts a local one; 'auto' joins the cluster "
        "`ray start` runs here; or ray://HOST:PORT.",
    )
    ray_cpus: float = option(1.0, help="CPUs each actor reserves.")
    ray_gpus: float = option(
        0.0,
        help="GPUs each actor reserves; > 0 puts the actor's policy on its GPU (episodes equal the trainer's only "
        "when both sample on the same kind of device).",
    )

    generator: str = option(
        "hf",
        help="What samples the rollouts: hf (the trainer's own network, HF generate), vllm (a vLLM engine in this "
        "process, colocated with the trainer, the trainer's weights loaded into it before every step; needs the vllm "
        "extra), or vllm-server:URL (a `vllm serve` the user started; not implemented yet: refused).",
    )
    vllm_kv_cache_gb: float = option(1.0, help="generator vllm: memory for vLLM's KV cache (GiB).")
    tis_cap: float = option(
        0.0,
        help="generator vllm: truncated importance sampling, each policy token's loss weighted by "
        "min(π_trainer / π_vLLM, tis_cap) (the behaviour-policy mismatch correction TRL and verl offer); 0: off.",
    )

    def __post_init__(self) -> None:
        check(self.chunks >= 1, self, "chunks", "must be >= 1")
        check(
            self.generator in GENERATORS or self.generator.startswith("vllm-server:"),
            self,
            "generator",
            f"must be one of {GENERATORS} or vllm-server:URL",
        )
        check(
            not self.generator.startswith("vllm-server:"),
            self,
            "generator",
            "a vllm serve server as the RL generator is not implemented yet (its weights would have to be synced "
            "every step by LoRA hot-loading or the weight-update endpoint): use generator: vllm (in process)",
        )
        check(
            self.generator == "hf" or self.ray_actors == 0,
            self,
            "generator",
            "vllm samples in this process: set ray_actors to 0",
        )
        check(self.vllm_kv_cache_gb > 0, self, "vllm_kv_cache_gb", "must be > 0")
        check(self.tis_cap >= 0, self, "tis_cap", "must be >= 0 (0: off)")
        check(
            self.tis_cap == 0 or self.generator != "hf",
            self,
            "tis_cap",
            "corrects vLLM's sampling mismatch: set generator: vllm",
        )
        check(self.ray_actors >= 0, self, "ray_actors", "must be >= 0 (0: rollouts in this process)")
        check(self.ray_cpus >= 0, self, "ray_cpus", "must be >= 0")
        check(self.ray_gpus >= 0, self, "ray_gpus", "must be >= 0")
        check(
            not self.ray_address or self.ray_actors > 0,
            self,
            "ray_address",
            "is set but ray_actors is 0: set ray_actors to use Ray",
        )

    @property
    def n_chunks(self) -> int:
        """The chunks a step is split into: ``chunks``, or one per actor when ``chunks`` is left at 1."""
        return self.ray_actors if self.chunks == 1 and self.ray_actors > 0 else self.chunks


def group_bounds(prompts: Sequence[str]) -> list[tuple[int, int]]:
    """[start, end) of each question group: a maximal run of equal consecutive prompts (TRL and PPO put a question's
    samples in consecutive rows)."""
    out: list[tuple[int, int]] = []
    for i, p in enumerate(prompts):
        if out and prompts[out[-1][0]] == p:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def chunk_bounds(prompts: Sequence[str], chunks: int) -> list[tuple[int, int]]:
    """[start, end) of each chunk: the groups dealt out in order, as evenly as whole groups allow (the first
    ``groups mod chunks`` chunks take one group more); fewer chunks when there are fewer groups, never an empty one."""
    if chunks < 1:
        raise ValueError(f"chunks={chunks}: must be >= 1")
    groups = group_bounds(prompts)
    per, extra = divmod(len(groups), chunks)
    out: list[tuple[int, int]] = []
    g = 0
    for c in range(min(chunks, len(groups))):
        take = per + (1 if c < extra else 0)
        out.append((groups[g][0], groups[g + take - 1][1]))
        g += take
    return out


def chunk_seed(seed: int | None, step: int, chunk: int, rounds: int) -> int | None:
    """The seed of ``chunk`` at optimiser ``step`` (None stays None: unseeded); ``rounds`` (the engine's max_steps)
    and ``step`` are checked so that no two (step, chunk, round) share a seed (see the module docstring)."""
    if seed is None:
        return None
    if chunk and (rounds >= STEP_STRIDE or step >= CHUNK_STRIDE // STEP_STRIDE):
        raise ValueError(
            f"step={step}, engine.max_steps={rounds}: chunk seeds are distinct only for steps < "
            f"{CHUNK_STRIDE // STEP_STRIDE} and max_steps < {STEP_STRIDE}"
        )
    return seed + STEP_STRIDE * step + CHUNK_STRIDE * chunk
