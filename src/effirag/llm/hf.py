"""Hugging Face transformers backend: any local causal-LM directory, batched generation with left padding.

Prompts × ``n`` samples become rows; rows are sorted by prompt length and generated in chunks of ``max_batch_size``
(left padded, so every row's next token sits in the last column). A stopping criterion decodes each row's recent
tail and finishes that row as soon as a stop string appears; afterwards the text is cut right after the first stop
string (kept) and ``token_ids`` are the sampled tokens up to and including the one that completed it.

Sampling is fully specified by :class:`~effirag.llm.base.GenerationConfig`: the model's own
``generation_config.json`` sampling defaults (top-k, repetition penalty, …) are *not* inherited, so a run is
reproducible from EffiRAG's config alone. Logprobs are the model's own distribution (log-softmax of the raw logits,
before temperature / top-p), which is what policy-gradient ratios need.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from transformers import LogitsProcessor, StoppingCriteria

from effirag.errors import BackendError
from effirag.llm.base import Completion, GenerationConfig, special_strings
from effirag.llm.chat import chat_prompt
from effirag.llm.penalties import generated_counts, output_penalties

log = logging.getLogger(__name__)

_DTYPES = ("auto", "float32", "bfloat16", "float16")


class GenerationCancelled(BackendError):
    """``generate`` stopped early because its ``should_stop`` callback said so (client gone, deadline, shutdown)."""


class _NoKernelFallbackNotice(logging.Filter):
    """Drops transformers' notice that ``causal_conv1d`` is not installed (LFM2's short convolutions then run in
    PyTorch, which is correct). It is printed twice per model load and cannot be acted on here: the kernel needs CUDA.
    Every other message of that logger passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not ("falling back to its reference PyTorch implementation" in msg and "causal_conv1d" in msg)


def _quiet_kernel_fallback() -> None:
    hub = logging.getLogger("transformers.integrations.hub_kernels")
    if not any(isinstance(f, _NoKernelFallbackNotice) for f in hub.filters):
        hub.addFilter(_NoKernelFallbackNotice())


