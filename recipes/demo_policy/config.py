"""One stage of the demo policy's recipe: the library's trainer and data configs plus what only this recipe adds.

A stage YAML has five sections, read top to bottom: ``train`` (:class:`~effirag.train.sft.SFTConfig`), ``data``
(:class:`~effirag.train.sft_data.SFTDataConfig`: the world and the trajectory mixture), ``writing`` (how the
trajectories are written for the small model), ``extra`` (rows beside the trajectories: known facts, fact reads,
comparisons, the comparison drill), and ``previous_stage`` (the stage that exports this one's start model).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from effirag.config import check, option
from effirag.train.sft import SFTConfig
from effirag.train.sft_data import SFTDataConfig


@dataclass(frozen=True)
class WritingConfig:
    """How the trajectories are written (switches of ``trajectories.render_turns``), renamed and cut."""

    hop_aware_summary: bool = option(
        False,
        help="TeaRAG: end each summary with the next search's sub-question, or with a note that the question is "
        "answered, so whether to search again is written out before </summary>.",
    )
    known_notes: bool = option(
        False,
        help="TeaRAG: write each known hop that follows a search into that search's summary ('I already know that "
        "…'), so the recall is text the model writes, not a jump inside the next <entities> or the final answer.",
    )
    evidence_first: bool = option(
        False,
        help="Every protocol: the summary templates quote the evidence sentence before naming the answer, never "
        "'The reference states that ANSWER answers it: …'.",
    )
    comparison_reason: bool = option(
        False,
        help="TeaRAG: the last summary of a comparison question states both answers and the one compared out ('The "
        "two answers are A and B, so the answer is X.'), as Search-R1's last <think> does.",
    )
    comparison_pairs: bool = option(
        False,
        help="TeaRAG: the last summary of a comparison question names each entity beside its answer and then the one "
        "compared out ('Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So the answer is Bo Rinn.'), before the stop "
        "note, so the final answer copies a name from beside its value.",
    )
    comparison_decision: bool = option(
        False,
        help="With comparison_pairs: write the compare as a word before the name ('… The earlier is the second. So "
        "the answer is Bo Rinn.', 'The two are the same / different'): with two attention layers the policy cannot "
        "compare two values and copy the winning name in one token.",
    )
    rename_rate: float = option(
        0.0,
        help="Share of trajectories that search every hop whose entity names are swapped for other names of the same "
        "type, consistently in question, context and targets, so names must be copied, not recalled (rename.py).",
    )
    max_completions: int = option(
        0,
        help="Keep only each trajectory's first N trained completions (no EOS after them): a stage that teaches the "
        "first step alone; 0 keeps whole trajectories.",
    )

    def __post_init__(self) -> None:
        check(0.0 <= self.rename_rate <= 1.0, self, "rename_rate", "must be in [0, 1]")
        check(self.max_completions >= 0, self, "max_completions", "must be >= 0")
        check(self.comparison_pairs or not self.comparison_decision, self, "comparison_decision",
              "needs comparison_pairs: true (the decision is written on the pairs line)")  # fmt: skip

    def render_options(self) -> dict[str, bool]:
        """The keyword switches of ``render_turns``."""
        return {
            "hop_aware": self.hop_aware_summary,
            "known_notes": self.known_notes,
            "evidence_first": self.evidence_first,
            "comparison_reason": self.comparison_reason,
            "comparison_pairs": self.comparison_pairs,
            "comparison_decision": self.comparison_decision,
        }


@dataclass(frozen=True)
class DrillConfig:
    """The comparison drill (drill.py): pairs lines of further comparisons, only each compared-out answer trained."""

    rows: int = option(0, help="Drill rows (drawn after the `comparison_paths` ones); 0: no drill.")
    lines: int = option(16, help="Pairs lines per drill row.")
    evidence: bool = option(
        False, help="Lead each line with its last hop's evidence, as the trajectory's last summary writes it."
    )
    copies: int = option(1, help="Copies of each drill row: a denser drill without drawing more comparisons.")

    def __post_init__(self) -> None:
        check(self.rows >= 0, self, "rows", "must be >= 0")
        check(self.lines >= 1, self, "lines", "must be >= 1")
        check(self.copies >= 1, self, "copies", "must be >= 1")


@dataclass(frozen=True)
class ExtraRowsConfig:
    """Rows added beside the trajectories of the world's train split."""

    knowledge_repeats: int = option(
        0, help="Copies of each known fact as LM text (and as a zero-shot question: see knowledge_question_repeats)."
    )
    knowledge_question_repeats: int = option(
        -1,
        help="Zero-shot question copies of each known fact; -1: knowledge_repeats. Fewer keeps the zero-shot rows "
        "(all 'answer at once') from swamping the search-or-answer decision of the trajectories.",
    )
    fact_weights: dict[str, float] = option(
        factory=dict,
        help="Per-protocol copies of the single-hop path of every world fact the policy does not know and no dev/test "
        "question asks (gold_paths.world_fact_paths: every entity in the copying role); empty: none.",
    )
    comparison_paths: int = option(
        0, help="Comparison questions drawn afresh from the world's facts (comparisons.py); 0: none."
    )
    comparison_weights: dict[str, float] = option(
        factory=dict, help="Per-protocol copies of each of the `comparison_paths` paths; empty: none."
    )
    comparison_train: str = option(
        "all",
        help="Which tokens of the comparison rows are trained: 'all' of their completions, or only the 'final' one "
        "(the last summary and the answer), so that their earlier steps do not teach other questions to search again.",
    )
    comparison_both_orders: bool = option(
        False,
        help="Each comparison also asked with its sides swapped (comparisons.sides_swapped), so that naming an entity "
        "by its position is wrong for one of each pair and only the compare is right for both.",
    )
    drill: DrillConfig = option(factory=DrillConfig, help="The comparison drill.")

    def __post_init__(self) -> None:
        check(self.knowledge_repeats >= 0, self, "knowledge_repeats", "must be >= 0")
        check(self.knowledge_question_repeats >= -1, self, "knowledge_question_repeats", "must be >= -1")
        check(all(w >= 0 for w in self.fact_weights.values()), self, "fact_weights", "must be >= 0")
        check(self.comparison_paths >= 0, self, "comparison_paths", "must be >= 0")
        check(all(w >= 0 for w in self.comparison_weights.values()), self, "comparison_weights", "must be >= 0")
        check(bool(self.comparison_paths) == bool(self.comparison_weights), self, "comparison_weights",
              "must name protocols exactly when comparison_paths > 0")  # fmt: skip
        check(self.comparison_train in ("all", "final"), self, "comparison_train",
              f"{self.comparison_train!r} is not 'all' or 'final'")  # fmt: skip


@dataclass(frozen=True)
class StageConfig:
    """One stage of the recipe."""

    train: SFTConfig = option(factory=SFTConfig, help="Trainer settings.")
    data: SFTDataConfig = option(factory=SFTDataConfig, help="The world and the trajectory mixture.")
    writing: WritingConfig = option(factory=WritingConfig, help="How trajectories are written, renamed and cut.")
    extra: ExtraRowsConfig = option(factory=ExtraRowsConfig, help="Rows beside the trajectories.")
    previous_stage: Path | None = option(
        None,
        help="YAML of the stage that exports this stage's `train.model`, run first when that model does not exist "
        "yet (so one command reproduces every stage).",
    )

    def __post_init__(self) -> None:
        check(self.data.source.world is not None, self, "data", "the demo recipe trains on a world (data.source.world)")
        check(self.previous_stage is None or self.train.model is not None, self, "previous_stage",
              "needs train.model (the earlier stage's export_dir) to be set")  # fmt: skip
