"""ReasonRAG's MCTS for one question (ReasonRAG §2.2.2 and appendix A), with the policy run through the engine.

One iteration: *selection* descends from the root by UCT (eq. 5) to an unexpanded open node; *expansion* samples
``k`` next steps from the policy at that node (eq. 4: the stage's prompt over the trajectory so far; a query step
runs retrieval, so its child holds the documents); *simulation* continues every new non-terminal child to an answer
``rollouts`` times, while a child that answered is its own sample; the outcome v (F1 against the gold by default) and
the total step count of each sample give SPRE (eq. 1) at every node they pass through, and *backpropagation* adds one
visit to each node on the way back to the root (eq. 7). ReasonRAG replaces rollouts by an LLM judge of the partial
trajectory (eq. 6) to save time; here the rollouts are real, as SPRE defines them.

Budgets: ``iterations`` per question, ``k`` samples per expansion, ``max_depth`` turns, ``max_tree_tokens`` generated
tokens per tree, and the engine's own per-episode limits (turns, tokens per turn and per context).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

from effirag.agent import EngineConfig, run_episodes
from effirag.agent.protocols.base import AgentProtocol
from effirag.agent.protocols.replay import replay_state
from effirag.llm.base import Generator
from effirag.retrieval.base import Retriever
from effirag.rewards.outcome import outcome_rewards
from effirag.train.mcts.config import MCTSConfig
from effirag.train.mcts.tree import Node, backup, close_upwards, select_leaf
from effirag.types import QAExample, Trajectory


@dataclass
class EnginePolicy:
    """The policy as the tree uses it, every call through :func:`~effirag.agent.engine.run_episodes`: k next steps
    from a node, rollouts from nodes to an answer, and the prompt the policy sees at a node."""

    generator: Generator
    retriever: Retriever | None
    protocol: AgentProtocol
    engine: EngineConfig

    def _config(self, n: int, seed: int, temperature: float, max_steps: int) -> EngineConfig:
        return replace(
            self.engine, n=n, seed=seed, temperature=temperature, max_steps=max_steps, record_segments=False,
            token_ids=False,
        )  # fmt: skip

    def expand(
        self, start: QAExample | Trajectory, turns: int, k: int, seed: int, temperature: float
    ) -> list[Trajectory]:
        """``k`` samples of one more turn after ``start`` (the question itself at the root, which has ``turns`` 0)."""
        cfg = self._config(k, seed, temperature, turns + 1)
        return run_episodes(self.generator, self.retriever, self.protocol, [start], cfg)

    def rollout(self, starts: list[Trajectory], n: int, seed: int, temperature: float) -> list[Trajectory]:
        """``n`` continuations of each start to an answer or the engine's budget; start order, then sample order."""
        cfg = self._config(n, seed, temperature, self.engine.max_steps)
        return run_episodes(self.generator, self.retriever, self.protocol, starts, cfg)

    def prompt(self, trajectory: Trajectory) -> str:
        """The text the policy continues from after ``trajectory`` (the stage prompt; ReasonRAG rebuilds it)."""
        return self.protocol.prompt(replay_state(self.protocol, trajectory))


@dataclass
class SearchResult:
    """A searched tree: its nodes (index = id, 0 the root), iterations run and generated tokens spent."""

    nodes: list[Node]
    iterations: int
    generated_tokens: int


def question_seed(seed: int, question_id: str) -> int:
    """The base seed of one question's tree: the run's seed shifted by a hash of the id, so a resumed run searches
    each question exactly as an uninterrupted one would, whatever questions came before it."""
    return seed + (zlib.crc32(question_id.encode("utf-8")) % 1_000_003) * 1_000_000


def search_tree(example: QAExample, policy: EnginePolicy, cfg: MCTSConfig) -> SearchResult:
    """Run MCTS on ``example`` until ``cfg.iterations`` iterations, the token budget, or nothing open is left."""
    root = Node(0, None, 0, Trajectory(example.id, example.question, policy.protocol.name))
    nodes = [root]
    spent, it = 0, 0
    base = question_seed(cfg.seed, example.id)
    while it < cfg.iterations and not root.closed and spent < cfg.max_tree_tokens:
        leaf = select_leaf(nodes, cfg.alpha, cfg.c_uct)
        spent += expand_and_backup(nodes, leaf, example, policy, cfg, base + 2000 * it)
        it += 1
    return SearchResult(nodes, it, spent)


def expand_and_backup(
    nodes: list[Node], leaf: Node, example: QAExample, policy: EnginePolicy, cfg: MCTSConfig, seed: int
) -> int:
    """Expand ``leaf`` (identical samples merge into one child), simulate its new children, back their samples up;
    return the tokens generated."""
    leaf.prompt = policy.prompt(leaf.trajectory)
    start: QAExample | Trajectory = example if leaf.parent is None else leaf.trajectory
    outs = policy.expand(start, leaf.depth, cfg.k, seed, cfg.temperature)
    spent = sum(_new_tokens(t, leaf.trajectory) for t in outs)
    kids: list[Node] = []
    for t in outs:
        step = t.steps[-1]
        if any(nodes[i].text == step.text for i in leaf.children):
            continue
        child = Node(
            len(nodes), leaf.id, leaf.depth + 1, t, text=step.text, stage=step.stage or "", action=step.action.value,
            observation=step.observation, answer=step.answer,
        )  # fmt: skip
        _classify(child, example, policy.engine.max_steps, cfg.outcome)
        nodes.append(child)
        leaf.children.append(child.id)
        kids.append(child)
    live = [c for c in kids if not c.terminal]
    rolled = policy.rollout([c.trajectory for c in live], cfg.rollouts, seed + 1000, cfg.temperature) if live else []
    spent += sum(_new_tokens(t, c.trajectory) for c, t in zip(_repeat(live, cfg.rollouts), rolled, strict=True))
    values = outcome_rewards([t.prediction for t in rolled], [example.answers] * len(rolled), cfg.outcome)
    first = {c.id: i * cfg.rollouts for i, c in enumerate(live)}  # where each live child's rollouts start
    for c in kids:
        if c.terminal:
            samples = [(float(c.outcome or 0.0), _turns(c.trajectory))]
        else:
            j = first[c.id]
            samples = [(values[i], _turns(rolled[i])) for i in range(j, j + cfg.rollouts)]
        backup(nodes, c, samples)
        close_upwards(nodes, c, cfg.max_depth)
    return spent


def _classify(node: Node, example: QAExample, max_steps: int, metric: str) -> None:
    """Mark a new child terminal when its episode ended: with an answer (outcome v scored) or out of budget (v 0)."""
    end = node.trajectory.end
    if end == "answer":
        node.terminal = True
        node.outcome = outcome_rewards([node.trajectory.prediction], [example.answers], metric)[0]
    elif end != "max_steps" or node.depth >= max_steps:
        node.terminal, node.outcome = True, 0.0


def _turns(t: Trajectory) -> int:
    """The total step count SPRE discounts by: every model turn of the episode, from the question on."""
    return t.turns


def _new_tokens(t: Trajectory, prefix: Trajectory) -> int:
    return sum(s.generated_tokens for s in t.steps[len(prefix.steps) :])


def _repeat(items: list[Node], n: int) -> list[Node]:
    return [x for x in items for _ in range(n)]
