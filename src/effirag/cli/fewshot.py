"""The few-shot options of ``effirag ask`` and ``effirag eval qa``: demos from a training split, never evaluated."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from effirag.cli.common import fail

STYLE_HELP = (
    "instruct: the protocol's instructions alone (models trained on the format); fewshot: solved examples from "
    "--demos first, in the protocol's format (base, non-chat models)."
)
DEMOS_HELP = (
    "Question file the few-shot demos are drawn from (a training split; its gold passages become the demos' "
    "observations). When it is the --questions file, the demos are removed from the questions evaluated."
)


def style_option() -> Any:
    return typer.Option("instruct", "--prompt-style", help=STYLE_HELP)


def demos_option() -> Any:
    return typer.Option(None, "--demos", help=DEMOS_HELP)


def shots_option() -> Any:
    return typer.Option(3, "--shots", help="Few-shot demos per prompt (with --prompt-style fewshot).")


def load_demos(
    style: str, demos: Path | None, shots: int, evaluated: Sequence[Any], questions: Path | None = None
) -> tuple[tuple[Any, ...], list[Any]]:
    """(demos, questions to evaluate). With ``instruct`` no demos; with ``fewshot`` ``shots`` demos from ``demos``,
    removed from ``evaluated`` when both come from the same file, and refused when they overlap otherwise."""
    from effirag.agent.protocols.fewshot import PROMPT_STYLES, check_disjoint, split_demos
    from effirag.data import load_questions

    if style not in PROMPT_STYLES:
        fail(f"--prompt-style {style!r}: known: {', '.join(PROMPT_STYLES)}")
    if style == "instruct":
        if demos is not None:
            fail("--demos needs --prompt-style fewshot")
        return (), list(evaluated)
    if demos is None:
        fail("--prompt-style fewshot needs --demos FILE (a training split to draw the examples from)")
    if shots < 1:
        fail(f"--shots {shots}: must be >= 1")
    assert demos is not None
    qs = load_questions(demos)
    chosen, _ = split_demos(qs.examples, {p.id: p for p in qs.passages}, shots)
    same_file = questions is not None and demos.resolve() == questions.resolve()
    rest = [ex for ex in evaluated if ex.id not in {d.id for d in chosen}] if same_file else list(evaluated)
    check_disjoint(chosen, [ex.question for ex in rest], [ex.id for ex in rest])
    return chosen, rest
