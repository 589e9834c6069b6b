"""The committed embedded policy (checkpoints/demo-policy) loads through the HF backend and answers a demo-world
question end to end with the TeaRAG protocol (engine, parser, observations — the same path as `effirag demo`).

Retrieval here is a small lexical retriever over the demo world (word overlap of query + key entities with each
passage and triplet), so the test needs no encoder index; the demo itself uses the real KAG retriever.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from effirag.retrieval.base import RetrievalResult
from effirag.types import ItemKind, RetrievedItem

CKPT = Path(__file__).resolve().parents[1] / "checkpoints" / "demo-policy"
_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2}


class OverlapRetriever:
    """Ranks the world's passages and triplets by shared words with the query and the key entities."""

    def __init__(self, items: list[RetrievedItem]) -> None:
        self.items = items
        self.bags = [_words(f"{it.title} {it.text}") for it in items]

    def retrieve(
        self,
        query: str,
        mode: str = "passage",
        k: int = 5,
        entities: Sequence[str] | None = None,
        offset: int = 0,
    ) -> RetrievalResult:
        q = _words(query + " " + " ".join(entities or []))
        kinds = {ItemKind.CHUNK} if mode in ("passage", "sparse") else {ItemKind.CHUNK, ItemKind.TRIPLET}
        scored = [(len(q & b) / (1 + 0.01 * len(b)), i) for i, b in enumerate(self.bags) if self.items[i].kind in kinds]
        scored.sort(key=lambda x: -x[0])
        return RetrievalResult([self.items[i] for _, i in scored[offset : offset + k]])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from effirag.world import generate_world, load_world_config

    out = tmp_path_factory.mktemp("world")
    generate_world(load_world_config("demo", seed=0), out)
    return out


@pytest.mark.slow
@pytest.mark.skipif(not (CKPT / "model.safetensors").is_file(), reason="no committed checkpoint")
def test_checkpoint_answers_a_demo_question_end_to_end(world: Path) -> None:
    from effirag.agent.config import EngineConfig
    from effirag.agent.engine import run_episodes
    from effirag.agent.protocols import get_protocol
    from effirag.data import load_corpus, load_questions
    from effirag.data.io import iter_jsonl
    from effirag.llm.factory import make_generator
    from effirag.metrics import exact_match
    from effirag.types import Triplet

    gen = make_generator(f"hf:{CKPT}")
    assert gen.name.startswith("hf:")
    corpus = load_corpus(world / "corpus.jsonl")
    items = [RetrievedItem(ItemKind.CHUNK, p.id, p.text, 0.0, title=p.title) for p in corpus.passages]
    for _, r in iter_jsonl(world / "triplets.jsonl"):
        t = Triplet(r["head"], r["relation"], r["tail"])
        items.append(RetrievedItem(ItemKind.TRIPLET, f"t{len(items)}", t.text, 0.0))
    test = load_questions(world / "questions_test.jsonl", corpus).examples
    one_hop = [e for e in test if e.hops == 1][:8]
    engine = EngineConfig(k=3, max_new_tokens=96, max_inserted_tokens=160, max_steps=6)
    trajs = run_episodes(gen, OverlapRetriever(items), get_protocol("tearag"), one_hop, engine)
    assert all(t.steps for t in trajs)
    ok = [t for t, e in zip(trajs, one_hop, strict=True) if t.format_ok and exact_match(t.prediction or "", e.answers)]
    # the policy follows the format and answers at least one of these 1-hop questions correctly from the retrieval
    assert sum(t.format_ok for t in trajs) >= len(trajs) // 2
    assert ok, [(e.question, t.prediction) for t, e in zip(trajs, one_hop, strict=True)]
    searched = ok[0].steps[0]
    assert searched.action.value == "search" and searched.items and searched.inserted_tokens > 0
