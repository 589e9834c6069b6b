"""What every run of the agent shares, as one typed section: the ``env:`` of a run config (:class:`EnvConfig`).

A run config is ``env:`` (this: policy, questions, protocol, retrieval, judge, inference settings, engine budgets) +
the algorithm's own fields + ``objective:`` (the reward terms and the advantage estimator, where the run has one).
The CLI commands that run the policy (``ask``, ``eval qa``) fill the same section from their flags.

:func:`load_run_config` loads such a file: the policy's inference settings (``inference.yaml``) are merged *under*
the ``env:`` section, so a policy runs the way its figures were measured unless the file or an override says
otherwise; a key of the layout before ``env:`` (``model:`` or ``reward:`` at the top) is refused with the key it
moved to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from effirag.agent import EngineConfig
from effirag.agent.protocols import PROTOCOLS
from effirag.agent.settings import InferenceSettings, load_settings, settings_folder
from effirag.config import check, from_dict, merge, merge_written, option, parse_overrides, read_yaml
from effirag.errors import BackendError, ConfigError
from effirag.llm.factory import backend_options
from effirag.retrieval.rerank import parse_reranker

T = TypeVar("T")

JUDGE_KINDS = ("world:", "llm:")
MOVED = {
    "model": "env.model",
    "backend": "env.model",
    "inference": "env.inference",
    "questions": "env.questions",
    "max_questions": "env.max_questions",
    "shots": "env.shots",
    "protocol": "env.protocol",
    "index": "env.index",
    "reranker": "env.reranker",
    "retriever": "env.retriever",
    "world": "env.judge (as world:DIR)",
    "engine": "env.engine",
    "reward": "objective",
}
"""Top-level keys of the layout before ``env:`` → where they live now (the message of a refused old file)."""


@dataclass(frozen=True)
class EnvConfig:
    """The environment of a run: which policy answers which questions with which protocol, over which retrieval,
    judged by what, within which budgets."""

    model: str = option(
        "",
        help="Policy: a local Hugging Face causal-LM folder (trainers need one), or where a command only samples a "
        "backend spec: hf:DIR, vllm:DIR, openai:URL#MODEL, openai-chat:URL#MODEL, scripted:FILE (a bare folder is "
        "hf:DIR).",
    )
    inference: str = option(
        "",
        help="Inference settings merged under this section: a settings file or checkpoint folder (its "
        "inference.yaml); auto: the policy's folder when it holds one (hf:DIR, vllm:DIR, a bare DIR, an openai "
        "backend's ?tokenizer=DIR); '' or none: no settings.",
    )
    questions: str = option("", help="Questions file (JSONL; any layout effirag reads).")
    max_questions: int = option(0, help="Use only the first N questions (0: all; counted after holdout).")
    holdout: int = option(
        0,
        help="Leave the file's first N questions out (held out for evaluation, as an SFT data.source.holdout leaves "
        "them out of its data).",
    )
    shots: int = option(
        0,
        help="Few-shot demos in the protocol's prompt (base, non-chat policies): the shortest questions of the "
        "questions file with gold passages, removed from the questions run; 0: the instruct prompt.",
    )
    protocol: str = option("searchr1", help=f"Agent protocol: one of {PROTOCOLS}.")
    index: str = option("", help="Retrieval index folder ('' for protocols that never retrieve, or with retriever).")
    reranker: str = option(
        "",
        help="Reranker spec: cross-encoder:DIR (every mode), bilinear:DIR or a bare DIR (KAG's scorer); '' or none: "
        "the index's bi-encoder cosines.",
    )
    retriever: str = option(
        "", help="URL of `effirag serve retrieval` to search instead of loading index (token: EFFIRAG_TOKEN)."
    )
    judge: str = option(
        "",
        help="Over- / under-search judge of every step (HiPRAG's reward term, eval's oracle): world:DIR (exact, an "
        "EffiRAG-World folder), llm:BACKEND (HiPRAG's two LLM judges: the policy re-answers each distinct "
        "sub-question, the BACKEND model judges; verdicts cached), closed-book (the policy's re-answer vs the step's "
        "conclusion, token F1 >= 0.5: over-search only, no judge model), auto (world when the questions file's "
        "folder holds world.json, else none), '' or none.",
    )
    engine: EngineConfig = option(factory=EngineConfig, help="Episode budgets, retrieval k and sampling.")

    def __post_init__(self) -> None:
        check(self.max_questions >= 0, self, "max_questions", "must be >= 0")
        check(self.holdout >= 0, self, "holdout", "must be >= 0")
        check(self.shots >= 0, self, "shots", "must be >= 0")
        known = ", ".join(PROTOCOLS)
        check(self.protocol in PROTOCOLS, self, "protocol", f"unknown protocol {self.protocol!r}; known: {known}")
        try:  # a malformed backend option fails when the config is built, not at the first sample
            backend_options(self.backend)
        except BackendError as e:
            check(False, self, "model", str(e))
        check(not (self.index and self.retriever), self, "retriever", "give index or retriever, not both")
        check(
            not self.retriever or self.retriever.startswith(("http://", "https://")),
            self,
            "retriever",
            "must be an http:// or https:// URL",
        )
        rerank = parse_reranker(self.reranker, f"{type(self).__name__}.reranker")
        check(rerank is None or not self.retriever, self, "reranker", "needs the index in-process, not a retriever URL")
        spec = self.judge.strip().lower()
        ok = spec in ("", "none", "auto", "closed-book")
        ok = ok or (spec.startswith(JUDGE_KINDS) and bool(self.judge.partition(":")[2]))
        check(ok, self, "judge", "expected world:DIR, llm:BACKEND, closed-book, auto or none")

    @property
    def backend(self) -> str:
        """The policy as a backend spec (a bare folder is ``hf:DIR``)."""
        prefix = self.model.partition(":")[0]
        return self.model if ":" in self.model and "/" not in prefix else f"hf:{self.model}"

    @property
    def model_dir(self) -> str:
        """The policy's local folder where it is one (a bare folder, hf:DIR or vllm:DIR), else ''."""
        prefix, _, rest = self.backend.partition(":")
        return rest.partition("?")[0] if prefix in ("hf", "vllm") else ""

    @property
    def chat(self) -> bool:
        """Whether the policy's episodes start in its chat template: ``?chat=1`` on an ``hf:`` or ``vllm:`` spec (an
        instruct model; trainers sample their rollouts so)."""
        return self.backend.startswith(("hf:", "vllm:")) and backend_options(self.backend).get("chat", False) is True

    def trainer_model(self, owner: str) -> str:
        """The policy's local Hugging Face folder, as a trainer loads it (``hf:DIR`` is taken as DIR); anything else
        fails naming ``owner.env.model``."""
        folder = self.model_dir
        if not folder or not self.backend.startswith("hf:") or not Path(folder).is_dir():
            raise ConfigError(owner, "env.model", self.model, "must be a local Hugging Face model directory")
        return folder

    def absolute(self) -> EnvConfig:
        """The config with its folders absolute (for work that runs in another directory: Ray actors)."""
        paths: dict[str, Any] = {
            k: str(Path(getattr(self, k)).resolve()) for k in ("index", "questions") if getattr(self, k)
        }
        folder = self.model_dir
        if folder:  # the folder in place, any prefix and ?query kept
            start = 0 if self.model == folder or self.model.startswith(f"{folder}?") else self.model.index(":") + 1
            rest = self.model[start + len(folder) :]
            paths["model"] = self.model[:start] + str(Path(folder).resolve()) + rest
        spec = parse_reranker(self.reranker)
        if spec is not None:  # a spec ("cross-encoder:DIR"), not a path: only its folder is made absolute
            paths["reranker"] = str(spec.absolute())
        return dataclasses.replace(self, **paths)


