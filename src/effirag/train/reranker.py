"""Train the KAG's bilinear reranker (:mod:`effirag.retrieval.bilinear`) from gold decompositions.

Each gold hop (sub-question, key entities, supporting passage and triplets; :mod:`effirag.train.gold_paths`) gives two
candidate lists, retrieved exactly as TeaRAG's KAG mode retrieves them before reranking: the dense top chunks of the
sub-question, and the two-stage triplet candidates around its key entities (§4.2.3). The hop's supporting passage and
triplets are the positives. The scorer s(q, x) = α · (W e_q)ᵀ e_x + β is fitted on the index's stored embeddings
(the encoder stays frozen; no text is re-encoded) with :func:`relevance_loss`.

Data: the train split's hops plus ``fact_hops`` single-hop fact paths
(:func:`~effirag.train.gold_paths.world_fact_paths`, which leave out every fact a dev or test question asks). The
report compares top-1 accuracy of cosine and of the trained scorer on the eval split's hops. Recipe::

    effirag train reranker --config recipes/demo_policy/reranker.yaml
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from effirag.config import check, option
from effirag.retrieval.bilinear import BilinearParams, bilinear_scores
from effirag.retrieval.facade import EffiRetriever
from effirag.retrieval.triplets import TwoStageTripletRetriever
from effirag.train.gold_paths import GoldHop

log = logging.getLogger(__name__)

KINDS = ("triplet", "chunk")


@dataclass(frozen=True)
class RerankerConfig:
    """One reranker training run on an EffiRAG-World and its index."""

    world: Path = option(Path("runs/demo/world"), help="EffiRAG-World folder (gold decompositions, corpus).")
    index: Path = option(Path("runs/demo/index"), help="Index of that world (dense + knowledge graph).")
    output_dir: Path = option(Path("runs/reranker"), help="Folder for bilinear.safetensors, bilinear.json, report.")
    fact_hops: int = option(2500, help="Single-hop fact paths added to the train split's hops (0: none).")
    candidates: int = option(20, help="Candidates per hop and kind: the KAG's semantic_top and n_triplets.")
    epochs: int = option(15, help="Passes over the training hops.")
    batch_size: int = option(64, help="Candidate lists per optimiser step.")
    learning_rate: float = option(1e-3, help="Adam learning rate.")
    identity_weight: float = option(
        1e-5, help="L2 pull of W towards I: keeps the encoder's geometry where data is thin."
    )
    init_scale: float = option(10.0, help="Starting α (W = I, β = 0): cosines times α are the first logits.")
    eval_split: str = option("dev", help="Split whose hops the report scores (never trained on).")
    eval_questions: int = option(150, help="Questions of the eval split whose unknown hops are scored.")
    seed: int = option(0, help="Seed of the fact-path sample and the batch order.")
    threads: int = option(2, help="torch CPU threads.")

    def __post_init__(self) -> None:
        for name in ("candidates", "epochs", "batch_size", "eval_questions", "threads"):
            check(getattr(self, name) > 0, self, name, "must be > 0")
        check(self.fact_hops >= 0, self, "fact_hops", "must be >= 0")
        check(self.learning_rate > 0, self, "learning_rate", "must be > 0")
        check(self.identity_weight >= 0, self, "identity_weight", "must be >= 0")
        check(self.init_scale > 0, self, "init_scale", "must be > 0")
        check(self.eval_split in ("train", "dev", "test"), self, "eval_split", "must be train, dev or test")


@dataclass(frozen=True)
class RerankGroup:
    """One hop's candidate list of one kind (``"triplet"`` or ``"chunk"``), as embeddings with 0/1 labels."""

    kind: str
    query: np.ndarray  # (dim,)
    items: np.ndarray  # (n, dim)
    labels: np.ndarray  # (n,) 1.0 for a gold item


def relevance_loss(scores: Any, labels: Any, mask: Any) -> Any:
    """Mean over lists of BCE(s, y) (averaged over a list's real candidates) + listwise cross-entropy.

    The listwise term is −Σ_i p_i log softmax(s)_i with p = y / Σy: it ranks the gold item first. The pointwise term
    makes sigmoid(s) a probability of relevance, which TeaRAG's eqs. 1-2 consume. ``scores``, ``labels`` and ``mask``
    are torch tensors (B, N); ``mask`` is 1 for real candidates, 0 for padding; every list holds a positive.
    """
    import torch
    import torch.nn.functional as F

    m = mask.to(scores.dtype)
    bce = F.binary_cross_entropy_with_logits(scores, labels, reduction="none")  # (B, N)
    pointwise = (bce * m).sum(1) / m.sum(1)
    logp = torch.log_softmax(scores.masked_fill(m == 0, float("-inf")), dim=1)  # (B, N)
    target = labels * m / (labels * m).sum(1, keepdim=True)
    listwise = -(target * logp.masked_fill(m == 0, 0.0)).sum(1)
    return (pointwise + listwise).mean()


