"""Rewards, detectors and advantages of the five seed methods — pure functions, each citing its paper and equation.

- :mod:`~effirag.rewards.outcome` — EM (Search-R1, RouteRAG stage 1), F1 (TeaRAG eq. 5), cover-EM (HiPRAG's A).
- :mod:`~effirag.rewards.format` — format rewards on the protocols' own parsers (Search-R1 tag state machine, TeaRAG
  eq. 6, HiPRAG F(T)).
- :mod:`~effirag.rewards.tearag` — consistency, memory and process rewards (eq. 7–13), single-hop rule, IP-DPO pairs
  (eq. 14).
- :mod:`~effirag.rewards.hiprag` / :mod:`~effirag.rewards.judges` — hierarchical reward, over/under-search detectors
  (LLM, world-oracle and lexical judges), OSR/USR.
- :mod:`~effirag.rewards.routerag` — stage-2 retrieval-time efficiency rewards (Appendix A, eq. 6–7), with
  measured or per-mode modeled retrieval times.
- :mod:`~effirag.rewards.terms` — the reward terms by name (``REWARD_TERMS``), each with its config and the resources
  it needs; :mod:`~effirag.rewards.compose` sums the weighted terms of a run.
- :mod:`~effirag.rewards.advantage` — the group z-score (RouteRAG eq. 8; population std) of the cost-aware advantage;
  the advantage estimators themselves are :mod:`effirag.train.algos`.
- :mod:`~effirag.rewards.cost` — Dynamic Search-R1 memory/latency costs (eq. 3), cost-aware GRPO (eq. 2) and PPO
  (eq. 5); :mod:`~effirag.rewards.profiling` measures c_g and c_e on a running backend (does I/O).
- :mod:`~effirag.rewards.spre` — ReasonRAG SPRE (eq. 1) and UCT (eq. 5).
"""

from effirag.rewards.advantage import zscore
from effirag.rewards.cost import grpo_cost_aware_advantages, latency_cost, memory_cost, ppo_cost_reward
from effirag.rewards.format import (
    check_turns,
    format_reward,
    hiprag_format_reward,
    searchr1_format_reward,
    tearag_format_reward,
)
from effirag.rewards.hiprag import (
    audit_steps,
    hierarchical_reward,
    hierarchical_rewards,
    over_search_rate,
    under_search_rate,
)
from effirag.rewards.judges import Judge, LexicalJudge, LLMJudge, LLMJudgeConfig, StepView, WorldJudge
from effirag.rewards.outcome import OutcomeMetric, cover_em_reward, em_reward, f1_reward, outcome_rewards
from effirag.rewards.routerag import efficiency_rewards, modeled_retrieval_times
from effirag.rewards.spre import spre_value, uct_score
from effirag.rewards.tearag import (
    DPOSample,
    PairRule,
    PathLength,
    SigmoidSimilarity,
    build_dpo_pairs,
    consistency_reward,
    memory_vector,
    process_reward,
    single_hop_rewards,
    tie_order,
    token_cost_score,
    trajectory_process_reward,
)
from effirag.rewards.terms import REWARD_TERMS, TermBatch, register_term

__all__ = [
    "REWARD_TERMS",
    "DPOSample",
    "Judge",
    "LLMJudge",
    "LLMJudgeConfig",
    "LexicalJudge",
    "OutcomeMetric",
    "PairRule",
    "PathLength",
    "SigmoidSimilarity",
    "StepView",
    "TermBatch",
    "WorldJudge",
    "audit_steps",
    "build_dpo_pairs",
    "check_turns",
    "consistency_reward",
    "cover_em_reward",
    "efficiency_rewards",
    "em_reward",
    "f1_reward",
    "format_reward",
    "grpo_cost_aware_advantages",
    "hierarchical_reward",
    "hierarchical_rewards",
    "hiprag_format_reward",
    "latency_cost",
    "memory_cost",
    "memory_vector",
    "modeled_retrieval_times",
    "outcome_rewards",
    "over_search_rate",
    "ppo_cost_reward",
    "process_reward",
    "register_term",
    "searchr1_format_reward",
    "single_hop_rewards",
    "spre_value",
    "tearag_format_reward",
    "tie_order",
    "token_cost_score",
    "trajectory_process_reward",
    "uct_score",
    "under_search_rate",
    "zscore",
]
