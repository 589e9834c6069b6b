"""The rollout engine's typed configuration (budgets and sampling) and the observation-truncation rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from effirag.config import check, option
from effirag.retrieval.modes import mode_names

TRUNCATION_SIDES = ("right", "left")


@dataclass(frozen=True)
class EngineConfig:
    """Budgets and sampling of a batch of episodes. Every limit is enforced per episode."""

    max_steps: int = option(8, help="Most model turns per episode; an episode without an answer by then fails.")
    max_new_tokens: int = option(256, help="Most tokens the model may generate in one turn.")
    max_total_tokens: int = option(
        4096,
        help="Most tokens in an episode's context (prompt + generated + inserted); exceeding it fails the episode.",
    )
    max_inserted_tokens: int = option(
        512, help="Most tokens one observation (retrieved context, wrapper tags included) may insert."
    )
    truncation_side: str = option(
        "right", help="Which end of an over-long observation is cut: right keeps the start, left keeps the end."
    )
    k: int = option(3, help="Items retrieved per search (and by single-round baselines).")
    passage_mode: str = option(
        "passage", help="Retrieval mode that serves passage searches: passage (dense) or sparse (BM25-only indexes)."
    )
    mode: str | None = option(
        None,
        help="Retrieval mode of every search of the run (passage, sparse, graph, hybrid, kag, chunks_triplets), "
        "whatever the protocol; None: each protocol's paper default (TeaRAG kag, the others passage). A protocol "
        "whose model picks the mode per search (RouteRAG), that never retrieves, or that is defined by its own mode "
        "(Single-Con, Single-PPR) refuses any other mode at run start.",
    )
    n: int = option(1, help="Sampled episodes per question.")
    seed: int | None = option(0, help="Base seed; round r of a batch samples with seed + r (None: unseeded).")
    temperature: float = option(0.0, help="Sampling temperature; 0 is greedy.")
    top_p: float = option(1.0, help="Nucleus sampling mass.")
    frequency_penalty: float = option(
        0.0,
        help="Logit penalty per earlier occurrence of a token in the same turn (prompt not counted; OpenAI / vLLM).",
    )
    presence_penalty: float = option(0.0, help="Logit penalty on every token already generated in the same turn.")
    record_segments: bool = option(
        False, help="Keep each episode's prompt/generated/inserted text segments in trajectory.extras['segments']."
    )
    token_ids: bool = option(
        False,
        help="Token path for training: feed the generator (a TokenGenerator) each episode's token ids instead of "
        "text, ask for logprobs, and keep the typed token ledger in trajectory.tokens.",
    )

    def __post_init__(self) -> None:
        check(self.max_steps >= 1, self, "max_steps", "must be >= 1")
        check(self.max_new_tokens >= 1, self, "max_new_tokens", "must be >= 1")
        check(self.max_total_tokens >= self.max_new_tokens, self, "max_total_tokens", "must be >= max_new_tokens")
        check(self.max_inserted_tokens >= 1, self, "max_inserted_tokens", "must be >= 1")
        check(self.truncation_side in TRUNCATION_SIDES, self, "truncation_side", f"must be one of {TRUNCATION_SIDES}")
        check(self.k >= 1, self, "k", "must be >= 1")
        check(self.passage_mode in ("passage", "sparse"), self, "passage_mode", "must be passage or sparse")
        check(self.mode is None or self.mode in mode_names(), self, "mode", f"must be one of {', '.join(mode_names())}")
        check(self.n >= 1, self, "n", "must be >= 1")
        check(self.temperature >= 0.0, self, "temperature", "must be >= 0")
        check(0.0 < self.top_p <= 1.0, self, "top_p", "must be in (0, 1]")
        check(-2.0 <= self.frequency_penalty <= 2.0, self, "frequency_penalty", "must be in [-2, 2]")
        check(-2.0 <= self.presence_penalty <= 2.0, self, "presence_penalty", "must be in [-2, 2]")


def truncate_to_budget(
    body: str, fits: Callable[[str], bool], side: str = "right", marker: str = " …"
) -> tuple[str, bool]:
    """Cut ``body`` at a word boundary until ``fits(body)`` holds; return (body, whether it was cut).

    ``side="right"`` keeps the longest prefix of words, ``"left"`` the longest suffix; a ``marker`` shows where text
    was removed. Binary search over the number of kept words: O(log n) calls of ``fits`` (each counts tokens).
    The empty body is returned when not even one word fits.
    """
    if fits(body):
        return body, False
    words = body.split(" ")

    def candidate(n: int) -> str:
        if n == 0:
            return ""
        return " ".join(words[:n]) + marker if side == "right" else marker.lstrip() + " " + " ".join(words[-n:])

    lo, hi = 0, len(words) - 1  # invariant: candidate(lo) fits (or lo == 0), candidate(hi + 1) does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(candidate(mid)):
            lo = mid
        else:
            hi = mid - 1
    return candidate(lo), True
