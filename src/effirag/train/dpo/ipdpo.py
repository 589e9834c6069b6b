"""TeaRAG's Iterative Process-aware DPO (IP-DPO, §4.3.2) from its config.

Round p = 1 … R: sample n paths per training question with the current policy Θ_{p−1} through EffiRAG's engine (the
token path: the ids the policy saw and sampled, inserted observations marked), score and pair them
(:mod:`effirag.train.dpo.scoring`: format, outcome, process reward; eq. 14), then train L_DPO + η_p·L_SFT (eq. 15–17)
on the pairs with Θ_{p−1} as the reference (:mod:`effirag.train.dpo.trainer`); Θ_p samples the next round.

``OUTPUT_DIR`` holds ``config.yaml``, ``rounds.jsonl`` (one record per finished round: pairs, reward means, losses,
seconds), ``round-P/`` (``trajectories.jsonl`` and ``sampling.json``: the sampled paths with their token ledgers and
what decided them, which ``reuse_paths`` of a later run reads (:mod:`effirag.train.dpo.reuse`); ``paths.jsonl``: every
sampled path's scores; ``pairs.jsonl``: who was paired with whom, with
their scores; ``steps.jsonl``: the DPO steps; ``policy/``: Θ_p, the round's checkpoint), and at the end
``curves.png`` and ``policy/`` (Θ_R). ``resume`` keeps the finished rounds (a record in rounds.jsonl and their
policy) and redoes an unfinished one from its start.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

import yaml

from effirag.agent.settings import carry_settings
from effirag.config import to_dict
from effirag.errors import ConfigError
from effirag.llm.base import Generator
from effirag.retrieval.similarity import LexicalF1Similarity
from effirag.rewards.tearag import SigmoidSimilarity, SimFn
from effirag.train.dpo.config import IPDPORunConfig
from effirag.train.dpo.reuse import load_paths, mismatch, sampling_record, save_paths
from effirag.train.dpo.scoring import RoundPairs, round_pairs
from effirag.train.outputs import check_output_dir, save_policy
from effirag.train.rl.log import plot_steps, read_steps
from effirag.types import QAExample, Trajectory

log = logging.getLogger(__name__)

GeneratorFactory = Callable[[Any, Any], Generator]
"""(model, tokenizer) → the generator that samples a round's paths (default: the policy itself, HF backend)."""


@dataclass(frozen=True)
class IPDPOResult:
    output_dir: Path
    policy_dir: Path
    rounds: int
    seconds: float
    last: dict[str, Any]


def policy_generator(model: Any, tokenizer: Any) -> Generator:
    """An HF generator over the policy in memory (weights shared, not copied)."""
    from effirag.llm.hf import HFGenerator

    return HFGenerator.from_loaded(model, tokenizer, name="policy")


def _environment(cfg: IPDPORunConfig, tokenizer: Any) -> tuple[list[QAExample], Any, Any, SimFn]:
    """(questions, protocol, retriever, knowledge-matching similarity) named by the config."""
    from effirag.env import build_env

    if not cfg.env.index:
        raise ConfigError("IPDPORunConfig", "env.index", cfg.env.index, "a retrieval index folder is required")
    env = build_env(cfg.env, tokenizer, need_questions=True, owner="IPDPORunConfig")
    sim: SimFn = LexicalF1Similarity()
    if cfg.similarity == "retriever":
        inner = getattr(env.retriever, "similarity", None)
        if inner is None:
            why = f"index {cfg.env.index} has no similarity"
            raise ConfigError("IPDPORunConfig", "similarity", cfg.similarity, why)
        sim = SigmoidSimilarity(inner)
    return env.questions, env.protocol, env.retriever, sim