def build_groups(retriever: EffiRetriever, hops: Sequence[GoldHop], candidates: int) -> tuple[list[RerankGroup], int]:
    """Candidate lists of ``hops`` (dense chunks; two-stage triplets, unreranked), the gold items labelled 1.

    Returns the lists that hold a positive and the number of lists left out for holding none.
    """
    index, kg, encoder = retriever.index, retriever.index.kg, retriever.encoder
    if index.dense is None or kg is None or kg.triplet_embeddings is None or encoder is None:
        raise ValueError(f"{index.folder}: the reranker needs a dense index and an embedded knowledge graph")
    two_stage = TwoStageTripletRetriever(kg, encoder)  # no reranker: the candidates the KAG would rerank
    c = retriever.config.kag
    trip_id = {(t.head, t.relation, t.tail): i for i, t in enumerate(kg.triplets)}
    row_of = {p.id: i for i, p in enumerate(index.passages)}
    texts = [TwoStageTripletRetriever.queries(h.entities, h.question) for h in hops]
    flat = np.asarray(encoder.encode_queries([t for q in texts for t in q]), np.float32)  # (n_texts, dim)
    chunk_emb = index.dense_embeddings()
    assert chunk_emb is not None
    groups: list[RerankGroup] = []
    dropped = start = 0
    for hop, qs in zip(hops, texts, strict=True):
        vecs = flat[start : start + len(qs)]
        start += len(qs)
        q = vecs[-1]
        trips = two_stage.retrieve_with_triplets(
            hop.entities, hop.question, candidates, c.k_e, c.n_entities, candidates, vectors=vecs
        )
        ids = [int(item.id[1:]) for item, _ in trips]
        gold = {trip_id.get((t.head, t.relation, t.tail)) for t in hop.triplets}
        rows, _ = index.dense.search(q[None], candidates)
        chunk_rows = [int(r) for r in rows[0] if r >= 0]
        gold_row = row_of.get(hop.passage.id) if hop.passage is not None else None
        for kind, found, labels, emb in (
            ("triplet", ids, [i in gold for i in ids], kg.triplet_embeddings),
            ("chunk", chunk_rows, [r == gold_row for r in chunk_rows], chunk_emb),
        ):
            if not any(labels):
                dropped += 1
                continue
            items = np.asarray(emb[found], np.float32)  # (n, dim)
            groups.append(RerankGroup(kind, q, items, np.asarray(labels, np.float32)))
    return groups, dropped


