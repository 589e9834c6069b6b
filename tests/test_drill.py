"""The comparison drill (recipes/demo_policy/drill.py): pairs lines with only the compared-out answer trained."""

from __future__ import annotations

from pathlib import Path

import pytest
from demo_policy.comparisons import world_comparison_paths
from demo_policy.drill import comparison_drill, drill_line

from effirag.train.gold_paths import GoldHop, GoldPath
from effirag.train.masking import IGNORE_INDEX
from effirag.train.sft_data import tokenize_examples
from effirag.train.trajectories import pair_reason


def _path(pid: str, a: tuple[str, str], b: tuple[str, str], answer: str, qtype: str = "comparison") -> GoldPath:
    hops = tuple(GoldHop(f"When was {name} born?", value, None, (), (name,)) for name, value in (a, b))
    return GoldPath(pid, f"Who was born first, {a[0]} or {b[0]}?", (answer,), hops, qtype)


ADA = _path("c1", ("Ada Vell", "3 May 1901"), ("Bo Rinn", "9 June 1880"), "Bo Rinn")
CY = _path("c2", ("Cy Orr", "Hemland"), ("Di Lusk", "Hemland"), "yes")


class _Words:
    """A whitespace tokenizer that keeps the leading space on a word (as byte-level BPE does) and maps words to ids."""

    eos_token_id = 0

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        import re

        return [self.vocab.setdefault(w, len(self.vocab) + 1) for w in re.findall(r"\s*\S+|\s+", text)]


def test_drill_line_trains_only_the_answer() -> None:
    """Ada Vell (1901) against Bo Rinn (1880): the pairs line is "Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So the
    answer is Bo Rinn.", cut after "is": context "Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So the answer is",
    trained " Bo Rinn.". Joined back they are the trajectory's line to the character."""
    head, answer = drill_line(ADA)
    assert (head.text, head.trained) == ("Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So the answer is", False)
    assert (answer.text, answer.trained) == (" Bo Rinn.", True)
    assert head.text + answer.text == pair_reason(ADA)


def test_drill_rows_hold_lines_and_train_no_eos() -> None:
    """Five paths at two lines a row: rows of 2, 2 and 1 line. Row 0 is "Ada…Bo Rinn." then "\\nCy Orr: Hemland; Di
    Lusk: Hemland. So the answer is yes." (the newline is context); the trained text of row 0 is " Bo Rinn." and
    " yes." only. Tokenised, no EOS is appended (a drill row is not a trajectory) and the trained labels are exactly
    the answers' tokens: " Bo" " Rinn." and " yes." → 3 of the row's tokens."""
    rows = comparison_drill([ADA, CY, ADA, CY, ADA], lines=2)
    assert [len(r.pairs[0]) for r in rows] == [4, 4, 2]
    assert all(not r.complete and r.protocol == "drill" for r in rows)
    segs = rows[0].pairs[0]
    assert [s.text for s in segs if s.trained] == [" Bo Rinn.", " yes."]
    assert segs[2].text == "\nCy Orr: Hemland; Di Lusk: Hemland. So the answer is" and not segs[2].trained
    tok = _Words()
    (row, *_) = tokenize_examples(rows, tok, max_length=512)
    assert row["input_ids"][-1] != tok.eos_token_id
    trained = [i for i, lab in zip(row["input_ids"], row["labels"], strict=True) if lab != IGNORE_INDEX]
    assert trained == tok.encode(" Bo Rinn.") + tok.encode(" yes.")


def test_drill_refuses_paths_without_a_pairs_line() -> None:
    """A compositional path has no pairs line: an error naming it, never a silently shorter row."""
    with pytest.raises(ValueError, match="c9"):
        comparison_drill([ADA, _path("c9", ("A", "1"), ("B", "2"), "A", qtype="compositional")], lines=4)
    with pytest.raises(ValueError, match="lines"):
        comparison_drill([ADA], lines=0)


def test_drill_draw_extends_the_comparison_paths(tmp_path: Path) -> None:
    """The pipeline draws comparison paths and drill lines in one call: the first n of a larger draw are the n-path
    draw, so adding a drill never changes a run's comparison trajectories."""
    from effirag.world import generate_world, load_world_config

    overrides = [
        "passages=400",
        "train_questions=60",
        "dev_questions=20",
        "test_questions=40",
        "two_hop=0.25",
        "comparison=0.3",
    ]
    generate_world(load_world_config("demo", overrides=overrides), tmp_path)
    small = world_comparison_paths(tmp_path, 20, seed=1)
    large = world_comparison_paths(tmp_path, 50, seed=1)
    assert [p.id for p in large[:20]] == [p.id for p in small]
    assert len(comparison_drill(large[20:], lines=8)) == 4


