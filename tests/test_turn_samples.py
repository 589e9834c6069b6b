"""ReasonRAG under RL: one training sequence per turn (the prompt the policy saw at that turn, its own mask), the
episode's reward and advantage shared by its turns; append-only episodes stay one sequence each."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.llm.scripted import ScriptedGenerator
from effirag.train.turns import episode_weights, turn_samples
from effirag.types import QAExample, Trajectory
from test_engine_support import LexicalRetriever

Q1 = QAExample("q1", "What is the capital of France?", ("Paris",))
Q2 = QAExample("q2", "Which river flows through Lyon?", ("Rhone",))


class CharTokenizer:
    """One token per character (ids are code points)."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids)


def _episodes(protocol: str, script: dict[str, list[str]]) -> list[Trajectory]:
    gen = ScriptedGenerator(script, CharTokenizer())
    cfg = EngineConfig(token_ids=True, k=1, max_steps=4)
    return list(run_episodes(gen, LexicalRetriever(), get_protocol(protocol), [Q1, Q2], cfg))


def test_reasonrag_episode_gives_one_sample_per_turn_with_the_episode_values() -> None:
    """Episode 0 (3 turns: query, evidence, answer) with r = 1.0, A = 0.5; episode 1 (1 turn: the answer) with
    r = 0.0, A = −0.5. Expected: 4 samples, owners [0, 0, 0, 1], each with its episode's r and A; each sample's
    prompt is the stage prompt the policy saw (they differ between turns of episode 0), its mask all 1 (the observation
    is inside the next prompt, untrained), and its completion exactly that turn's text. Weights 1/3, 1/3, 1/3, 1."""
    trajs = _episodes(
        "reasonrag",
        {
            Q1.question: ["<query> Paris France </query>", "<evidence> x </evidence>", "<answer> Paris </answer>"],
            Q2.question: ["<answer> Saone </answer>"],
        },
    )
    got = turn_samples(trajs, [1.0, 0.0], [0.5, -0.5])
    assert [s.episode for s in got] == [0, 0, 0, 1]
    assert [(s.reward, s.advantage) for s in got] == [(1.0, 0.5)] * 3 + [(0.0, -0.5)]
    assert [s.sample.turn for s in got] == [0, 1, 2, 0]
    tok = CharTokenizer()
    assert [tok.decode(s.sample.completion_ids) for s in got] == [
        "<query> Paris France </query>",
        "<evidence> x </evidence>",
        "<answer> Paris </answer>",
        "<answer> Saone </answer>",
    ]
    assert all(set(s.sample.mask) == {1} for s in got)
    prompts = [tok.decode(s.sample.prompt_ids) for s in got[:3]]
    assert len(set(prompts)) == 3 and all(Q1.question in p for p in prompts)
    assert got[0].sample.rewards == {"total": 1.0}
    assert episode_weights(got) == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1.0])


def test_append_only_episode_stays_one_sample_and_bad_lengths_are_refused() -> None:
    """Search-R1 appends: two turns and an observation are one sequence (mask 1, 0, 1 runs), weight 1."""
    trajs = _episodes(
        "searchr1",
        {
            Q1.question: ["<search> capital of France </search>", "<answer> Paris </answer>"],
            Q2.question: ["<answer> Rhone </answer>"],
        },
    )
    got = turn_samples(trajs, [1.0, 1.0])
    assert [s.episode for s in got] == [0, 1] and [s.advantage for s in got] == [0.0, 0.0]
    assert 0 in got[0].sample.mask and episode_weights(got) == [1.0, 1.0]
    with pytest.raises(ValueError, match="1 rewards for 2 trajectories"):
        turn_samples(trajs, [1.0])
    with pytest.raises(ValueError, match="3 advantages for 2 trajectories"):
        turn_samples(trajs, [1.0, 1.0], [0.0, 0.0, 0.0])


def test_grpo_rollout_refuses_reasonrag_and_ppo_rollout_gives_one_row_per_turn() -> None:
    """TRL's GRPO needs one row per episode: without ``per_turn`` the rollout refuses ReasonRAG and says where the
    reason is written. PPO's rollout (``per_turn=True``) gives the 3-turn episode as 3 rows of episode 0."""
    from pathlib import Path

    from effirag.train.rl.rollout import EngineRollout

    turns = ["<query> Paris </query>", "<evidence> x </evidence>", "<answer> Paris </answer>"]
    gen = ScriptedGenerator({Q1.question: turns}, CharTokenizer())
    rollout = EngineRollout(get_protocol("reasonrag"), LexicalRetriever(), EngineConfig(k=1), lambda _p: gen)
    with pytest.raises(ValueError, match=r"GRPO trains one sequence per episode.*README, 'ReasonRAG under RL'"):
        rollout.run([Q1], 0, None)
    assert "**ReasonRAG under RL.**" in Path("README.md").read_text(encoding="utf-8")
    gen = ScriptedGenerator({Q1.question: turns}, CharTokenizer())
    per_turn = EngineRollout(
        get_protocol("reasonrag"), LexicalRetriever(), EngineConfig(k=1), lambda _p: gen, per_turn=True
    )
    batch = per_turn.run([Q1], 0, None)
    assert batch.episodes == [0, 0, 0]
    assert [CharTokenizer().decode(s.completion_ids) for s in batch.samples] == turns


def test_a_turn_that_sampled_no_token_is_no_row() -> None:
    """Ledger: prompt A, an empty generated span (the policy ended at once), prompt B, a 2-token turn. Expected: one
    row, under prompt B; without the skip the empty turn would be a row with no token to train."""
    from effirag.types import TokenKind, TokenSegment

    traj = Trajectory(
        "q1",
        Q1.question,
        "reasonrag",
        tokens=[
            TokenSegment(TokenKind.PROMPT, (1, 2)),
            TokenSegment(TokenKind.GENERATED, ()),
            TokenSegment(TokenKind.PROMPT, (3, 4)),
            TokenSegment(TokenKind.GENERATED, (5, 6)),
        ],
    )
    got = turn_samples([traj], [1.0])
    assert [(s.sample.prompt_ids, s.sample.completion_ids, s.sample.mask) for s in got] == [((3, 4), (5, 6), (1, 1))]
