"""Turn a :class:`ReproduceConfig` and the method registry into an ordered list of stages (``effirag`` commands).

Which claims run: a claim whose two variants are both available in this build (every command of their trainings is
a command the CLI has, every recipe file exists). Which variants run: those of runnable claims, plus each method's
start policy. Steps: the method's budget share × ``steps_per_minute``, split over its training runs (each ≥ 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from effirag.agent.settings import load_settings, settings_folder
from effirag.errors import DataError
from effirag.reproduce.config import ReproduceConfig
from effirag.reproduce.methods import REGISTRY, Method, Training, Variant
from effirag.reproduce.retrieval import slice_files

Available = Callable[[tuple[str, ...]], bool]  # is `effirag <words>` a command of this build?


@dataclass(frozen=True)
class Stage:
    """One command: ``key`` is its folder under OUT/stages (its log, output and done-marker)."""

    key: str
    kind: str  # prepare, train or eval
    argv: tuple[str, ...]
    method: str = ""
    fresh: str = ""  # a folder to empty before a (re)run of an unfinished stage ('' → none)
    python: str = ""  # the interpreter running it ('' → the run's)


@dataclass
class Plan:
    stages: list[Stage] = field(default_factory=list)
    evals: dict[tuple[str, str], str] = field(default_factory=dict)  # (method, variant label) → eval stage key
    logs: dict[tuple[str, str], str] = field(default_factory=dict)  # (method, variant label) → training folder
    unavailable: dict[tuple[str, str], str] = field(default_factory=dict)  # (method, variant label) → why
    steps: dict[str, int] = field(default_factory=dict)  # method → optimiser steps per training run
    retrievals: dict[tuple[str, str], str] = field(default_factory=dict)  # (method, retrieval label) → stage key

    def add(self, stage: Stage) -> None:
        if all(s.key != stage.key for s in self.stages):
            self.stages.append(stage)


def missing(training: Training | None, cfg: ReproduceConfig, available: Available) -> str:
    """Why ``training`` cannot run in this build ('' when it can)."""
    if training is None:
        return ""
    for cmd in training.commands:
        if not available(cmd[:2]):
            return f"`effirag {' '.join(cmd[:2])}` is not available in this build"
    for recipe in training.recipes:
        if not (Path(cfg.recipes) / recipe).is_file():
            return f"recipe {Path(cfg.recipes) / recipe} is not available in this build"
    return ""


def _prepare(cfg: ReproduceConfig, plan: Plan) -> None:
    world, index = Path(cfg.world), Path(cfg.index)
    if not (index / "manifest.json").is_file():
        if not (world / "world.json").is_file():
            plan.add(Stage("world", "prepare", ("world", "generate", "--out", str(world), "--preset", "demo")))
        corpus, trips = str(world / "corpus.jsonl"), str(world / "triplets.jsonl")
        argv = ("index", "build", "--corpus", corpus, "--triplets", trips, "--out", str(index))
        plan.add(Stage("index", "prepare", argv))


def _staged(cfg: ReproduceConfig, training: Training, steps: int) -> str:
    """The ``stages=`` override of a staged recipe with every stage shortened to ``steps`` (its rewards as written)."""
    path = Path(cfg.recipes) / training.recipes[0]
    stages = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("stages")
    if not isinstance(stages, list) or [s.get("name") for s in stages] != list(training.staged):
        raise DataError(f"expected stages named {list(training.staged)}", path=path, field="stages")
    short = [{**s, "max_steps": steps} for s in stages]
    return "stages=" + yaml.safe_dump(short, default_flow_style=True, width=10_000).strip()


# the start policy's settings that a sampling trainer takes over (env.engine.<key>); penalties stay off while sampling,
# so that the behaviour log-probs are the policy's own
SAMPLING_KEYS = ("k", "max_steps", "max_new_tokens", "max_total_tokens", "max_inserted_tokens")


def sampling_overrides(cfg: ReproduceConfig) -> tuple[str, ...]:
    """``env.engine.<key>=…`` and ``env.reranker=…`` from the start policy's inference.yaml (none when it has no such
    file or ``start_settings`` is off)."""
    settings = load_settings(Path(cfg.start)) if cfg.start_settings else None
    if settings is None:
        return ()
    out = [f"env.engine.{k}={getattr(settings, k)}" for k in SAMPLING_KEYS if getattr(settings, k) is not None]
    spec = settings.reranker_spec(settings_folder(Path(cfg.start)))
    if spec is not None:
        out.append(f"env.reranker={spec}")
    return tuple(out)


def _expand(template: tuple[str, ...], fields: dict[str, str], lists: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Fill ``template``: a whole argument named in ``lists`` becomes its arguments, the rest ``str.format``s."""
    argv: list[str] = []
    for a in template:
        argv.extend(lists[a] if a in lists else (a.format(**fields),))
    return tuple(argv)