def _path_stats(trajs: list[Trajectory], scored: RoundPairs) -> dict[str, float]:
    """Means over the round's paths: scores (reward/*), EM-free efficiency numbers, and counts."""
    s = scored.scores
    n = max(1, len(trajs))
    return {
        "paths": float(len(trajs)),
        "pairs": float(len(scored.pairs)),
        "dropped_pairs": float(scored.dropped),
        "format_rate": fmean(x.format for x in s) if s else float("nan"),
        "reward/outcome": fmean(x.outcome for x in s) if s else float("nan"),
        "reward/process": fmean(x.process for x in s) if s else float("nan"),
        "reward/total": fmean(x.total for x in s) if s else float("nan"),
        "generated_tokens_per_path": sum(t.generated_tokens for t in trajs) / n,
        "searches_per_path": sum(t.n_searches for t in trajs) / n,
        "steps_per_path": sum(len(t.steps) for t in trajs) / n,
    }


def _em(trajs: list[Trajectory], questions: list[QAExample]) -> float:
    from effirag.rewards.outcome import outcome_rewards

    golds = {q.id: q.answers for q in questions}
    ems = outcome_rewards([t.prediction for t in trajs], [golds[t.question_id] for t in trajs], "em")
    return fmean(ems) if ems else float("nan")