def settings_source(env: Mapping[str, Any]) -> Path | None:
    """Where the inference settings of an ``env`` mapping come from (see :attr:`EnvConfig.inference`)."""
    inference = str(env.get("inference") or "").strip()
    if inference.lower() in ("", "none"):
        return None
    if inference.lower() != "auto":
        if not Path(inference).exists():
            raise ConfigError("EnvConfig", "inference", inference, "no such settings file or folder")
        return Path(inference)
    model = str(env.get("model") or "")
    prefix, sep, rest = model.partition(":")
    target = (rest if sep and "/" not in prefix else model).partition("?")[0]
    if not sep or "/" in prefix or prefix in ("hf", "vllm"):
        return Path(target) if target else None
    tokenizer = backend_options(model).get("tokenizer") if prefix.startswith("openai") else None
    return Path(tokenizer) if tokenizer else None


@dataclass(frozen=True)
class SettingsUsed:
    """Which inference settings an ``env`` mapping was merged over (None: none), and which of their keys the run's
    own file, flags or overrides set again."""

    source: Path | None
    settings: InferenceSettings | None
    overridden: tuple[str, ...] = ()


def with_settings(env: Mapping[str, Any]) -> tuple[dict[str, Any], SettingsUsed]:
    """The ``env`` mapping with its inference settings merged under it (the mapping's own keys win)."""
    source = settings_source(env)
    found = load_settings(source) if source is not None else None
    if found is None or source is None:
        return dict(env), SettingsUsed(None, None)
    base: dict[str, Any] = {"engine": found.engine_values()}
    if found.protocol is not None:
        base["protocol"] = found.protocol
    rerank = found.reranker_spec(settings_folder(source))
    if rerank is not None:
        base["reranker"] = str(rerank)
    mine = {*env.get("engine", {}), *(k for k in ("protocol", "reranker") if env.get(k) is not None)}
    overridden = tuple(sorted(k for k in found.shown() if k in mine))
    return merge(base, env), SettingsUsed(source, found, overridden)


def refuse_old_layout(cls: type, data: Mapping[str, Any], source: str) -> None:
    """A top-level key of the layout before ``env:`` that ``cls`` does not have is refused, naming where it moved."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key, value in data.items():
        if key not in names and key in MOVED and (key != "reward" or "objective" in names):
            why = f"in {source}: this key moved to {MOVED[key]} (a run config is env: + the algorithm's fields"
            raise ConfigError(cls.__name__, key, value, why + " + objective:)")


def load_run_config(cls: type[T], path: str | Path | None = None, overrides: Sequence[str] = ()) -> T:
    """A run config with an ``env:`` section from YAML (``extends`` resolved) and ``key=value`` overrides, the
    policy's inference settings merged under ``env:`` (see the module docstring)."""
    source = " + ".join(
        [*([str(path)] if path is not None else []), *(["the key=value overrides"] if overrides else [])]
    )
    source = source or "defaults"
    data: dict[str, Any] = read_yaml(cls.__name__, Path(path)) if path is not None else {}
    data = merge_written(data, parse_overrides(overrides))
    refuse_old_layout(cls, data, source)
    env = data.get("env", {})
    if isinstance(env, Mapping):
        data["env"], _ = with_settings(env)
    return from_dict(cls, data, source=source)
