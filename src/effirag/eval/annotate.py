"""Per-step annotations an evaluation adds to finished trajectories: the token ledger and the oracle's verdicts.

Token ledger (``step.extras["token_split"]``): a step's generated tokens split into ``answer`` and ``summary`` (the
pieces the protocol's :meth:`~effirag.agent.protocols.base.AgentProtocol.generated_parts` names, each counted with the
policy's tokenizer) and ``reasoning`` (the rest). Counting a piece on its own can differ by a token from its share of
the whole turn, so pieces are capped to the turn's count; the three always sum to ``step.generated_tokens``.

Oracle (``step.extras["oracle"]``): the judge's verdict per step (HiPRAG's detectors, :mod:`effirag.rewards.judges`):
``"over-search"`` or ``"ok"`` on a search step, ``"under-search"`` or ``"ok"`` on a reasoning step; other steps get
none. With :class:`~effirag.rewards.judges.WorldJudge` the verdicts are exact on EffiRAG-World.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from effirag.agent.protocols.base import AgentProtocol
from effirag.rewards.hiprag import audit_steps
from effirag.rewards.judges import Judge
from effirag.types import Action, Step, Trajectory

SPLIT_KINDS = ("reasoning", "answer", "summary")


def token_split(step: Step, protocol: AgentProtocol, count_tokens: Callable[[str], int]) -> dict[str, int]:
    """``{"reasoning", "answer", "summary"}`` token counts of one step's generated text (see the module docstring)."""
    parts = protocol.generated_parts(step)
    left = step.generated_tokens
    answer = min(count_tokens(parts["answer"]), left) if parts.get("answer") else 0
    summary = min(count_tokens(parts["summary"]), left - answer) if parts.get("summary") else 0
    return {"reasoning": left - answer - summary, "answer": answer, "summary": summary}


def annotate_tokens(
    trajectories: Sequence[Trajectory], protocol: AgentProtocol, count_tokens: Callable[[str], int]
) -> None:
    """Set ``extras["token_split"]`` on every step that lacks it (a resumed run's earlier steps keep theirs)."""
    for t in trajectories:
        for s in t.steps:
            if "token_split" not in s.extras:
                s.extras["token_split"] = token_split(s, protocol, count_tokens)


def annotate_oracle(trajectories: Sequence[Trajectory], judge: Judge) -> None:
    """Set ``extras["oracle"]`` on every search and reasoning step from ``judge`` (two batched judge calls)."""
    for t, audit in zip(trajectories, audit_steps(trajectories, judge), strict=True):
        searches = [s for s in t.steps if s.action is Action.SEARCH]
        reasons = [s for s in t.steps if s.action is Action.REASON]
        for s, over in zip(searches, audit.over, strict=True):
            s.extras["oracle"] = "over-search" if over else "ok"
        for s, under in zip(reasons, audit.under, strict=True):
            s.extras["oracle"] = "under-search" if under else "ok"


def split_totals(t: Trajectory) -> dict[str, int]:
    """A trajectory's generated tokens by kind; a step without a ledger counts wholly as reasoning."""
    out = dict.fromkeys(SPLIT_KINDS, 0)
    for s in t.steps:
        split = s.extras.get("token_split") or {"reasoning": s.generated_tokens}
        for k in SPLIT_KINDS:
            out[k] += int(split.get(k, 0))
    return out


def oracle_rates(trajectories: Sequence[Trajectory]) -> dict[str, float | int] | None:
    """OSR (over-search steps / judged search steps) and USR (under-search steps / judged reasoning steps) from the
    steps' ``extras["oracle"]``; None when no step was judged. A rate over no steps is 0.0."""
    verdicts = [(s.action, s.extras["oracle"]) for t in trajectories for s in t.steps if "oracle" in s.extras]
    if not verdicts:
        return None
    n_search = sum(1 for a, _ in verdicts if a is Action.SEARCH)
    n_reason = len(verdicts) - n_search
    over = sum(1 for _, v in verdicts if v == "over-search")
    under = sum(1 for _, v in verdicts if v == "under-search")
    return {
        "osr": round(over / n_search, 6) if n_search else 0.0,
        "usr": round(under / n_reason, 6) if n_reason else 0.0,
        "search_steps": n_search,
        "reasoning_steps": n_reason,
    }
