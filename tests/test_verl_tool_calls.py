"""``compute_score`` on verl tool-agent transcripts (hermes ``<tool_call>`` / ``<tool_response>`` turns, then the
answer): the same episode scores what it scores in the protocol's own tags, searches count the queries, and each way
of breaking the format costs the format term."""

from __future__ import annotations

import json
from typing import Any

import pytest

from effirag.agent import get_protocol
from effirag.integrations.tool_calls import clean_turn, parse_call, split_tool_turns, tool_trajectory
from effirag.integrations.verl import compute_score

DOC = "Doc 1 (Title: Glass Harbor) Glass Harbor was directed by Mira Talvenor."
SR1 = (
    "<think> I need the director. </think>\n<search> who directed Glass Harbor </search>\n\n<information>"
    + DOC
    + "</information>\n\n<think> Found it. </think>\n<answer> Mira </answer>"
)


def call(*queries: str, name: str = "search") -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"query_list": list(queries)}}) + "\n</tool_call>"


def response(body: str = DOC) -> str:
    return f"<tool_response>\n{body}\n</tool_response>"


# As verl's reward manager decodes a Qwen (ChatML) tool transcript with skip_special_tokens: the markers are gone,
# the role names stay on lines of their own.
THINK = "<think> I need the director. </think>\n"
ANSWER = "<think> Found it. </think>\n<answer> Mira </answer>"
TOOL = THINK + call("who directed Glass Harbor") + "\nuser\n" + response() + "\nassistant\n" + ANSWER
FMT: dict[str, Any] = {"format_weight": 0.5}


def test_a_tool_call_episode_scores_as_the_search_r1_tag_episode() -> None:
    """The issue's case: EM 1, format 1, one search, r = 1 + 0.5·1 = 1.5 both ways (was format 0, searches 0)."""
    tags = compute_score("effirag/searchr1/musique", SR1, "Mira", None, **FMT)
    tools = compute_score("effirag/searchr1/musique", TOOL, "Mira", None, **FMT)
    assert tags["format_ok"] == tools["format_ok"] == 1.0
    assert tags["searches"] == tools["searches"] == 1.0
    assert tools["score"] == pytest.approx(1.5) == tags["score"]
    assert tools["em"] == 1.0


def test_chat_markers_left_in_are_removed() -> None:
    raw = THINK + call("q") + "<|im_end|>\n<|im_start|>user\n" + response() + "<|im_end|>\n<|im_start|>assistant\n"
    got = compute_score("effirag/searchr1/x", raw + ANSWER + "<|im_end|>", "Mira", **FMT)
    assert (got["format_ok"], got["searches"], got["score"]) == (1.0, 1.0, pytest.approx(1.5))
    gemma = THINK + call("q") + "<end_of_turn>\n<start_of_turn>user\n" + response() + "<end_of_turn>\n"
    got = compute_score("effirag/searchr1/x", gemma + "<start_of_turn>model\n" + ANSWER, "Mira", **FMT)
    assert (got["format_ok"], got["searches"]) == (1.0, 1.0)
    assert clean_turn("user\n<think> a </think>\nassistant") == "<think> a </think>"


def test_searches_count_queries_and_parallel_calls() -> None:
    """Two queries in one call, then a turn of two calls answered by two responses: 2 + 2 = 4 searches."""
    two = THINK + call("a", "b") + "\nuser\n" + response("x") + "\nassistant\n"
    par = THINK + call("c") + "\n" + call("d") + "\nuser\n" + response("y") + "\n" + response("z") + "\nassistant\n"
    got = compute_score("effirag/searchr1/x", two + par + ANSWER, "Mira", **FMT)
    assert (got["searches"], got["format_ok"]) == (4.0, 1.0)
    turns = split_tool_turns(two + par + ANSWER)
    assert [t.responses for t in turns] == [("x",), ("y", "z"), ()]
    traj = tool_trajectory(get_protocol("searchr1"), two + par + ANSWER)
    assert [s.query for s in traj.steps[:4]] == ["a", "b", "c", "d"]
    assert [s.observation for s in traj.steps[:4]] == ["", "x", "y", "z"]


