"""The demo policy's recipe (recipes/demo_policy) on a small world: a stage's mixture (trajectories, fact reads,
comparison rows, known facts), the stage chain run from one command, and (slow) the committed rows' fingerprint; and
the library's own path on a world, without any of the recipe's knobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from demo_policy.config import ExtraRowsConfig, StageConfig

from effirag.train.data_source import DataSource
from effirag.train.model import ModelConfig
from effirag.train.sft import OptimConfig, SFTConfig
from effirag.train.sft_data import SFTDataConfig
from effirag.train.tokenizer import TokenizerConfig
from effirag.world import generate_world, load_world_config

REPO = Path(__file__).resolve().parents[1]
TINY = ["passages=400", "train_questions=60", "dev_questions=20", "test_questions=40", "one_hop=0.25", "two_hop=0.35",
        "three_hop=0.15", "four_hop=0.1", "comparison=0.15"]  # fmt: skip
SHAPE = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, num_kv_heads=1)


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("world")
    generate_world(load_world_config("demo", overrides=TINY), out)
    return out


def _train(tmp_path: Path, name: str, **kw: object) -> SFTConfig:
    return SFTConfig(output_dir=tmp_path / f"run-{name}", optim=OptimConfig(max_steps=2, batch_size=2),
                     max_length=512, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_stage_runs_on_a_world_with_fact_and_comparison_paths(world_dir: Path, tmp_path: Path) -> None:
    """world → tokenizer (entity tokens) → tiny model → trajectories + fact and comparison paths + known facts → 2 SFT
    steps → exported checkpoint; the report counts what went in."""
    from demo_policy.stage import run_stage
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from effirag.train.gold_paths import world_fact_paths

    cfg = StageConfig(
        train=_train(
            tmp_path,
            "1",
            export_dir=tmp_path / "export",
            model_shape=SHAPE,
            tokenizer_train=TokenizerConfig(vocab_size=600, entity_tokens=True),
        ),
        data=SFTDataConfig(source=DataSource(world=world_dir), protocols=("tearag",), weights={"tearag": 0.5}),
        extra=ExtraRowsConfig(
            fact_weights={"searchr1": 0.1}, comparison_paths=4, comparison_weights={"tearag": 1.0}, knowledge_repeats=1
        ),
    )
    rep = run_stage(cfg, progress=False)
    assert rep.counts["fact_paths"] == len(world_fact_paths(world_dir)) > 0
    assert rep.counts["comparison_paths"] == 4
    by = rep.counts["by_protocol"]
    assert set(by) == {"tearag", "searchr1", "knowledge", "zeroshot"}
    assert by["searchr1"] > 0 and by["tearag"] > 0  # searchr1 rows come only from the fact paths
    tok = AutoTokenizer.from_pretrained(tmp_path / "export")
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "export").config.vocab_size >= len(tok)


def test_stage_runs_a_missing_previous_stage_first(world_dir: Path, tmp_path: Path) -> None:
    """A two-stage curriculum from one command: stage 2's `train.model` is missing, so its `previous_stage` YAML runs
    first and exports there; stage 2 then starts from it (same tokenizer). Once the model exists the earlier stage is
    not run again. Stage 2's export carries stage 1's inference settings when it has none of its own; a previous
    stage that does not export to `train.model`, or a cycle, is refused."""
    import yaml
    from demo_policy.stage import run_stage
    from transformers import AutoTokenizer

    stage1: dict[str, Any] = {
        "train": {
            "output_dir": str(tmp_path / "run1"),
            "export_dir": str(tmp_path / "stage1"),
            "tokenizer_train": {"vocab_size": 600},
            "model_shape": {
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_layers": 2,
                "num_heads": 2,
                "num_kv_heads": 1,
            },
            "optim": {"max_steps": 2, "batch_size": 2},
            "max_length": 512,
        },
        "data": {"source": {"world": str(world_dir)}, "protocols": ["tearag"], "weights": {"tearag": 0.2}},
    }
    (tmp_path / "stage1.yaml").write_text(yaml.safe_dump(stage1), encoding="utf-8")

    def stage2(model: Path, previous: Path) -> StageConfig:
        return StageConfig(
            train=_train(tmp_path, "2", export_dir=tmp_path / "stage2", model=model),
            data=SFTDataConfig(source=DataSource(world=world_dir), protocols=("searchr1",), weights={"searchr1": 0.2}),
            previous_stage=previous,
        )

    rep = run_stage(stage2(tmp_path / "stage1", tmp_path / "stage1.yaml"), progress=False)
    assert all((tmp_path / d / "model.safetensors").is_file() for d in ("stage1", "stage2"))
    assert set(rep.counts["by_protocol"]) == {"searchr1"}
    t1, t2 = (AutoTokenizer.from_pretrained(tmp_path / d) for d in ("stage1", "stage2"))
    assert t1.get_vocab() == t2.get_vocab()

    assert not (tmp_path / "stage2" / "inference.yaml").exists()  # its start has no settings to carry

    stamp = (tmp_path / "stage1" / "model.safetensors").stat().st_mtime_ns
    (tmp_path / "stage1" / "inference.yaml").write_text("protocol: tearag\nk: 3\nreranker: ../rr\n", "utf-8")
    run_stage(stage2(tmp_path / "stage1", tmp_path / "stage1.yaml"), progress=False)
    assert (tmp_path / "stage1" / "model.safetensors").stat().st_mtime_ns == stamp  # not re-run
    carried = yaml.safe_load((tmp_path / "stage2" / "inference.yaml").read_text("utf-8"))
    # the export runs as its start was measured; the reranker folder, relative to the start, is made absolute
    assert carried == {"protocol": "tearag", "reranker": str((tmp_path / "rr").resolve()), "k": 3}
    (tmp_path / "stage2" / "inference.yaml").write_text("k: 5\n", "utf-8")  # settings chosen for the export itself
    run_stage(stage2(tmp_path / "stage1", tmp_path / "stage1.yaml"), progress=False)
    assert (tmp_path / "stage2" / "inference.yaml").read_text("utf-8") == "k: 5\n"  # kept, not overwritten

    from effirag.errors import ConfigError

    with pytest.raises(ConfigError, match="previous_stage"):
        StageConfig(data=stage2(tmp_path / "x", tmp_path / "y").data, previous_stage=tmp_path / "stage1.yaml")
    with pytest.raises(ValueError, match=r"export_dir .*must be this stage's train\.model"):
        run_stage(stage2(tmp_path / "elsewhere", tmp_path / "stage1.yaml"), progress=False)
    (tmp_path / "loop.yaml").write_text(
        yaml.safe_dump(
            {
                **stage1,
                "train": {
                    **stage1["train"],
                    "export_dir": str(tmp_path / "loop"),
                    "model": str(tmp_path / "loop"),
                },
                "previous_stage": str(tmp_path / "loop.yaml"),
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="cycle"):
        run_stage(stage2(tmp_path / "loop", tmp_path / "loop.yaml"), progress=False)


def test_library_pipeline_on_a_world_without_recipe_knobs(world_dir: Path, tmp_path: Path) -> None:
    """The library alone (`effirag train sft`'s path) on a world with the default data config: every protocol of
    SFTDataConfig's default list writes rows, ~30% of agent trajectories carry a waste step (redundant_step_rate 0.3),
    every row trains some tokens and ends in EOS, and 2 SFT steps export a checkpoint with its report."""
    import json

    from effirag.train.data_source import load_gold
    from effirag.train.pipeline import SFTRunConfig, run_pipeline
    from effirag.train.sft_data import AGENT_PROTOCOLS, SFTDataBuilder, tokenize_examples
    from effirag.train.tokenizer import load_tokenizer

    data = SFTDataConfig(source=DataSource(world=world_dir))
    gold = load_gold(data.source)
    examples = SFTDataBuilder(gold.passages, gold.triplets, lambda t: len(t.split()), data).build(gold.paths)
    protocols = {e.protocol for e in examples}
    assert set(data.protocols) - {"zeroshot"} <= protocols  # zero-shot only for fully known paths
    agent = [e for e in examples if e.protocol in AGENT_PROTOCOLS]
    assert 0.2 < sum(bool(e.waste) for e in agent) / len(agent) < 0.4

    rep = run_pipeline(
        SFTRunConfig(
            train=_train(
                tmp_path,
                "lib",
                export_dir=tmp_path / "lib",
                model_shape=SHAPE,
                tokenizer_train=TokenizerConfig(vocab_size=600),
            ),
            data=data,
        ),
        progress=False,
    )
    assert rep.result is not None and rep.result.steps == 2 and rep.counts["paths"] == len(gold.paths)
    tok = load_tokenizer(tmp_path / "lib")
    for e in examples[::20]:
        rows = tokenize_examples([e], tok, 100_000)  # uncut: one row per (prompt, completion) pair
        assert all(any(x != -100 for x in r["labels"]) for r in rows), e.id
        assert rows[-1]["labels"][-1] == tok.eos_token_id, e.id  # a whole trajectory ends in a trained EOS
    report = json.loads((tmp_path / "lib" / "pipeline_report.json").read_text("utf-8"))
    assert report["counts"]["rows"] == rep.counts["rows"] and len(report["world_sha256"]) == 64


@pytest.mark.slow
def test_stage1_builds_the_rows_that_trained_the_committed_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Stage 1's rows over the demo world (preset demo, seed 0), encoded with checkpoints/demo-policy-sft's tokenizer,
    hash to data_fingerprints.json's sha256 and count: the recipe still builds what trained the checkpoint."""
    import json

    from demo_policy.check_fingerprints import FINGERPRINTS, stage_fingerprint

    world = tmp_path_factory.mktemp("demo-world")
    generate_world(load_world_config("demo", seed=0), world)
    expected = json.loads(FINGERPRINTS.read_text("utf-8"))["stages"]["stage1_induction"]
    assert stage_fingerprint("stage1_induction", world, REPO / "checkpoints" / "demo-policy-sft") == expected
