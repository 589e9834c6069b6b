"""Where SFT gold paths come from: an EffiRAG-World folder, or a user's question file with gold decompositions
(MuSiQue / FlashRAG layouts) over its corpus, with OpenIE triplets when there are any.

Both give the same three things (:class:`GoldData`): the gold paths (:mod:`effirag.train.gold_paths`), and the
passages and triplets that the simulated retrieval draws distractors from (:mod:`effirag.train.context_sim`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from effirag.config import check, option
from effirag.errors import ConfigError
from effirag.train.gold_paths import GoldPath
from effirag.types import Passage, Triplet

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DataSource:
    """One source of gold decompositions: ``world`` (a folder, generated when missing) or ``questions`` +
    ``corpus`` (+ ``openie``)."""

    world: Path | None = option(None, help="EffiRAG-World folder; generated from `preset`/`seed` when missing.")
    preset: str = option("demo", help="World preset generated into `world` when the folder is missing.")
    seed: int = option(0, help="Seed of the world generated into `world` when the folder is missing.")
    split: str = option("train", help="The world's question split whose gold paths are trained on.")
    questions: Path | None = option(
        None, help="Question file with gold decompositions (MuSiQue / FlashRAG layout), instead of a world."
    )
    corpus: Path | None = option(None, help="Corpus of `questions` (its passages are the simulated retrieval's).")
    openie: Path | None = option(
        None, help="OpenIE triplets of `corpus` (HippoRAG layout): graph-mode observations and key entities."
    )
    holdout: int = option(
        0,
        help="The first N questions of `questions` are not trained on: held out for evaluation (`eval qa --limit N` "
        "on the same file runs exactly those).",
    )

    def __post_init__(self) -> None:
        check(self.world is None or self.questions is None, self, "world",
              "give one of `world` or `questions` (with `corpus`), not both")  # fmt: skip
        check(self.questions is None or self.corpus is not None, self, "corpus", "`questions` needs its `corpus`")
        check(self.openie is None or self.questions is not None, self, "openie", "only with `questions`")
        check(bool(self.split), self, "split", "must name a split")
        check(self.holdout >= 0, self, "holdout", "must be >= 0")
        check(self.holdout == 0 or self.questions is not None, self, "holdout", "only with `questions`")


@dataclass
class GoldData:
    """Gold paths with the passages and triplets behind them; ``world`` is the world folder when there is one."""

    paths: list[GoldPath]
    passages: list[Passage]
    triplets: list[Triplet]
    world: Path | None = None


def ensure_world(source: DataSource) -> Path:
    """The world folder of ``source``, generated first when it does not exist yet."""
    if source.world is None:
        raise ValueError("DataSource.world is None: this source is a question file, not a world")
    d = Path(source.world)
    if not (d / "world.json").is_file():
        from effirag.world import generate_world, load_world_config

        log.info("generating world preset=%s seed=%d into %s", source.preset, source.seed, d)
        generate_world(load_world_config(source.preset, seed=source.seed), d)
    return d


def load_gold(source: DataSource) -> GoldData:
    """The gold paths of ``source`` (a world's split, or every question of the file that has a decomposition)."""
    from effirag.train.gold_paths import musique_paths, world_paths

    if source.world is None and source.questions is None:
        raise ConfigError("DataSource", "world", None, "no gold paths: give `world` or `questions` (with `corpus`)")
    if source.world is not None:
        world = ensure_world(source)
        paths, passages, triplets = world_paths(world, source.split)
        return GoldData(paths, passages, triplets, world)
    assert source.questions is not None and source.corpus is not None  # checked in DataSource
    paths, passages, triplets = musique_paths(source.questions, source.corpus, source.openie, skip=source.holdout)
    if not paths:
        raise ValueError(f"{source.questions}: no question has a gold decomposition; SFT data needs one per question")
    return GoldData(paths, passages, triplets)


def tokenizer_texts(source: DataSource) -> list[str]:
    """Text a fresh BPE is trained on: the source's passages and questions (a world's known facts too), protocol
    prompts, and the SFT data's own phrases (summaries, triplet documents, answer lines), so BPE learns them as
    words."""
    from effirag.agent.protocols import PROTOCOLS, get_protocol
    from effirag.data.io import iter_jsonl
    from effirag.train.trajectories import SUMMARY_TEXT, SUMMARY_TRIPLET

    if source.world is not None:
        world = ensure_world(source)
        texts = [f"{r['title']}\n{r['text']}" for _, r in iter_jsonl(world / "corpus.jsonl")]
        texts += [r["question"] for _, r in iter_jsonl(world / "questions_train.jsonl")]
        for _, r in iter_jsonl(world / "knowledge.jsonl"):
            texts += [r["text"], r["question"]]
    else:
        from effirag.data import load_corpus, load_questions

        assert source.questions is not None and source.corpus is not None  # checked in DataSource
        corpus = load_corpus(source.corpus)
        texts = [f"{p.title}\n{p.text}" for p in corpus.passages]
        texts += [q.question for q in load_questions(source.questions, corpus).examples]
    texts += [get_protocol(p).build_prompt("Who is it?", "Doc 1") for p in PROTOCOLS] * 50
    filled = [t.format(t="(A, b, C)", a="C", s="A b C.") for t in SUMMARY_TRIPLET + SUMMARY_TEXT]
    texts += [*filled, "Doc 1 (Triplet) (A, b, C)\nFinal answer: C"] * 50
    return texts


def entity_names(source: DataSource) -> list[str]:
    """Every entity name of the source's world (``world.json``), for ``tokenizer_train.entity_tokens``."""
    from effirag.world.world import World

    if source.world is None or not (Path(source.world) / "world.json").is_file():
        raise FileNotFoundError(
            f"tokenizer_train.entity_tokens needs a generated world, but {source.world} holds no world.json"
        )
    return sorted({e.name for e in World.load(Path(source.world)).entities.values()})
