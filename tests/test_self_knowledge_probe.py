"""The self-knowledge probe's pieces: the cached teacher forcing equals a full forward, the mixed demo set writes one
demo answered from memory in HiPRAG's own format, and the bootstrap interval brackets the AUROC."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from demo_policy.self_knowledge_probe import (
    auroc_interval,
    continuation_logprob,
    log_odds,
    mixed_shots,
    prefix_cache,
    report,
    separation,
    within_strata_auroc,
)

from effirag.agent.protocols import get_protocol
from effirag.agent.protocols.fewshot import Demo, DemoHop
from effirag.agent.protocols.hiprag import hiprag_format_ok
from effirag.types import Passage
from tiny_models import make_tiny_model


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from effirag.llm.hf import HFGenerator

    return HFGenerator(make_tiny_model(tmp_path_factory.mktemp("tiny")), device="cpu").load()


def test_cached_continuation_equals_full_forward(gen) -> None:  # type: ignore[no-untyped-def]
    import torch

    shared = gen.encode("The river flows through the city of Lyon. ", prompt=True)
    rest, cont = gen.encode("Who directed the film?"), gen.encode(" Ana Lopez")
    cache = prefix_cache(gen.model, shared)
    got = continuation_logprob(gen.model, cache, rest, cont)
    again = continuation_logprob(gen.model, cache, rest, cont)  # the cache is not consumed
    ids = torch.tensor([shared + rest + cont])
    with torch.no_grad():
        lp = torch.log_softmax(gen.model(ids).logits[0].float(), -1)  # (L, V)
    n = len(shared) + len(rest)
    want = float(sum(lp[n - 1 + i, t] for i, t in enumerate(cont)))
    assert got == pytest.approx(want, abs=1e-4)
    assert again == got
    a, b = " Ana Lopez", " Paris"
    assert log_odds(gen, cache, "Who directed the film?", a, b) == pytest.approx(
        got - continuation_logprob(gen.model, cache, rest, gen.encode(b)), abs=1e-4
    )


def _demo(i: int) -> Demo:
    p = Passage(id=f"p{i}", title=f"T{i}", text=f"Person {i} was born in City {i}.")
    q, a = f"In what city was Person {i} born?", f"City {i}"
    return Demo(id=f"d{i}", question=q, answer=a, hops=(DemoHop(q, a, p),))


def test_mixed_shots_answers_the_middle_demo_from_memory() -> None:
    demos = [_demo(i) for i in range(3)]
    proto = get_protocol("hiprag").use_demos(demos)
    shots = mixed_shots(proto, demos, memory=1)
    blocks = [b for b in shots.split("\n\n") if b.strip()]
    assert len(blocks) == 3
    assert [("<search>" in b) for b in blocks] == [True, False, True]
    assert "I know the answer to: In what city was Person 1 born?" in blocks[1]
    for block in blocks:
        assert hiprag_format_ok(block.split("\n", 1)[1]).ok, block
    assert blocks[0] + "\n\n" == proto.__class__().use_demos(demos[:1]).shots()


def test_interval_brackets_the_auroc_and_separation_counts() -> None:
    pos, neg = [3.0, 2.0, 1.5, 0.5, -1.0], [1.0, 0.0, -0.5, -2.0]
    # Pairs pos > neg: 3.0 beats 4, 2.0 beats 4, 1.5 beats 4, 0.5 beats 3, -1.0 beats 1 → 16 / 20 = 0.8.
    lo, hi = auroc_interval(pos, neg, seed=0)
    assert lo <= 0.8 <= hi
    s = separation(pos, neg, seed=0)
    assert s["auroc_known_vs_unknown"] == pytest.approx(0.8)
    assert s["positive_share_known"] == pytest.approx(4 / 5)
    assert s["positive_share_unknown"] == pytest.approx(1 / 4)
    assert math.isclose(s["mean_known"], 1.2) and math.isclose(s["mean_unknown"], -0.375)


def test_script_runs_end_to_end(tmp_path: Path, gen, shared_data: Path) -> None:  # type: ignore[no-untyped-def]

    from demo_policy.self_knowledge_probe import main

    questions = shared_data / "popqa" / "questions.json"
    out = tmp_path / "r.json"
    # A random-init model answers nothing right: the probe says so instead of writing undefined AUROCs.
    with pytest.raises(ValueError, match="0 of 6 questions answered right"):
        main(["--model", str(gen.model_path), "--questions", str(questions), "--limit", "6", "--out", str(out)])


def test_report_reads_known_as_closed_book_right() -> None:
    rows = [{"right": r, "conf": c} for r, c in [(True, -0.1), (True, -0.5), (False, -0.3), (False, -2.0)]]
    # Confidence: right {-0.1, -0.5} vs wrong {-0.3, -2.0}: pairs won 2 + 1 = 3 of 4 → 0.75.
    # Decision scores per row [2, -1, 0.5, -3]: known {2, -1} vs unknown {0.5, -3}: 2 > 0.5, 2 > -3, -1 < 0.5,
    # -1 > -3 → 3 of 4 → 0.75; share > 0: known 1/2, unknown 1/2.
    for r, x in zip(rows, [2.0, -1.0, 0.5, -3.0], strict=True):
        r["mixed"] = x
    got = report(rows, ["mixed"], ["a", "a", "a", "a"], seed=0)
    assert got["questions"] == 4
    assert got["closed_book"]["em"] == 0.5 and got["closed_book"]["auroc_right_vs_wrong"] == pytest.approx(0.75)
    assert got["mixed"]["auroc_known_vs_unknown"] == pytest.approx(0.75)
    assert got["mixed"]["positive_share_known"] == 0.5 and got["mixed"]["positive_share_unknown"] == 0.5
    assert got["mixed"]["auroc_within_strata"] == pytest.approx(0.75)  # one stratum: the pooled AUROC
    assert got["closed_book"]["em_by_stratum"] == {"a": 0.5}


def test_within_strata_auroc_ignores_pairs_across_strata() -> None:
    scores, known, strata = [5.0, 5.0, 6.0, 1.0, 1.0], [True, True, False, False, False], list("aaabb")
    # Within a: 5 < 6 twice → 0 of 2; b has no known question. Pooled: each 5 beats b's two 1s → 4 of 6.
    assert within_strata_auroc(scores, known, strata) == 0.0
    assert report([{"right": k, "conf": x, "s": x} for x, k in zip(scores, known, strict=True)], ["s"], strata, 0)["s"][
        "auroc_known_vs_unknown"
    ] == pytest.approx(4 / 6)
    assert within_strata_auroc([1.0, 2.0], [True, False], ["a", "b"]) is None


def test_rows_mode_recomputes_the_report_with_the_files_relations(tmp_path: Path, shared_data: Path) -> None:
    import json

    from demo_policy.self_knowledge_probe import main

    questions = shared_data / "popqa" / "questions.json"
    first = json.loads(questions.read_text())[:4]
    rows = [{"id": str(q["id"]), "right": i % 2 == 0, "conf": -float(i), "all_search": float(i), "mixed": 0.0,
             "asked": 1.0} for i, q in enumerate(first)]  # fmt: skip
    rows_file = tmp_path / "r.rows.jsonl"
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    main(["--rows", str(rows_file), "--questions", str(questions), "--out", str(tmp_path / "again.json")])
    got = json.loads((tmp_path / "again.json").read_text())
    assert got["questions"] == 4
    assert set(got["closed_book"]["em_by_stratum"]) <= {q["prop"] for q in first}
    rows_file.write_text(json.dumps({**rows[0], "id": "no-such-id"}) + "\n")
    with pytest.raises(ValueError, match="no-such-id"):
        main(["--rows", str(rows_file), "--questions", str(questions), "--out", str(tmp_path / "x.json")])