def test_drill_copies_must_be_positive() -> None:
    """A drill row copied zero times is no drill: the config refuses it and names the field and the value."""
    from demo_policy.config import DrillConfig

    assert DrillConfig(copies=3).copies == 3
    with pytest.raises(ValueError, match=r"copies.*0"):
        DrillConfig(copies=0)


def test_drill_lines_can_lead_with_the_last_hops_evidence() -> None:
    """``with_evidence``: each line starts as the trajectory's last summary does, with its last hop's evidence. The
    test paths' hops have no passage and no triplet, so trajectories.evidence writes "The reference answers it: w."
    (no draw): Ada's line is "The reference answers it: 9 June 1880. Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So
    the answer is" (context) + " Bo Rinn." (trained); Cy's second line starts "\\nThe reference answers it: Hemland.".
    Without the knob the rows are the plain drill's."""
    rows = comparison_drill([ADA, CY], lines=2, with_evidence=True, seed=3)
    segs = rows[0].pairs[0]
    assert (
        segs[0].text
        == "The reference answers it: 9 June 1880. Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So the answer is"
    )
    assert segs[2].text.startswith("\nThe reference answers it: Hemland. Cy Orr: Hemland;")
    assert [s.text for s in segs if s.trained] == [" Bo Rinn.", " yes."]
    plain = comparison_drill([ADA, CY], lines=2)[0].pairs[0]
    assert [s.text for s in plain] == [s.text.replace("The reference answers it: 9 June 1880. ", "").replace(
        "The reference answers it: Hemland. ", "") for s in segs]  # fmt: skip


def test_sides_swapped_asks_the_other_order_with_the_same_answer() -> None:
    """ "Who was born first, Ada Vell or Bo Rinn?" (answer Bo Rinn, hops Ada then Bo) becomes "Who was born first, Bo
    Rinn or Ada Vell?" with the hops Bo then Ada and the answer still Bo Rinn: its pairs line lists Bo Rinn first
    ("Bo Rinn: 9 June 1880; Ada Vell: 3 May 1901. So the answer is Bo Rinn."), so the entity read last is Ada Vell in
    the swapped path and Bo Rinn in the original. A path that is not a two-hop comparison is refused by name."""
    from demo_policy.comparisons import sides_swapped

    swapped = sides_swapped(ADA)
    assert swapped.question == "Who was born first, Bo Rinn or Ada Vell?"
    assert swapped.id == "c1~swapped" and swapped.answers == ("Bo Rinn",)
    assert [h.entities[0] for h in swapped.hops] == ["Bo Rinn", "Ada Vell"]
    assert pair_reason(swapped) == "Bo Rinn: 9 June 1880; Ada Vell: 3 May 1901. So the answer is Bo Rinn."
    assert sides_swapped(swapped).question == ADA.question
    with pytest.raises(ValueError, match="c9"):
        sides_swapped(_path("c9", ("A", "1"), ("B", "2"), "A", qtype="compositional"))


def test_find_pairs_line_reads_the_line_after_the_evidence() -> None:
    """The last summary of a comparison: the evidence ("… premiered in 1956." This implies the answer: 1956.), then the
    pairs line. The line found must start at the first name, "The Frozen Canyon (2010 film)", not reach back into the
    evidence (whose "the answer: 1956" also looks like "name: value"), and give the two sides as written; an earlier
    pairs line in the same text is not the one found. A text without the line gives None."""
    from effirag.train.trajectories import find_pairs_line

    line = "The Frozen Canyon (2010 film): 2010; Mouzyr Orchard: 1956. So the answer is"
    head = (
        'Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So the answer is Bo Rinn.\n<summary> The passage says: "Directed '
        'by Ziaswen Tykmont, Mouzyr Orchard is a horror film that premiered in 1956." This implies the answer: 1956. '
        + line
    )
    found = find_pairs_line(head)
    assert found is not None
    assert found.first == ("The Frozen Canyon (2010 film)", "2010")
    assert found.second == ("Mouzyr Orchard", "1956")
    assert head[found.start : found.end] == line
    assert find_pairs_line(pair_reason(ADA) or "") is not None
    assert find_pairs_line("This implies the answer: 1956. So the answer is 1956.") is None