@pytest.mark.parametrize(
    ("transcript", "why"),
    [
        (THINK + "<tool_call>\n{not json}\n</tool_call>\nuser\n" + response() + "\nassistant\n" + ANSWER, "not JSON"),
        (THINK + call("q", name="browse") + "\nuser\n" + response() + "\nassistant\n" + ANSWER, "unknown tool"),
        (THINK + call() + "\nuser\n" + response() + "\nassistant\n" + ANSWER, "non-empty list"),
        (THINK + call("q") + " and more\nuser\n" + response() + "\nassistant\n" + ANSWER, "text after the tool call"),
        (THINK + call("q") + "\n" + call("r") + "\nuser\n" + response() + "\nassistant\n" + ANSWER, "2 tool calls"),
        (THINK + "no call\nuser\n" + response() + "\nassistant\n" + ANSWER, "without a well-formed"),
        (THINK + call("q") + "\nuser\n" + response() + "\nassistant\n<answer> Mira </answer>", "<think>"),
        (THINK + call("q") + "\nuser\n" + response() + "\nassistant\n" + ANSWER + " more", "text after the answer"),
        (THINK + call("q") + "\nuser\n" + response() + "\nassistant\n" + THINK + call("r"), "ends with a tool call"),
        (THINK + call("q") + "\nuser\n" + response(), "no answer turn"),
        (THINK + call("q") + "\nuser\n" + response() + "\nassistant\n<think> t </think> Mira", "not an answer"),
    ],
)
def test_each_format_break_costs_the_format_term(transcript: str, why: str) -> None:
    traj = tool_trajectory(get_protocol("searchr1"), transcript)
    assert not traj.format_ok
    assert any(why in e for e in traj.extras["format_errors"]), traj.extras["format_errors"]
    got = compute_score("effirag/searchr1/x", transcript, "Mira", **FMT)
    assert got["format_ok"] == 0.0 and got["score"] == pytest.approx(got["em"])


def test_the_answer_turn_is_read_by_the_protocol() -> None:
    """TeaRAG answers with ``Final answer:``: cover-EM 1, one search → 1 + 0.5 = 1.5; the tag answer of Search-R1
    is not TeaRAG's, so the same transcript with <answer> has no prediction there."""
    tea = call("who directed Glass Harbor") + "\nuser\n" + response() + "\nassistant\n"
    final = "<entities> Glass Harbor </entities>\n<summary> Mira directed it. </summary>\nFinal answer: Mira"
    got = compute_score("effirag/tearag/x", tea + final, "Mira", outcome="cover_em", **FMT)
    traj = tool_trajectory(get_protocol("tearag"), tea + final)
    assert traj.prediction == "Mira", traj.extras["format_errors"]
    assert (got["searches"], got["format_ok"], got["score"]) == (1.0, 1.0, pytest.approx(1.5))
    assert compute_score("effirag/tearag/x", TOOL, "Mira", **FMT)["em"] == 0.0


def test_parse_call_reads_openai_style_string_arguments_and_a_single_query() -> None:
    body = json.dumps({"name": "search", "arguments": json.dumps({"query": " who "})})
    assert parse_call(body).queries == ("who",)
    assert parse_call("[1]").error is not None


def test_parse_call_names_which_json_is_malformed() -> None:
    """The call's body and string ``arguments`` are both read as JSON; the error says which one failed."""
    body = parse_call("{not json}").error
    assert body is not None and body.startswith("tool call is not JSON (Expecting property name"), body
    args = parse_call(json.dumps({"name": "search", "arguments": "{'query': 'x'}"})).error
    assert args is not None and args.startswith("arguments are not JSON (Expecting property name"), args
