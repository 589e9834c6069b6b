"""Shared fixtures: the location of the real benchmark data (read in place, never copied)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from effirag.types import Passage, Triplet

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


# A six-passage corpus with its triplets, indexed once per test module: what the retrieval, mode and composable-run
# tests search.
SMALL_PASSAGES = [
    Passage("p0", "Amsterdam", "Amsterdam is the capital of the Netherlands."),
    Passage("p1", "Rotterdam", "Rotterdam has the largest port in Europe."),
    Passage("p2", "Dutch East India Company", "The company was founded in 1602 in Amsterdam."),
    Passage("p3", "Tulip", "Tulips bloom in spring across the Netherlands."),
    Passage("p4", "Rembrandt", "Rembrandt painted The Night Watch in Amsterdam."),
    Passage("p5", "Europe", "Europe is a continent with many ports."),
]
SMALL_TRIPLETS = [
    Triplet("Amsterdam", "capital of", "Netherlands", "p0"),
    Triplet("Rotterdam", "has", "largest port in Europe", "p1"),
    Triplet("Dutch East India Company", "founded in", "1602", "p2"),
    Triplet("Dutch East India Company", "based in", "Amsterdam", "p2"),
    Triplet("Rembrandt", "painted", "The Night Watch", "p4"),
    Triplet("The Night Watch", "located in", "Amsterdam", "p4"),
]


@pytest.fixture(scope="session")
def small_passages() -> list[Passage]:
    return list(SMALL_PASSAGES)


@pytest.fixture(scope="module")
def small_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SMALL_PASSAGES and SMALL_TRIPLETS indexed (BM25, hashing-encoder dense, knowledge graph) in a fresh folder."""
    from effirag.retrieval.encoders import HashingEncoder
    from effirag.retrieval.index import build_index

    folder = tmp_path_factory.mktemp("small-index")
    build_index(SMALL_PASSAGES, folder, encoder=HashingEncoder(256), triplets=SMALL_TRIPLETS, corpus_path="mem")
    return folder


@pytest.fixture(scope="module")
def small_retriever(small_index_dir: Path) -> Any:
    """An ``EffiRetriever`` over :func:`small_index_dir`."""
    from effirag.retrieval.encoders import HashingEncoder
    from effirag.retrieval.facade import load_retriever

    return load_retriever(small_index_dir, encoder=HashingEncoder(256))
