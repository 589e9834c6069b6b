"""The rollout engine: batching, budgets, truncation, tool errors, seeds, sample order, segments."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.errors import ConfigError
from effirag.llm.base import Completion, GenerationConfig
from effirag.llm.scripted import ScriptedGenerator
from effirag.types import Action
from test_engine_support import LexicalRetriever, Q, run

SEARCH = "<search> Blue River director </search>"
ANSWER = "<answer> Ana Lopez </answer>"
THINK = "<think> t </think>\n"


class Recording(ScriptedGenerator):
    """A scripted generator that also records each call's batch size and GenerationConfig."""

    def __init__(self, completions) -> None:  # type: ignore[no-untyped-def]
        super().__init__(completions)
        self.batches: list[int] = []
        self.configs: list[GenerationConfig] = []

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        self.batches.append(len(prompts))
        self.configs.append(config)
        return super().generate(prompts, config)


def test_one_generate_call_per_round_over_all_live_episodes() -> None:
    # q-a answers at once, q-b searches once, q-c searches twice; n = 2 samples each; every turn thinks first
    # (Search-R1's format).
    s, a = THINK + SEARCH, THINK + ANSWER
    script = {
        "Question: q-a": [a] * 2,
        "Question: q-b": [s, s, a, a],
        "Question: q-c": [s, s, s, s, a, a],
    }
    gen, ret = Recording(script), LexicalRetriever()
    trajs = run_episodes(gen, ret, get_protocol("searchr1"), ["q-a", "q-b", "q-c"], EngineConfig(n=2, seed=7))
    assert gen.batches == [6, 4, 2]
    assert [c.seed for c in gen.configs] == [7, 8, 9]  # seed + round
    assert all(c.stop == ("</search>", "</answer>") and c.n == 1 for c in gen.configs)
    assert [(t.question_id, t.sample_index) for t in trajs] == [(f"q{i}", s) for i in range(3) for s in (0, 1)]
    assert [len(t.steps) for t in trajs] == [1, 1, 2, 2, 3, 3]
    # Identical requests within a round are served by one retriever call: 2 rounds of searches → 2 calls.
    assert len(ret.calls) == 2
    assert all(t.prediction == "Ana Lopez" and t.format_ok for t in trajs)


def test_unseeded_runs_pass_no_seed() -> None:
    gen = Recording([ANSWER])
    run_episodes(gen, None, get_protocol("searchr1"), [Q], EngineConfig(seed=None))
    assert gen.configs[0].seed is None


def test_repetition_penalties_reach_the_generator() -> None:
    gen = Recording([ANSWER])
    run_episodes(gen, None, get_protocol("searchr1"), [Q], EngineConfig(frequency_penalty=0.3, presence_penalty=0.1))
    assert (gen.configs[0].frequency_penalty, gen.configs[0].presence_penalty) == (0.3, 0.1)
    with pytest.raises(ConfigError, match="frequency_penalty"):
        EngineConfig(frequency_penalty=3.0)


def test_max_steps_ends_as_format_failure() -> None:
    traj, gen, _ = run("searchr1", ["no action"] * 3, max_steps=3)
    assert [s.action for s in traj.steps] == [Action.INVALID] * 3
    assert traj.prediction is None and not traj.format_ok and traj.end == "max_steps"
    assert gen.calls == 3


def test_max_total_tokens_ends_episode() -> None:
    traj, _, _ = run("searchr1", [SEARCH, SEARCH, ANSWER], max_total_tokens=90, max_new_tokens=20)
    assert traj.end == "max_total_tokens" and traj.prediction is None and not traj.format_ok
    assert traj.extras["used_tokens"] > 90 and len(traj.steps) < 3


def test_observation_is_truncated_to_budget_on_either_side() -> None:
    right, gen, _ = run("searchr1", [SEARCH, ANSWER], k=4, max_inserted_tokens=12)
    obs = right.steps[0].observation
    assert gen.count_tokens(obs) <= 12 and right.steps[0].inserted_tokens == gen.count_tokens(obs)
    assert right.steps[0].extras["truncated"] and len(right.steps[0].items) == 4  # the record keeps every item
    assert obs.startswith("\n\n<information>Doc 1 (Title: Ana Lopez)") and obs.endswith(" …</information>\n\n")
    left, _, _ = run("searchr1", [SEARCH, ANSWER], k=4, max_inserted_tokens=12, truncation_side="left")
    assert left.steps[0].observation.startswith("\n\n<information>… ")
    assert left.steps[0].observation.endswith("to the Mediterranean Sea.</information>\n\n")  # last item kept


def test_tool_error_becomes_logged_counted_observation(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="effirag.agent.engine"):
        traj, _, _ = run("searchr1", ["<search> boom </search>", ANSWER], retriever=LexicalRetriever(fail_on="boom"))
    step = traj.steps[0]
    assert step.action is Action.SEARCH and step.items == []
    assert (
        step.observation == "\n\n<information>Search failed (RuntimeError: index offline for 'boom').</information>\n\n"
    )
    assert traj.extras["tool_errors"] == 1 and "retrieval failed" in caplog.text
    assert traj.prediction == "Ana Lopez"


def test_stop_string_not_returned_by_backend_is_restored() -> None:
    class NoStop(ScriptedGenerator):
        def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
            out = super().generate(prompts, config)
            return [
                [
                    Completion(
                        c.text.removesuffix(c.stop_string or ""), c.token_ids, c.finish_reason, None, c.stop_string
                    )
                    for c in o
                ]
                for o in out
            ]

    gen = NoStop([SEARCH, ANSWER])
    [t] = run_episodes(gen, LexicalRetriever(), get_protocol("searchr1"), [Q])
    assert [s.action for s in t.steps] == [Action.SEARCH, Action.ANSWER] and t.steps[0].text == SEARCH


def test_segments_rebuild_the_final_prompt() -> None:
    traj, _, _ = run("searchr1", ["<search></search>", SEARCH, ANSWER], record_segments=True)
    segs = traj.extras["segments"]
    assert [k for k, _ in segs] == ["prompt", "generated", "feedback", "generated", "inserted", "generated"]
    assert "".join(text for _, text in segs) == traj.prompt
    rr, _, _ = run("reasonrag", ["<query> Lyon </query>", "<evidence> x </evidence>", ANSWER], record_segments=True)
    kinds = [k for k, _ in rr.extras["segments"]]
    assert kinds == ["prompt", "prompt", "generated", "inserted", "prompt", "generated", "prompt", "generated"]


def test_engine_config_validation_names_field() -> None:
    with pytest.raises(ConfigError, match=r"EngineConfig.truncation_side='middle'"):
        EngineConfig(truncation_side="middle")
    with pytest.raises(ConfigError, match="max_total_tokens"):
        EngineConfig(max_total_tokens=10, max_new_tokens=20)