def _train_round(cfg: IPDPORunConfig, r: int, model: Any, tok: Any, scored: RoundPairs, folder: Path) -> dict[str, Any]:
    """DPO + η_r·SFT on the round's pairs (none: the policy is kept as it is); the policy saved to folder/policy."""
    from effirag.train.dpo.trainer import DPOStepLog, build_dpo_trainer

    train = cfg.round_train(r)
    if not scored.pairs:
        log.warning("IP-DPO round %d: no preference pairs; the policy is kept unchanged", r)
        save_policy(model, tok, folder / "policy")
        return {"eta": train.sft_weight, "dpo_steps": 0, "loss": float("nan"), "train_s": 0.0}
    t0 = time.perf_counter()
    trainer = build_dpo_trainer(
        train, model, tok, scored.pairs, folder / "trainer", callbacks=[DPOStepLog(folder / "steps.jsonl", round=r)]
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # the step records go to steps.jsonl
    out = trainer.train()
    save_policy(trainer.accelerator.unwrap_model(trainer.model), tok, folder / "policy")
    shutil.rmtree(folder / "trainer", ignore_errors=True)  # TRL's run folder: no checkpoints are asked of it
    steps = read_steps(folder / "steps.jsonl")
    last = steps[-1] if steps else {}
    return {
        "eta": train.sft_weight,
        "dpo_steps": int(trainer.state.global_step),
        "loss": float(out.training_loss),
        "last_step_loss": float(last.get("loss", float("nan"))),
        "rewards/margins": float(last.get("rewards/margins", float("nan"))),
        "rewards/accuracies": float(last.get("rewards/accuracies", float("nan"))),
        "train_s": time.perf_counter() - t0,
    }


def _sample(
    cfg: IPDPORunConfig,
    r: int,
    model_dir: Path,
    env: tuple[Any, ...],
    sampler: Callable[[], Generator],
    reuse: Path | None,
) -> tuple[list[Trajectory], str]:
    """Round r's paths and where they came from: ``reuse``'s round r when its sampling record equals this round's
    ('' when sampled here; a mismatch in round 1 fails, later it means sampling). Saved with the record either way."""
    from effirag.agent import run_episodes

    questions, protocol, retriever, _ = env
    record = sampling_record(cfg, r, model_dir, questions)
    source = Path(reuse) / f"round-{r}" if reuse is not None else None
    why = mismatch(source, record) if source is not None else ""
    if source is not None and not why:
        trajs, origin = load_paths(source), str(source)
        log.info("IP-DPO round %d: %d paths reused from %s", r, len(trajs), source)
    else:
        if why and r == 1:
            raise ConfigError("IPDPORunConfig", "reuse_paths", str(reuse), why)
        if why:
            log.info("IP-DPO round %d: sampled, not reused (%s)", r, why)
        trajs, origin = run_episodes(sampler(), retriever, protocol, questions, cfg.round_engine(r)), ""
    save_paths(Path(cfg.output_dir) / f"round-{r}", record, trajs)
    return trajs, origin


def run_round(
    cfg: IPDPORunConfig,
    r: int,
    model_dir: Path,
    env: tuple[Any, ...],
    generator: GeneratorFactory,
    reuse: Path | None = None,
) -> dict[str, Any]:
    """Round r from the policy in ``model_dir``: sample (or reuse ``reuse``'s round r, see :func:`_sample`),
    score, pair, train; returns the round's log record."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    questions, _, _, sim = env
    folder = Path(cfg.output_dir) / f"round-{r}"
    shutil.rmtree(folder, ignore_errors=True)  # an unfinished round restarts from its beginning
    folder.mkdir(parents=True)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    t0 = time.perf_counter()
    trajs, origin = _sample(cfg, r, model_dir, env, lambda: generator(model, tok), reuse)
    sample_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    scored = round_pairs(trajs, questions, cfg.outcome, sim, cfg.pair_rule())
    score_s = time.perf_counter() - t1
    for name, rows in (("pairs.jsonl", scored.records), ("paths.jsonl", scored.paths)):
        (folder / name).write_text("".join(json.dumps(x) + "\n" for x in rows), encoding="utf-8")
    rec: dict[str, Any] = {"step": r, "round": r, "questions": len(questions), **_path_stats(trajs, scored)}
    rec["em"] = _em(trajs, questions)
    rec["reused_from"] = origin
    rec.update(_train_round(cfg, r, model, tok, scored, folder))
    rec.update(sample_s=sample_s, score_s=score_s, s_per_path=sample_s / max(1, len(trajs)))
    rec["s_per_dpo_step"] = rec["train_s"] / rec["dpo_steps"] if rec["dpo_steps"] else float("nan")
    rec["round_s"] = time.perf_counter() - t0
    return rec


def _finished(out: Path, rounds: int) -> list[dict[str, Any]]:
    """The records of finished rounds (a log record and a saved policy), in order, up to the first gap."""
    path = out / "rounds.jsonl"
    done: list[dict[str, Any]] = []
    for rec in read_steps(path) if path.is_file() else []:
        if (
            rec["round"] == len(done) + 1 <= rounds
            and (out / f"round-{rec['round']}" / "policy" / "config.json").is_file()
        ):
            done.append(rec)
    return done


def run_ipdpo(
    cfg: IPDPORunConfig, *, resume: bool = False, generator: GeneratorFactory = policy_generator
) -> IPDPOResult:
    """Run ``cfg``'s rounds (see the module docstring); with ``resume``, skip the finished ones. ``generator`` makes the
    sampler of each round from the round's policy and tokenizer (default: that policy on the HF backend)."""
    from transformers import AutoTokenizer

    start = cfg.env.trainer_model("IPDPORunConfig")
    out = check_output_dir("IPDPORunConfig", cfg.output_dir, resume, "rounds.jsonl", has_checkpoint=None)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False), encoding="utf-8")
    done = _finished(out, cfg.rounds) if resume else []
    (out / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in done), encoding="utf-8")
    t0 = time.perf_counter()
    env = _environment(cfg, AutoTokenizer.from_pretrained(start))
    model_dir = out / f"round-{len(done)}" / "policy" if done else Path(start)
    reuse = Path(cfg.reuse_paths) if cfg.reuse_paths else None
    for r in range(len(done) + 1, cfg.rounds + 1):
        rec = run_round(cfg, r, model_dir, env, generator, reuse)
        reuse = reuse if rec["reused_from"] else None  # once a round is sampled here, later ones differ too
        with (out / "rounds.jsonl").open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
        log.info("IP-DPO round %d: %d pairs from %d paths, loss %.4f", r, rec["pairs"], rec["paths"], rec["loss"])
        done.append(rec)
        model_dir = out / f"round-{r}" / "policy"
        carry_settings(Path(start), model_dir)  # each round's policy runs with the start's inference settings
    shutil.rmtree(out / "policy", ignore_errors=True)
    shutil.copytree(model_dir, out / "policy")
    plot_steps(out / "rounds.jsonl", out / "curves.png", loss_label="DPO + η·SFT loss (round mean)")
    return IPDPOResult(out, out / "policy", len(done), time.perf_counter() - t0, done[-1])