def _padded(groups: Sequence[RerankGroup]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Queries (B, dim), items (B, N, dim), labels (B, N), mask (B, N), N the longest list."""
    n = max(len(g.labels) for g in groups)
    dim = groups[0].query.shape[0]
    items = np.zeros((len(groups), n, dim), np.float32)
    labels = np.zeros((len(groups), n), np.float32)
    mask = np.zeros((len(groups), n), np.float32)
    for i, g in enumerate(groups):
        items[i, : len(g.labels)] = g.items
        labels[i, : len(g.labels)] = g.labels
        mask[i, : len(g.labels)] = 1.0
    return np.stack([g.query for g in groups]), items, labels, mask


def fit_bilinear(
    groups: Sequence[RerankGroup], encoder: str, config: RerankerConfig, *, progress: bool = False
) -> tuple[BilinearParams, list[float]]:
    """Fit W, α, β on ``groups`` with Adam (W starts at I, α at ``init_scale``); returns them and the epoch losses."""
    import torch

    if not groups:
        raise ValueError("no candidate list holds a gold item: nothing to train on")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    q_all, x_all, y_all, m_all = (torch.from_numpy(a) for a in _padded(groups))
    dim = q_all.shape[1]
    eye = torch.eye(dim)
    w = torch.nn.Parameter(eye.clone())
    scale = torch.nn.Parameter(torch.tensor(config.init_scale))
    bias = torch.nn.Parameter(torch.tensor(0.0))
    opt = torch.optim.Adam([w, scale, bias], lr=config.learning_rate)
    losses: list[float] = []
    bar: Any = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=config.epochs, desc="reranker", unit="epoch")
    for _ in range(config.epochs):
        order = torch.from_numpy(rng.permutation(len(groups)))
        total = 0.0
        for start in range(0, len(groups), config.batch_size):
            b = order[start : start + config.batch_size]
            projected = q_all[b] @ w.T  # (B, dim)
            scores = scale * torch.einsum("bd,bnd->bn", projected, x_all[b]) + bias  # (B, N)
            loss = relevance_loss(scores, y_all[b], m_all[b]) + config.identity_weight * ((w - eye) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(b)
        losses.append(total / len(groups))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    if bar is not None:
        bar.close()
    weight = w.detach().numpy().astype(np.float32)
    params = BilinearParams(weight, float(scale.detach()), float(bias.detach()), encoder)
    return params, losses


def top1_accuracy(groups: Sequence[RerankGroup], params: BilinearParams) -> dict[str, float]:
    """Share of lists, per kind, whose highest-scoring candidate is a gold item (NaN for a kind with no list)."""
    out: dict[str, float] = {}
    for kind in KINDS:
        hits = [
            float(
                g.labels[
                    int(np.argmax(bilinear_scores(g.query[None], g.items, params.weight, params.scale, params.bias)[0]))
                ]
            )
            for g in groups
            if g.kind == kind
        ]
        out[kind] = float(np.mean(hits)) if hits else float("nan")
    return out


def train_reranker(config: RerankerConfig, *, progress: bool = False) -> dict[str, Any]:
    """The recipe: hops → candidate lists → fit → save ``output_dir`` with ``reranker_report.json``."""
    import torch

    from effirag.retrieval.facade import load_retriever
    from effirag.train.gold_paths import world_fact_paths, world_paths

    torch.set_num_threads(config.threads)
    t0 = time.perf_counter()
    retriever = load_retriever(config.index, torch_threads=config.threads).load()
    assert retriever.encoder is not None
    train_paths, _, _ = world_paths(config.world, "train")
    facts = world_fact_paths(config.world)
    picked = np.random.default_rng(config.seed).permutation(len(facts))[: config.fact_hops]
    train_hops = [h for p in train_paths for h in p.hops] + [h for i in sorted(picked) for h in facts[i].hops]
    eval_paths, _, _ = world_paths(config.world, config.eval_split)
    eval_hops = [h for p in eval_paths[: config.eval_questions] for h in p.hops if not h.known]
    t1 = time.perf_counter()
    train_groups, train_dropped = build_groups(retriever, train_hops, config.candidates)
    eval_groups, eval_dropped = build_groups(retriever, eval_hops, config.candidates)
    t2 = time.perf_counter()
    log.info("%d train lists (%d without a gold item), %d eval lists", len(train_groups), train_dropped,
             len(eval_groups))  # fmt: skip
    name = retriever.encoder.name
    params, losses = fit_bilinear(train_groups, name, config, progress=progress)
    t3 = time.perf_counter()
    cosine = BilinearParams.identity(params.dim, name)
    report: dict[str, Any] = {
        "train_hops": len(train_hops),
        "train_lists": len(train_groups),
        "train_lists_without_gold": train_dropped,
        "eval_split": config.eval_split,
        "eval_hops": len(eval_hops),
        "eval_lists": len(eval_groups),
        "eval_lists_without_gold": eval_dropped,
        "top1_cosine": top1_accuracy(eval_groups, cosine),
        "top1_trained": top1_accuracy(eval_groups, params),
        "train_top1_trained": top1_accuracy(train_groups, params),
        "epoch_losses": [round(x, 4) for x in losses],
        "seconds": {"load": round(t1 - t0, 1), "candidates": round(t2 - t1, 1), "fit": round(t3 - t2, 1)},
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
    }
    params.save(config.output_dir, extra={"trained_on": str(config.world)})
    (config.output_dir / "reranker_report.json").write_text(json.dumps(report, indent=1), "utf-8")
    return report


__all__ = [
    "RerankGroup",
    "RerankerConfig",
    "build_groups",
    "fit_bilinear",
    "relevance_loss",
    "top1_accuracy",
    "train_reranker",
]
