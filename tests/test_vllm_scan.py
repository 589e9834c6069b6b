"""Starting vLLM after numba was imported (bm25s imports it where installed): the module attributes vLLM's kernel scan
cannot read (llvmlite's ``ffi.lib``, which answers any attribute name, ``__dict__`` included) are hidden while it
starts and put back after (:mod:`effirag.llm.vllm_scan`). The real case runs in tests/on_vllm/test_readme_smollm2.py
(GRPO over a BM25 index with vLLM rollouts)."""

from __future__ import annotations

import types
from typing import Any

import pytest

from effirag.llm.vllm_scan import hidden_from_kernel_scan, unscannable, unscannable_attributes


class AnyName:
    """Like llvmlite's ``_lib_wrapper``: every attribute is looked up, ``__dict__`` too."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        return lambda: name


def test_an_object_answering_any_attribute_is_hidden_while_vllm_starts_and_restored() -> None:
    mod = types.ModuleType("fake_ffi")
    lib, plain = AnyName(), types.SimpleNamespace(kernel=1)
    mod.lib, mod.plain = lib, plain  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="get"):
        vars(lib).get("kernel")  # what vLLM's scan does, and fails on
    assert unscannable(lib) and not unscannable(plain) and not unscannable(3)
    assert unscannable_attributes({"fake_ffi": mod}) == [(mod, "lib", lib)]
    import sys

    sys.modules["fake_ffi"] = mod
    try:
        with pytest.raises(RuntimeError, match="boom"), hidden_from_kernel_scan() as hidden:
            assert (mod, "lib", lib) in hidden and not hasattr(mod, "lib") and mod.plain is plain
            raise RuntimeError("boom")
        assert mod.lib is lib  # type: ignore[attr-defined]
    finally:
        del sys.modules["fake_ffi"]
