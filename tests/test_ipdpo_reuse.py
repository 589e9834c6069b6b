"""Reusing another IP-DPO run's sampled paths (IPDPORunConfig.reuse_paths, effirag.train.dpo.reuse): a round saves
its paths with their token ledgers and sampling record; a variant with equal sampling takes them without sampling
and pairs exactly as the first run did; a difference in round 1 fails naming the field; in a later round it means
sampling."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from effirag.agent import get_protocol
from effirag.errors import ConfigError
from effirag.llm.base import Generator
from effirag.llm.scripted import ScriptedGenerator
from effirag.train.dpo.ipdpo import run_round
from effirag.train.dpo.reuse import PATHS, SAMPLING, load_paths, mismatch, sampling_record
from test_engine_support import LexicalRetriever
from test_ipdpo_round import QUESTIONS, SCRIPT, _cfg, model_dir, tail_sim  # noqa: F401  (model_dir: a fixture)


def _env() -> tuple[Any, ...]:
    return (QUESTIONS, get_protocol("tearag"), LexicalRetriever(), tail_sim)


def _script(model: Any, tok: Any) -> Generator:
    return ScriptedGenerator(SCRIPT, tok)


def _never(model: Any, tok: Any) -> Generator:
    raise AssertionError("a reused round must not sample")


def _pairs(out: Path, r: int = 1) -> list[tuple[str, int, int]]:
    rows = [json.loads(x) for x in (out / f"round-{r}" / "pairs.jsonl").read_text().splitlines()]
    return [(p["question_id"], p["chosen"], p["rejected"]) for p in rows]


def test_a_variant_with_equal_sampling_reuses_the_paths_and_pairs_alike(model_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    first = _cfg(model_dir, tmp_path / "a")
    rec_a = run_round(first, 1, model_dir, _env(), _script)
    assert rec_a["reused_from"] == ""
    assert (tmp_path / "a" / "round-1" / PATHS).is_file() and (tmp_path / "a" / "round-1" / SAMPLING).is_file()
    saved = load_paths(tmp_path / "a" / "round-1")
    assert len(saved) == 10 and all(t.tokens for t in saved)  # every path with its token ledger

    # Another DPO step (learning rate, η): the sampling is the same, so round 1 is taken from run a.
    variant = replace(first, output_dir=str(tmp_path / "b"), eta=(1.0,), train=replace(first.train, learning_rate=5e-4))
    rec_b = run_round(variant, 1, model_dir, _env(), _never, reuse=tmp_path / "a")
    assert rec_b["eta"] == 1.0 and rec_b["dpo_steps"] == 2  # trained on the reused pairs
    assert rec_b["reused_from"] == str(tmp_path / "a" / "round-1")
    assert rec_b["paths"] == rec_a["paths"] == 10
    assert rec_b["generated_tokens_per_path"] == rec_a["generated_tokens_per_path"]
    assert rec_b["reward/total"] == pytest.approx(rec_a["reward/total"])
    # The pairs hand-worked in test_ipdpo_round, from the reused ledgers.
    assert _pairs(tmp_path / "b") == _pairs(tmp_path / "a") == [("q1", 0, 2), ("q1", 4, 3), ("q2", 0, 2), ("q2", 1, 4)]
    # The variant saves the paths again, so a third run can reuse it in turn.
    assert mismatch(tmp_path / "b" / "round-1", sampling_record(variant, 1, model_dir, QUESTIONS)) == ""


def test_different_sampling_fails_in_round_one_and_samples_later(model_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    first = _cfg(model_dir, tmp_path / "a")
    run_round(first, 1, model_dir, _env(), _script)
    hotter = replace(first, output_dir=str(tmp_path / "c"), temperature=0.7)
    with pytest.raises(ConfigError, match=r"reuse_paths=.*sampling differs in engine\.temperature"):
        run_round(hotter, 1, model_dir, _env(), _never, reuse=tmp_path / "a")
    # Round 2 of run a was never run: the round samples and says where nothing came from.
    rec = run_round(replace(first, output_dir=str(tmp_path / "d")), 2, model_dir, _env(), _script, reuse=tmp_path / "a")
    assert rec["reused_from"] == "" and rec["paths"] == 10


def test_mismatch_names_every_differing_field(model_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    cfg = _cfg(model_dir, tmp_path / "a")
    rec = sampling_record(cfg, 1, model_dir, QUESTIONS)
    folder = tmp_path / "saved"
    folder.mkdir()
    assert "holds no saved paths" in mismatch(folder, rec)
    (folder / PATHS).write_text("")
    other = {**rec, "policy": "0" * 64, "engine": {**rec["engine"], "seed": 7, "n": 3}}
    (folder / SAMPLING).write_text(json.dumps(other))
    assert mismatch(folder, rec).endswith("its sampling differs in engine.n, engine.seed, policy")
    # Round 2 of the same config samples with seed + 1000: its record differs from round 1's in the seed alone.
    (folder / SAMPLING).write_text(json.dumps(sampling_record(cfg, 2, model_dir, QUESTIONS)))
    assert mismatch(folder, rec).endswith("its sampling differs in engine.seed")
    # Other questions (one dropped) change the questions digest.
    (folder / SAMPLING).write_text(json.dumps(sampling_record(cfg, 1, model_dir, QUESTIONS[:1])))
    assert mismatch(folder, rec).endswith("its sampling differs in questions")


def test_the_record_is_json_and_names_the_policy_by_its_weights(model_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    rec = sampling_record(_cfg(model_dir, tmp_path), 1, model_dir, QUESTIONS)
    assert json.loads(json.dumps(rec)) == rec
    assert len(rec["policy"]) == 64 and rec["engine"]["n"] == 5 and rec["engine"]["token_ids"] is True
    assert "model" not in rec["env"] and "questions" not in rec["env"]
    with pytest.raises(Exception, match="safetensors"):
        sampling_record(_cfg(model_dir, tmp_path), 1, tmp_path, QUESTIONS)


def test_a_run_reuses_rounds_until_its_policy_differs(model_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    """Two rounds of run a; run b has another learning rate: its round 1 comes from run a (same start, same
    sampling), its round-1 policy differs from run a's, so round 2 is sampled here (the sampler is made once)."""
    from effirag.train.dpo import ipdpo

    made: list[str] = []

    def counting(model: Any, tok: Any) -> Generator:
        made.append("sampler")
        return _script(model, tok)

    a = replace(_cfg(model_dir, tmp_path / "a"), rounds=2)
    b = replace(a, output_dir=str(tmp_path / "b"), reuse_paths=str(tmp_path / "a"),
                train=replace(a.train, learning_rate=5e-4))  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ipdpo, "_environment", lambda cfg, tokenizer: _env())
        ipdpo.run_ipdpo(a, generator=counting)
        assert len(made) == 2
        res = ipdpo.run_ipdpo(b, generator=counting)
    assert len(made) == 3 and res.rounds == 2
    rounds = [json.loads(x) for x in (tmp_path / "b" / "rounds.jsonl").read_text().splitlines()]
    assert [r["reused_from"] for r in rounds] == [str(tmp_path / "a" / "round-1"), ""]
