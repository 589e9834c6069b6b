"""ReasonRAG's process-level data: MCTS over the agent's steps, scored by Shortest Path Reward Estimation.

- :mod:`~effirag.train.mcts.tree` — nodes, UCT selection, SPRE backup, closing, statistics and the JSON dump;
- :mod:`~effirag.train.mcts.search` — one question's search, the policy run through the engine;
- :mod:`~effirag.train.mcts.pairs` — step-level preference pairs between siblings;
- :mod:`~effirag.train.mcts.config` — the typed budgets and run configuration;
- :mod:`~effirag.train.mcts.runner` — the resumable run over a question set (``effirag data mcts``).
"""

from effirag.train.mcts.config import MCTSConfig, MCTSRunConfig, load_run_config
from effirag.train.mcts.runner import MCTSSummary, mine_trees, run_mcts
from effirag.train.mcts.search import EnginePolicy, SearchResult, search_tree

__all__ = [
    "EnginePolicy",
    "MCTSConfig",
    "MCTSRunConfig",
    "MCTSSummary",
    "SearchResult",
    "load_run_config",
    "mine_trees",
    "run_mcts",
    "search_tree",
]
