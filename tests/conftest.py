"""Shared fixtures: the location of the real benchmark data (read in place, never copied)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
# recipes/ on the path: tests of a recipe's own code import it as a package (e.g. `demo_policy.drill`)
if str(REPO / "recipes") not in sys.path:
    sys.path.insert(0, str(REPO / "recipes"))
SHARED_DATA = Path(os.environ.get("EFFIRAG_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "README.md").is_file():
        pytest.fail(f"the shared benchmark data is missing at {SHARED_DATA} (set EFFIRAG_SHARED_DATA)")
    return SHARED_DATA
