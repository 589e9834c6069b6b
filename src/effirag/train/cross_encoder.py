"""Train a cross-encoder reranker (:class:`~effirag.retrieval.similarity.CrossEncoderSimilarity`) on a question file's
gold passages, for ``--reranker cross-encoder:DIR``.

TeaRAG reranks with a pretrained cross-encoder (BGE, §4.2.2-3); none can be downloaded here, so this fine-tunes one
from an encoder that ships locally (default: the bundled all-MiniLM-L6-v2 transformer, with a fresh one-logit head:
``AutoModelForSequenceClassification``, ``num_labels=1``). Data: every (question, gold passage) pair of the question
file, in a group with ``negatives`` hard negatives drawn from the question's BM25 top ``pool`` passages of the corpus
that are not gold. The loss of a group (gold first, logits s_0 … s_n) is the listwise softmax cross-entropy
−log softmax(s)_0 plus ``bce_weight`` × the mean pointwise binary cross-entropy of σ(s_i) against the 0/1 labels; the
pointwise term keeps the logits calibrated, as TeaRAG's eqs. 1-2 read σ(sim) as a probability of relevance.

The last ``heldout`` questions are never trained on: the report gives their gold passages' mean reciprocal rank and
top-1 accuracy over their BM25 top ``pool`` candidates, in BM25 order and reranked. A run::

    effirag train cross-encoder questions=../shared/data/popqa/questions.json \\
        corpus=../shared/data/popqa/corpus.json output_dir=runs/cross-encoder
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from effirag.config import check, option
from effirag.errors import ConfigError, DataError
from effirag.types import Passage, QAExample

log = logging.getLogger(__name__)

BUNDLED = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class CrossEncoderTrainConfig:
    """One cross-encoder fine-tuning run."""

    questions: Path = option(Path(""), help="Question file with gold passages (any layout effirag reads).")
    corpus: Path = option(Path(""), help="Corpus the gold passages are matched against; negatives come from it.")
    output_dir: Path = option(Path("runs/cross-encoder"), help="Folder of the model, tokenizer and report.json.")
    init: str = option(BUNDLED, help="Starting encoder: 'all-MiniLM-L6-v2' (bundled) or an HF model folder.")
    max_questions: int = option(0, help="Use only the first N questions of the file (0: all).")
    heldout: int = option(50, help="Last questions kept out of training and scored in the report (0: none).")
    pool: int = option(30, help="BM25 candidates per question: the negatives' pool and the report's candidates.")
    negatives: int = option(7, help="Hard negatives per (question, gold passage) group.")
    max_steps: int = option(150, help="Optimiser steps.")
    batch_groups: int = option(8, help="Groups per optimiser step.")
    learning_rate: float = option(3e-5, help="AdamW learning rate (linear decay to 0).")
    bce_weight: float = option(1.0, help="Weight of the pointwise BCE term beside the listwise cross-entropy.")
    max_length: int = option(192, help="Tokens per (question, passage) pair; the longer side is cut first.")
    seed: int = option(0, help="Seed of the head's init, the negatives and the batch order.")
    threads: int = option(2, help="torch CPU threads.")

    def __post_init__(self) -> None:
        check(bool(str(self.questions)) and str(self.questions) != ".", self, "questions", "must name a question file")
        check(bool(str(self.corpus)) and str(self.corpus) != ".", self, "corpus", "must name a corpus file")
        for name in ("pool", "negatives", "max_steps", "batch_groups", "max_length", "threads"):
            check(getattr(self, name) > 0, self, name, "must be > 0")
        check(self.max_questions >= 0, self, "max_questions", "must be >= 0")
        check(self.heldout >= 0, self, "heldout", "must be >= 0")
        check(self.learning_rate > 0, self, "learning_rate", "must be > 0")
        check(self.bce_weight >= 0, self, "bce_weight", "must be >= 0")


@dataclass(frozen=True)
class Group:
    """One training group: a question, its gold passage's text first, then the negatives' texts."""

    query: str
    texts: tuple[str, ...]


def group_loss(logits: Any, bce_weight: float) -> Any:
    """Loss of groups whose gold item is first: listwise CE −log softmax(s)_0 plus ``bce_weight`` × mean BCE of
    σ(s_i) against labels (1 for i = 0, else 0); averaged over groups.

    ``logits`` (groups, 1 + negatives). Worked example (tests/test_cross_encoder.py): one group s = (0, 0):
    CE = log 2 ≈ 0.6931, BCE = mean(log 2, log 2) = 0.6931, so the loss at weight 1 is 1.3863.
    """
    import torch
    import torch.nn.functional as F

    target = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
    labels = torch.zeros_like(logits)
    labels[:, 0] = 1.0
    ce = F.cross_entropy(logits, target)
    bce = F.binary_cross_entropy_with_logits(logits, labels)
    return ce + bce_weight * bce


def _text(p: Passage) -> str:
    return f"{p.title}\n{p.text}" if p.title else p.text


def candidates(examples: list[QAExample], passages: list[Passage], pool: int) -> list[list[int]]:
    """Each question's BM25 top ``pool`` corpus rows (best first), over the passages as indexed (title + text)."""
    from effirag.retrieval.sparse import BM25Index

    bm = BM25Index().build([_text(p) for p in passages])
    return [[int(r) for r in bm.search(ex.question, pool)[0]] for ex in examples]


