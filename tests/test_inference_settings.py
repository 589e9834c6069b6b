"""A checkpoint's inference settings (inference.yaml): loading, validation, and how the CLI applies them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.agent.config import EngineConfig
from effirag.agent.settings import SETTINGS_FILE, InferenceSettings, load_settings
from effirag.cli.agent import env_config
from effirag.cli.demo import FALLBACK
from effirag.cli.main import app
from effirag.env.config import settings_source
from effirag.errors import ConfigError
from effirag.retrieval.rerank import RerankerSpec, parse_reranker

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_demo_policy_carries_the_settings_the_demo_measured_with() -> None:
    s = load_settings(ROOT / "checkpoints" / "demo-policy")
    assert s is not None
    # the engine the demo built before the settings file existed, field by field
    before = EngineConfig(
        k=1, max_new_tokens=96, max_inserted_tokens=160, max_steps=8, max_total_tokens=3072, frequency_penalty=0.3
    )
    assert EngineConfig(**s.engine_values()) == before
    assert s.protocol == "tearag"
    assert str(s.reranker_spec(Path("checkpoints/demo-policy"))) == "checkpoints/demo-reranker"
    assert (ROOT / "checkpoints" / "demo-policy" / s.reranker / "").resolve() == (ROOT / "checkpoints/demo-reranker")
    # the demo's fallback for a checkpoint without the file states the same values
    fallback = InferenceSettings(**FALLBACK)  # type: ignore[arg-type]
    assert EngineConfig(**fallback.engine_values()) == before and fallback.protocol == s.protocol


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("k: 0\n", "InferenceSettings.k=0"),
        ("protocol: nope\n", "InferenceSettings.protocol='nope'"),
        ("frequency_penalty: 3.5\n", "InferenceSettings.frequency_penalty=3.5"),
        ("mode: teleport\n", "InferenceSettings.mode='teleport'"),
        ("temperature: 0.7\n", "InferenceSettings.temperature=0.7: unknown field"),
    ],
)
def test_bad_settings_name_the_value(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / SETTINGS_FILE).write_text(text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_settings(tmp_path)


def test_folder_without_settings_keeps_defaults(tmp_path: Path) -> None:
    assert load_settings(tmp_path) is None
    cfg = env_config(None, f"hf:{tmp_path}", None, ["k=2"])
    assert (cfg.protocol, cfg.reranker, cfg.engine) == ("searchr1", "", EngineConfig(k=2))


def _ckpt(tmp_path: Path) -> Path:
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / SETTINGS_FILE).write_text("protocol: hiprag\nreranker: ../rr\nk: 1\nfrequency_penalty: 0.3\n")
    return d


def test_user_options_win_over_the_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _ckpt(tmp_path)
    cfg = env_config(None, f"hf:{d}?device=cpu", None, [])
    assert (cfg.protocol, parse_reranker(cfg.reranker), cfg.engine.k, cfg.engine.frequency_penalty) == (
        "hiprag",
        RerankerSpec("bilinear", tmp_path / "rr"),
        1,
        0.3,
    )
    line = capsys.readouterr().err
    assert f"inference settings of {d}: protocol=hiprag" in line and "overridden" not in line
    cfg = env_config("searchr1", f"hf:{d}", None, ["k=4"], "none", "sparse")
    e = cfg.engine
    assert (cfg.protocol, parse_reranker(cfg.reranker), e.k, e.frequency_penalty, e.mode) == (
        "searchr1",
        None,
        4,
        0.3,
        "sparse",
    )
    assert "overridden: k, protocol, reranker" in capsys.readouterr().err


def test_a_cross_encoder_reranker_from_the_checkpoint_or_the_command_line(tmp_path: Path) -> None:
    """``reranker: cross-encoder:../ce`` in inference.yaml resolves against the checkpoint; --reranker wins."""
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / SETTINGS_FILE).write_text("reranker: cross-encoder:../ce\n")
    mine = parse_reranker(env_config(None, f"hf:{d}", None, []).reranker)
    assert mine == RerankerSpec("cross-encoder", tmp_path / "ce")
    other = parse_reranker(env_config(None, f"hf:{d}", None, [], "cross-encoder:/abs/ce2").reranker)
    assert other == RerankerSpec("cross-encoder", Path("/abs/ce2"))


def test_settings_source(tmp_path: Path) -> None:
    d = _ckpt(tmp_path)
    assert settings_source({"model": f"hf:{d}?max_batch_size=4", "inference": "auto"}) == d
    assert settings_source({"model": str(d), "inference": "auto"}) == d  # a bare folder is hf:DIR
    assert settings_source({"model": f"openai:http://h:1/v1#m?tokenizer={d}", "inference": "auto"}) == d
    assert settings_source({"model": "openai:http://h:1/v1#m", "inference": "auto"}) is None
    assert settings_source({"model": f"hf:{d}", "inference": "none"}) is None
    assert settings_source({"model": f"hf:{d}"}) is None  # a run config's default: no settings
    assert settings_source({"model": "scripted:x.json", "inference": str(d / SETTINGS_FILE)}) == d / SETTINGS_FILE


def test_ask_reads_the_settings_file(tmp_path: Path) -> None:
    """--inference FILE with a scripted backend: the file's protocol and max_steps drive the run."""
    corpus = tmp_path / "corpus.json"
    docs = [{"title": "A", "text": "Ana Lopez directed Blue River."}, {"title": "B", "text": "x"}]
    corpus.write_text(json.dumps(docs))
    r = runner.invoke(app, ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "idx"), "--no-dense"])
    assert r.exit_code == 0, r.output
    script = tmp_path / "s.json"
    script.write_text(json.dumps(["<answer> Ana Lopez </answer>"]))
    settings = tmp_path / "inference.yaml"
    settings.write_text("protocol: zeroshot\nmax_steps: 2\n")
    args = ["ask", "Who directed Blue River?", "--backend", f"scripted:{script}", "--inference", str(settings)]
    r = runner.invoke(app, [*args, "--index", str(tmp_path / "idx"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["prediction"] == "Ana Lopez"  # stdout holds only the JSON document
    assert "inference settings of" in r.stderr and "protocol=zeroshot max_steps=2" in r.stderr


def test_a_trained_policy_carries_its_starts_settings_with_the_reranker_absolute(tmp_path: Path) -> None:
    """start/inference.yaml: protocol tearag, k 1, reranker ../reranker (relative to start); the trained policy
    elsewhere gets the same values with the reranker folder absolute, so it loads to the same settings; a start
    without the file gives nothing."""
    from effirag.agent.settings import carry_settings, load_settings

    start, dest = tmp_path / "ck" / "start", tmp_path / "runs" / "rl" / "policy"
    start.mkdir(parents=True)
    dest.mkdir(parents=True)
    (start / "inference.yaml").write_text("protocol: tearag\nreranker: ../reranker\nk: 1\n", encoding="utf-8")
    assert carry_settings(start, dest) == dest / "inference.yaml"
    got = load_settings(dest)
    assert got is not None and (got.protocol, got.k) == ("tearag", 1)
    assert got.reranker == str((tmp_path / "ck" / "reranker").resolve())
    assert carry_settings(tmp_path / "runs", tmp_path / "other") is None