class HFGenerator:
    """A :class:`~effirag.llm.base.Generator` over a local transformers model directory.

    ``device``: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``. ``dtype``: ``"auto"``
    (bfloat16/float16 on CUDA, float32 on CPU) or an explicit ``float32``/``bfloat16``/``float16``.
    ``max_batch_size``: rows (prompt × sample) per forward batch. ``add_special_tokens``: whether prompts get the
    tokenizer's special tokens (e.g. Llama's BOS); turn off when prompts are already rendered by a chat template.
    ``chat``: an episode's initial prompt becomes the user message of the tokenizer's chat template
    (:meth:`format_prompt`, :mod:`effirag.llm.chat`; for instruct models), and prompts get no special tokens added.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        device: str = "auto",
        dtype: str = "auto",
        max_batch_size: int = 16,
        add_special_tokens: bool = True,
        chat: bool = False,
    ) -> None:
        if dtype not in _DTYPES:
            raise BackendError(f"hf:{model_path}: dtype={dtype!r} is not one of {_DTYPES}")
        if max_batch_size < 1:
            raise BackendError(f"hf:{model_path}: max_batch_size={max_batch_size!r} must be >= 1")
        self.model_path = Path(model_path)
        self.device_request = device
        self.dtype_request = dtype
        self.max_batch_size = max_batch_size
        self.add_special_tokens = add_special_tokens and not chat  # a chat template writes its own special tokens
        self.chat = chat
        self._tok: Any = None
        self._model: Any = None
        self._device: Any = None
        self._eos_ids: frozenset[int] = frozenset()

    @property
    def name(self) -> str:
        return f"hf:{self.model_path}" + ("?chat=1" if self.chat else "")  # run records tell chat runs apart

    # ------------------------------------------------------------------ loading

    @property
    def tokenizer(self) -> Any:
        """The policy's ``transformers`` tokenizer (loaded on first use; no model weights needed)."""
        if self._tok is None:
            self._tok = load_folder_tokenizer(self.model_path, self.name)
        return self._tok

    @property
    def model(self) -> Any:
        """The loaded ``transformers`` model (call :meth:`load` first, or let :meth:`generate` do it)."""
        self.load()
        return self._model

    @property
    def device(self) -> Any:
        self.load()
        return self._device

    def load(self) -> HFGenerator:
        """Load tokenizer and weights onto the device (idempotent); returns ``self``."""
        if self._model is not None:
            return self
        import torch
        from transformers import AutoModelForCausalLM

        tok = self.tokenizer
        device = self.device_request
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise BackendError(f"{self.name}: device={device!r} requested but CUDA is not available")
        if self.dtype_request == "auto":
            if device.startswith("cuda"):
                dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            else:
                dtype = torch.float32
        else:
            dtype = getattr(torch, self.dtype_request)
        try:
            model: Any = AutoModelForCausalLM.from_pretrained(str(self.model_path), dtype=dtype)
        except (OSError, ValueError) as e:
            raise BackendError(f"{self.name}: cannot load the model: {e}") from e
        model.to(device)
        model.eval()
        self._adopt(model, tok)
        log.info("loaded %s on %s (%s)", self.name, device, dtype)
        return self

    @classmethod
    def from_loaded(
        cls, model: Any, tokenizer: Any, *, name: str = "in-memory", max_batch_size: int = 16, chat: bool = False
    ) -> HFGenerator:
        """Wrap a model and tokenizer already in memory (e.g. the policy being trained, for on-policy rollouts).

        The model stays where it is (its device, dtype and weights are shared, not copied); generation runs in eval
        mode and restores the model's train/eval mode afterwards. ``chat`` as in the constructor.
        """
        gen = cls(name, max_batch_size=max_batch_size, chat=chat)
        gen._adopt(model, tokenizer)
        return gen

    def _adopt(self, model: Any, tokenizer: Any) -> None:
        _quiet_kernel_fallback()
        eos: set[int] = set()
        for src in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
            if isinstance(src, int):
                eos.add(src)
            elif src is not None:
                eos.update(int(x) for x in src)
        self._eos_ids = frozenset(eos)
        self._tok = tokenizer
        self._device = next(model.parameters()).device
        self._model = model

    # ------------------------------------------------------------------ Generator

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    @property
    def control_strings(self) -> tuple[str, ...]:
        """The tokenizer's special tokens (BOS/EOS/pad, chat markers, any added token flagged special): text the
        engine defuses in retrieved documents so that they never become control ids. Added tokens that are not
        special (protocol tags, whole-word entity names) are ordinary text and are not listed."""
        return special_strings(self.tokenizer)

    def format_prompt(self, text: str) -> str:
        """An episode's initial prompt: ``text`` in the chat template when ``chat``, else ``text`` itself."""
        return chat_prompt(self.tokenizer, text, self.name) if self.chat else text

    def encode(self, text: str, *, prompt: bool = False) -> list[int]:
        """Ids of ``text``; a prompt gets the special tokens :meth:`generate` gives it (``add_special_tokens``)."""
        return list(self.tokenizer.encode(text, add_special_tokens=prompt and self.add_special_tokens))

    def generate(
        self, prompts: Sequence[str], config: GenerationConfig, *, should_stop: Callable[[], bool] | None = None
    ) -> list[list[Completion]]:
        """Per prompt, ``config.n`` completions. ``should_stop`` (optional) is polled after every generated token
        and between batches; once it returns True the call ends with :class:`GenerationCancelled` (a server uses
        this to drop the work of a client that has gone away)."""
        if isinstance(prompts, str):
            raise BackendError(f"{self.name}: generate() takes a sequence of prompts, got one string")
        return self.generate_ids([self.encode(p, prompt=True) for p in prompts], config, should_stop=should_stop)

    def generate_ids(
        self,
        prompts: Sequence[Sequence[int]],
        config: GenerationConfig,
        *,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[list[Completion]]:
        """Generate from prompt ids as given (the token path of :class:`~effirag.llm.base.TokenGenerator`);
        ``should_stop`` as in :meth:`generate`."""
        import torch

        if not prompts:
            return []
        self.load()
        encoded: list[list[int]] = [list(p) for p in prompts]
        # Greedy samples are identical: generate one row per prompt and copy it n times.
        per_prompt = 1 if config.temperature == 0.0 else config.n
        rows = [i for i in range(len(prompts)) for _ in range(per_prompt)]
        # Longest first: similar lengths share a chunk, so there is little padding.
        order = sorted(range(len(rows)), key=lambda r: -len(encoded[rows[r]]))
        results: list[Completion | None] = [None] * len(rows)
        cuda = [self._device] if self._device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda, enabled=config.seed is not None):
            if config.seed is not None:
                torch.manual_seed(config.seed)
            for start in range(0, len(order), self.max_batch_size):
                if should_stop is not None and should_stop():
                    raise GenerationCancelled(f"{self.name}: generation cancelled")
                chunk = order[start : start + self.max_batch_size]
                outs = self._generate_rows([encoded[rows[r]] for r in chunk], config, should_stop)
                if should_stop is not None and should_stop():
                    raise GenerationCancelled(f"{self.name}: generation cancelled")
                for r, c in zip(chunk, outs, strict=True):
                    results[r] = c
        grouped: list[list[Completion]] = [[] for _ in prompts]
        for r, done in enumerate(results):
            assert done is not None
            grouped[rows[r]].append(done)
        if per_prompt == 1 and config.n > 1:
            grouped = [g * config.n for g in grouped]
        return grouped

    # ------------------------------------------------------------------ internals

    def _generate_rows(
        self, batch: list[list[int]], config: GenerationConfig, should_stop: Callable[[], bool] | None = None
    ) -> list[Completion]:
        import torch
        from transformers import GenerationConfig as HFGenerationConfig
        from transformers import LogitsProcessorList, StoppingCriteriaList

        tok = self.tokenizer
        pad = tok.pad_token_id
        if pad is None:
            pad = min(self._eos_ids) if self._eos_ids else 0
        width = max(len(ids) for ids in batch)
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)  # (rows, width), left padded
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for i, ids in enumerate(batch):
            if ids:
                input_ids[i, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
                attention[i, width - len(ids) :] = 1
        sample = config.temperature > 0.0
        gen_cfg = HFGenerationConfig(
            max_new_tokens=config.max_new_tokens,
            do_sample=sample,
            temperature=config.temperature if sample else 1.0,
            top_p=config.top_p if sample else 1.0,
            top_k=0 if sample else None,  # 0 disables HF's default top-k=50 filter
            repetition_penalty=1.0,
            num_beams=1,
            use_cache=True,  # never the model config's: trainers save use_cache=false, which re-runs the whole prefix
            pad_token_id=pad,
            eos_token_id=sorted(self._eos_ids) or None,
            return_dict_in_generate=True,
            output_logits=config.logprobs,
        )
        criteria = StoppingCriteriaList()
        if config.stop:
            criteria.append(_StopOnStrings(tok, config.stop, prompt_len=width))
        if should_stop is not None:
            criteria.append(_StopWhen(should_stop))
        processors = LogitsProcessorList()
        if config.frequency_penalty or config.presence_penalty:
            processors.append(_OutputPenalty(config.frequency_penalty, config.presence_penalty, prompt_len=width))
        was_training = bool(self._model.training)
        self._model.eval()
        try:
            with torch.inference_mode():
                out = self._model.generate(
                    input_ids=input_ids.to(self._device),
                    attention_mask=attention.to(self._device),
                    generation_config=gen_cfg,
                    stopping_criteria=criteria,
                    logits_processor=processors,
                )
        finally:
            self._model.train(was_training)
        new = out.sequences[:, width:].cpu()  # (rows, steps)
        token_lp: torch.Tensor | None = None
        if config.logprobs:
            # out.logits: steps × (rows, vocab) raw logits; keep only the sampled token's log-probability.
            cols = [
                torch.log_softmax(step.float(), dim=-1).gather(1, new[:, t : t + 1].to(step.device)).squeeze(1).cpu()
                for t, step in enumerate(out.logits)
            ]
            token_lp = torch.stack(cols, dim=1)  # (rows, steps)
        return [
            self._finish(new[i].tolist(), None if token_lp is None else token_lp[i].tolist(), config)
            for i in range(len(batch))
        ]

    def _finish(self, ids: list[int], lps: list[float] | None, config: GenerationConfig) -> Completion:
        """One row's sampled ids → a Completion: cut at EOS, then at the first stop string (kept); the rule every token
        backend shares (:func:`effirag.llm.tokens.finish_ids`)."""
        from effirag.llm.tokens import finish_ids

        return finish_ids(ids, lps, config.stop or (), self._eos_ids, self._decode)

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False))