def build_groups(
    examples: list[QAExample], passages: list[Passage], pools: list[list[int]], negatives: int, rng: random.Random
) -> list[Group]:
    """One group per (question, gold passage): the gold text, then ``negatives`` non-gold texts drawn from the
    question's pool (topped up with random corpus passages when the pool is short)."""
    row = {p.id: i for i, p in enumerate(passages)}
    out = []
    for ex, cand in zip(examples, pools, strict=True):
        gold = {row[g] for g in ex.supporting_ids if g in row}
        hard = [r for r in cand if r not in gold]
        for g in sorted(gold):
            neg = rng.sample(hard, min(negatives, len(hard)))
            while len(neg) < negatives:
                r = rng.randrange(len(passages))
                if r not in gold and r not in neg:
                    neg.append(r)
            out.append(Group(ex.question, tuple(_text(passages[r]) for r in [g, *neg])))
    return out


def _load(cfg: CrossEncoderTrainConfig) -> tuple[Any, Any]:
    """(tokenizer, one-logit sequence classifier) from ``cfg.init`` (the head is freshly initialised when the folder
    holds a plain encoder)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from effirag.retrieval.encoders import default_model_path

    path = str(default_model_path()) if cfg.init == BUNDLED else cfg.init
    if not Path(path).is_dir():
        raise ConfigError(type(cfg).__name__, "init", cfg.init, f"not {BUNDLED!r} nor a model folder")
    torch.manual_seed(cfg.seed)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    return tok, model


def _logits(tok: Any, model: Any, groups: list[Group], max_length: int) -> Any:
    """Logits (groups, group size) of every (query, text) pair of ``groups``."""
    queries = [g.query for g in groups for _ in g.texts]
    texts = [t for g in groups for t in g.texts]
    enc = tok(queries, texts, padding=True, truncation="longest_first", max_length=max_length, return_tensors="pt")
    return model(**enc).logits.view(len(groups), -1)  # (groups, 1 + negatives)


def _heldout_report(
    tok: Any, model: Any, examples: list[QAExample], passages: list[Passage], pools: list[list[int]], cfg: Any
) -> dict[str, float]:
    """MRR and top-1 of the first gold passage among each held-out question's pool, in BM25 order and reranked."""
    import torch

    row = {p.id: i for i, p in enumerate(passages)}
    rr = {"bm25": [], "reranked": []}  # type: dict[str, list[float]]
    model.eval()
    with torch.inference_mode():
        for ex, cand in zip(examples, pools, strict=True):
            gold = {row[g] for g in ex.supporting_ids if g in row}
            if not cand or not gold & set(cand):
                rr["bm25"].append(0.0)
                rr["reranked"].append(0.0)
                continue
            s = _logits(tok, model, [Group(ex.question, tuple(_text(passages[r]) for r in cand))], cfg.max_length)[0]
            order = sorted(range(len(cand)), key=lambda i: (-float(s[i]), i))
            for name, ranking in (("bm25", cand), ("reranked", [cand[i] for i in order])):
                rr[name].append(next(1.0 / (i + 1) for i, r in enumerate(ranking) if r in gold))
    n = max(len(rr["bm25"]), 1)
    out: dict[str, float] = {}
    for name, xs in rr.items():
        out[f"mrr_{name}"] = round(sum(xs) / n, 4)
        out[f"top1_{name}"] = round(sum(1 for x in xs if x == 1.0) / n, 4)
    return out


def train_cross_encoder(cfg: CrossEncoderTrainConfig, progress: bool = False) -> dict[str, Any]:
    """Fine-tune, save the model and tokenizer to ``cfg.output_dir`` (a ``cross-encoder:DIR`` folder) with
    ``report.json``, and return the report."""
    import torch
    from tqdm.auto import tqdm

    from effirag.data import load_corpus, load_questions

    t_start = time.perf_counter()
    torch.set_num_threads(cfg.threads)
    corpus = load_corpus(cfg.corpus)
    examples = [ex for ex in load_questions(cfg.questions, corpus).examples if ex.supporting_ids]
    if cfg.max_questions:
        examples = examples[: cfg.max_questions]
    n_train = len(examples) - cfg.heldout
    if n_train <= 0:
        raise DataError(f"{len(examples)} questions with gold passages leave none to train on", field="heldout",
                        value=cfg.heldout, path=str(cfg.questions))  # fmt: skip
    passages = list(corpus.passages)
    pools = candidates(examples, passages, cfg.pool)
    rng = random.Random(cfg.seed)
    groups = build_groups(examples[:n_train], passages, pools[:n_train], cfg.negatives, rng)
    tok, model = _load(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: max(0.0, 1.0 - step / cfg.max_steps))
    model.train()
    losses: list[float] = []
    order: list[int] = []
    for _ in tqdm(range(cfg.max_steps), desc="cross-encoder", disable=not progress):
        if len(order) < cfg.batch_groups:
            order += rng.sample(range(len(groups)), len(groups))
        batch, order = [groups[i] for i in order[: cfg.batch_groups]], order[cfg.batch_groups :]
        loss = group_loss(_logits(tok, model, batch, cfg.max_length), cfg.bce_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    t_train = time.perf_counter() - t_start
    report: dict[str, Any] = {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
        "train_questions": n_train,
        "train_groups": len(groups),
        "loss_first_10": round(sum(losses[:10]) / len(losses[:10]), 4),
        "loss_last_10": round(sum(losses[-10:]) / len(losses[-10:]), 4),
        "train_seconds": round(t_train, 1),
    }
    if cfg.heldout:
        report["heldout"] = {"questions": cfg.heldout, **_heldout_report(
            tok, model, examples[n_train:], passages, pools[n_train:], cfg)}  # fmt: skip
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    (out / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    log.info("cross-encoder → %s: loss %.3f → %.3f", out, report["loss_first_10"], report["loss_last_10"])
    return report