def _train(cfg: ReproduceConfig, out: Path, method: Method, training: Training, steps: int, plan: Plan) -> Path:
    folder = out / "trainings" / training.key
    fields = {
        "model": cfg.start, "out": str(folder), "questions": cfg.train_file, "index": cfg.index, "world": cfg.world,
        "limit": str(cfg.train_limit), "steps": str(steps), "seed": str(cfg.seed), "recipes": cfg.recipes,
    }  # fmt: skip
    lr = f"{cfg.learning_rate:g}"
    lists = {
        "{sampling}": sampling_overrides(cfg),
        "{rl_lr}": (f"learning_rate={lr}",) if cfg.learning_rate else (),
        "{dpo_lr}": (f"train.learning_rate={lr}",) if cfg.learning_rate else (),
    }
    for i, cmd in enumerate(training.commands):
        argv = _expand(cmd, fields, lists) + tuple(cfg.train_overrides)
        if training.staged:
            argv += (_staged(cfg, training, steps),)
        key = f"train-{training.key}" + (f"-{i + 1}" if len(training.commands) > 1 else "")
        plan.add(Stage(key, "train", argv, method.name, fresh=str(folder) if i == 0 else ""))
    return folder


def _eval(cfg: ReproduceConfig, out: Path, variant: Variant, policy: str, policy_key: str) -> Stage:
    key = f"eval-{policy_key}-{variant.protocol}" + (f"-{variant.mode}" if variant.mode else "")
    inference = cfg.start if (Path(cfg.start) / "inference.yaml").is_file() else "none"
    argv = ["eval", "qa", "-q", cfg.eval_file, "-i", cfg.index, "-b", cfg.eval_spec(policy), "-p", variant.protocol]
    argv += ["--limit", str(cfg.eval_limit), "--out", str(out / "stages" / key / "run"), "--inference", inference]
    for s in (*cfg.eval_settings, f"seed={cfg.seed}"):
        argv += ["--set", s]
    if variant.mode:
        argv += ["--mode", variant.mode]
    return Stage(key, "eval", (*argv, "--json"), python=cfg.eval_python)


def _retrievals(cfg: ReproduceConfig, out: Path, method: Method, plan: Plan) -> None:
    """The method's retrieval-only stages: index the MuSiQue slice (dense + its knowledge graph) once, then one
    ``eval retrieval --subqueries gold`` per retriever, all with the same k and tokenizer."""
    runs = {r.label: r for c in method.retrieval_claims for r in (c.a, c.b)}
    if not runs:
        return
    if not cfg.musique:
        for label in runs:
            plan.unavailable[(method.name, label)] = "no MuSiQue slice configured (musique='')"
        return
    questions, corpus, kg = slice_files(cfg)
    kg_args = ("--openie" if kg.suffix == ".json" else "--triplets", str(kg))
    index = out / "musique-index"
    threads = ("--threads", str(cfg.threads)) if cfg.threads else ()
    argv = ("index", "build", "--corpus", str(corpus), *kg_args, "--out", str(index), *threads)
    plan.add(Stage("index-musique", "prepare", argv, method.name, fresh=str(index)))
    for label, r in runs.items():
        key = f"retrieval-musique-{r.retriever}"
        argv = ("eval", "retrieval", "-q", str(questions), "-c", str(corpus), "-r", r.retriever, *kg_args)
        argv += ("--subqueries", "gold", "--k", str(cfg.retrieval_k), "--tokenizer", cfg.retrieval_tokenizer)
        argv += ("--index", str(index), *threads, "--per-question", "--json")
        plan.add(Stage(key, "eval", argv, method.name))
        plan.retrievals[(method.name, label)] = key


def make_plan(cfg: ReproduceConfig, out: Path, available: Available) -> Plan:
    """Every stage the run needs, in order: prepare the world and index, then per method its trainings and evals
    and its retrieval-only stages."""
    plan = Plan()
    _prepare(cfg, plan)
    for name in cfg.methods:
        method = REGISTRY[name]
        for v in method.variants:
            why = missing(v.training, cfg, available)
            if why:
                plan.unavailable[(name, v.label)] = why
        runnable = [c for c in method.claims if not {c.a, c.b} & {lbl for m, lbl in plan.unavailable if m == name}]
        needed = {c.a for c in runnable} | {c.b for c in runnable}
        variants = [v for v in method.variants if v.label in needed or (v.training is None and runnable)]
        trainings = {v.training.key: v.training for v in variants if v.training is not None}
        steps = cfg.steps_for(sum(t.runs for t in trainings.values()))
        plan.steps[name] = steps if trainings else 0
        folders = {k: _train(cfg, out, method, t, steps, plan) for k, t in trainings.items()}
        for v in variants:
            if v.training is None:
                policy, policy_key = cfg.start, "start"
            else:
                folder = folders[v.training.key]
                policy = (v.policy or v.training.policy).format(out=str(folder))
                policy_key = "-".join(Path(policy).parent.relative_to(out / "trainings").parts)
                plan.logs[(name, v.label)] = str(Path(policy).parent)
            stage = _eval(cfg, out, v, policy, policy_key)
            plan.add(Stage(stage.key, stage.kind, stage.argv, name, python=stage.python))
            plan.evals[(name, v.label)] = stage.key
        _retrievals(cfg, out, method, plan)
    return plan