def load_folder_tokenizer(folder: Path, name: str) -> Any:
    """The ``transformers`` tokenizer of a model folder; BackendError (naming the backend ``name``) when the folder is
    missing or holds no loadable tokenizer. Shared by the HF and vLLM backends."""
    from transformers import AutoTokenizer

    if not folder.is_dir():
        raise BackendError(f"{name}: model directory not found")
    try:
        return AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError) as e:
        raise BackendError(f"{name}: cannot load the tokenizer: {e}") from e


class _OutputPenalty(LogitsProcessor):
    """OpenAI-style frequency / presence penalties over each row's generated tokens (:mod:`effirag.llm.penalties`).

    Applied before temperature and top-p, as vLLM does; ``logprobs`` stay the raw model's (``output_logits``)."""

    def __init__(self, frequency: float, presence: float, prompt_len: int) -> None:
        self.frequency = frequency
        self.presence = presence
        self.prompt_len = prompt_len

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        counts = generated_counts(input_ids, self.prompt_len, scores.shape[-1])  # (rows, vocab)
        return output_penalties(scores, counts, self.frequency, self.presence)


class _StopOnStrings(StoppingCriteria):
    """Per-row stopping criterion: a row is done once the decoded tail of its generated tokens holds a stop string.

    Only the last ``max(len(stop)) + 2`` tokens are decoded each step (every non-special token decodes to at least
    one character, so that window always covers a stop string that has just been completed).
    """

    def __init__(self, tokenizer: Any, stops: Sequence[str], prompt_len: int) -> None:
        self.tokenizer = tokenizer
        self.stops = [s for s in stops if s]
        self.prompt_len = prompt_len
        self.window = max((len(s) for s in self.stops), default=1) + 2

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        tails = input_ids[:, self.prompt_len :][:, -self.window :]  # (rows, ≤ window)
        texts = self.tokenizer.batch_decode(
            tails.tolist(), skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        done = [any(s in t for s in self.stops) for t in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class _StopWhen(StoppingCriteria):
    """Ends every row at once when ``should_stop()`` turns True (checked after each generated token)."""

    def __init__(self, should_stop: Callable[[], bool]) -> None:
        self.should_stop = should_stop

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        stop = bool(self.should_stop())
        return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)