def test_decision_line_names_the_side_before_the_name() -> None:
    """``decide``: the compare is a word, then the name is copied. Ada Vell (3 May 1901) against Bo Rinn (9 June
    1880): the earlier, Bo Rinn, is the second side, so "… 9 June 1880. The earlier is the second. So the answer is
    Bo Rinn."; asked the other way round Bo Rinn is the first side ("… The earlier is the first. …"). Cy Orr and Di
    Lusk are both of Hemland (answer yes): "The two are the same. So the answer is yes."; a "no" pair is "different".
    An answer naming neither side is refused by the path's id."""
    from demo_policy.comparisons import sides_swapped

    from effirag.train.trajectories import pair_decision

    assert pair_reason(ADA, decide=True) == (
        "Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. The earlier is the second. So the answer is Bo Rinn."
    )
    assert pair_reason(sides_swapped(ADA), decide=True) == (
        "Bo Rinn: 9 June 1880; Ada Vell: 3 May 1901. The earlier is the first. So the answer is Bo Rinn."
    )
    assert (
        pair_reason(CY, decide=True) == "Cy Orr: Hemland; Di Lusk: Hemland. The two are the same. So the answer is yes."
    )
    no = _path("c3", ("Cy Orr", "Hemland"), ("Di Lusk", "Vorland"), "no")
    assert pair_decision(no) == ("The two are", "different")
    assert pair_reason(ADA) == "Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So the answer is Bo Rinn."  # unchanged
    with pytest.raises(ValueError, match="c8"):
        pair_decision(_path("c8", ("Ada Vell", "1901"), ("Bo Rinn", "1880"), "Cy Orr"))


def test_decision_drill_trains_the_decision_word_and_the_name() -> None:
    """With ``decide`` the line is cut before the decision word: context "Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880.
    The earlier is the", trained " second. So the answer is Bo Rinn."; for Cy, context "…Hemland. The two are",
    trained " the same. So the answer is yes.". Tokenised with the word tokenizer, the trained labels of Ada's row
    are those 7 words: " second." " So" " the" " answer" " is" " Bo" " Rinn."."""
    head, answer = drill_line(ADA, decide=True)
    assert (head.text, head.trained) == ("Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. The earlier is the", False)
    assert (answer.text, answer.trained) == (" second. So the answer is Bo Rinn.", True)
    assert head.text + answer.text == pair_reason(ADA, decide=True)
    rows = comparison_drill([ADA, CY], lines=2, decide=True)
    segs = rows[0].pairs[0]
    assert segs[2].text == "\nCy Orr: Hemland; Di Lusk: Hemland. The two are"
    assert [s.text for s in segs if s.trained] == [
        " second. So the answer is Bo Rinn.",
        " the same. So the answer is yes.",
    ]
    tok = _Words()
    (row, *_) = tokenize_examples(comparison_drill([ADA], lines=1, decide=True), tok, max_length=512)
    trained = [i for i, lab in zip(row["input_ids"], row["labels"], strict=True) if lab != IGNORE_INDEX]
    assert len(trained) == 7 and trained == tok.encode(" second. So the answer is Bo Rinn.")


def test_find_pairs_line_stops_before_the_decision_word() -> None:
    """A decision line "Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. The earlier is the second. …" is found with its
    two sides, and its end is right after the cue "The earlier is the" (62 characters: the 43-character pairs part,
    a space, the 18-character cue), where the probe asks for the decision; the same for "The two are"."""
    from effirag.train.trajectories import find_pairs_line

    found = find_pairs_line(pair_reason(ADA, decide=True) or "")
    assert found is not None
    assert (found.first, found.second) == (("Ada Vell", "3 May 1901"), ("Bo Rinn", "9 June 1880"))
    assert (found.start, found.end) == (0, 62)
    assert (pair_reason(ADA, decide=True) or "")[: found.end].endswith("1880. The earlier is the")
    cy = find_pairs_line(pair_reason(CY, decide=True) or "")
    assert cy is not None and (pair_reason(CY, decide=True) or "")[: cy.end].endswith("Hemland. The two are")
