"""A scripted generator: replays given completions deterministically (tests, SFT replay, ``--backend scripted:FILE``).

Two modes. A *list* is consumed in order, one entry per completion, across calls (in a batch: prompt order, ``n``
entries per prompt). A *mapping* ``key → list`` serves each prompt from the list of the first key (in insertion order)
that occurs in the prompt (e.g. the question text), with one cursor per key. Stop strings and ``max_new_tokens`` are
applied as a real backend would: the text is cut after the first stop string (kept) or at the token limit.
Token counts come from the given tokenizer, or from whitespace splitting when none is given.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from effirag.errors import BackendError, DataError
from effirag.llm.base import Completion, GenerationConfig, Tokenizer, special_strings
from effirag.llm.stops import truncate_at_stop


class ScriptedGenerator:
    """Replays ``completions`` (a list, or a mapping from prompt substring to a list); see the module docstring."""

    def __init__(
        self,
        completions: Sequence[str] | Mapping[str, Sequence[str] | str],
        tokenizer: Tokenizer | None = None,
        *,
        source: str = "<memory>",
    ) -> None:
        self.tokenizer = tokenizer
        self.source = source
        self._list: list[str] | None = None
        self._map: dict[str, list[str]] = {}
        if isinstance(completions, Mapping):
            self._map = {str(k): [v] if isinstance(v, str) else list(v) for k, v in completions.items()}
        else:
            self._list = list(completions)
        self._cursor: dict[str | None, int] = {}
        self.calls = 0
        self.prompts: list[str] = []  # every prompt seen, in order (tests assert what the model was shown)

    @property
    def name(self) -> str:
        return f"scripted:{self.source}"

    @property
    def control_strings(self) -> tuple[str, ...]:
        """The given tokenizer's special tokens (none for whitespace counting), defused by the engine in documents."""
        return special_strings(self.tokenizer) if self.tokenizer is not None else ()

    @classmethod
    def from_file(cls, path: str | Path, tokenizer: Tokenizer | None = None) -> ScriptedGenerator:
        """Load a JSON list / mapping, or JSONL whose lines are strings or ``{"text": …}`` (optionally ``"key"``)."""
        p = Path(path)
        if not p.is_file():
            raise DataError("scripted completions file not found", path=p)
        if p.suffix == ".jsonl":
            items: list[str] = []
            keyed: dict[str, list[str]] = {}
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"invalid JSON: {e.msg}", path=p, record=f"line {n}") from e
                if isinstance(rec, str):
                    items.append(rec)
                elif isinstance(rec, dict) and isinstance(rec.get("text"), str):
                    if "key" in rec:
                        keyed.setdefault(str(rec["key"]), []).append(rec["text"])
                    else:
                        items.append(rec["text"])
                else:
                    raise DataError("expected a string or an object with a string 'text'", path=p, record=f"line {n}")
            if items and keyed:
                raise DataError("mixes keyed and unkeyed completions", path=p)
            return cls(keyed if keyed else items, tokenizer, source=str(p))
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise DataError(f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}", path=p) from e
        if isinstance(data, list) and all(isinstance(x, str) for x in data):
            return cls(data, tokenizer, source=str(p))
        if isinstance(data, dict) and all(
            isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)) for v in data.values()
        ):
            return cls(data, tokenizer, source=str(p))
        raise DataError("expected a JSON list of strings or a mapping key → string | list of strings", path=p)

    # --- Generator protocol ----------------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        if self.tokenizer is None:
            return len(text.split())
        return len(self.tokenizer.encode(text))

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        self.calls += 1
        self.prompts.extend(prompts)
        return [[self._complete(self._next(p), config) for _ in range(config.n)] for p in prompts]

    def encode(self, text: str, *, prompt: bool = False) -> list[int]:
        """Ids of ``text`` under the given tokenizer (the token path needs one: whitespace ids cannot be decoded)."""
        return list(self._tokenizer_for("encode").encode(text))

    def generate_ids(self, prompts: Sequence[Sequence[int]], config: GenerationConfig) -> list[list[Completion]]:
        """Serve decoded prompt ids from the script, as :meth:`generate` serves text (no logprobs: a script has no
        distribution)."""
        tok = self._tokenizer_for("generate_ids")
        return self.generate([tok.decode(list(p)) for p in prompts], config)

    # --- internals -------------------------------------------------------------------------------------------
    def _tokenizer_for(self, what: str) -> Tokenizer:
        if self.tokenizer is None:
            raise BackendError(f"{self.name}: {what} needs a tokenizer (whitespace token ids cannot be decoded)")
        return self.tokenizer

    def _ids(self, text: str) -> list[int]:
        if self.tokenizer is not None:
            return list(self.tokenizer.encode(text))
        return [zlib.crc32(w.encode("utf-8")) & 0x7FFFFFFF for w in text.split()]

    def _next(self, prompt: str) -> str:
        if self._list is not None:
            key: str | None = None
            pool = self._list
        else:
            key = next((k for k in self._map if k in prompt), None)
            if key is None:
                raise BackendError(f"{self.name}: no scripted key occurs in the prompt {prompt[-120:]!r}")
            pool = self._map[key]
        i = self._cursor.get(key, 0)
        if i >= len(pool):
            where = "" if key is None else f" for key {key!r}"
            raise BackendError(f"{self.name}: script exhausted after {len(pool)} completion(s){where}")
        self._cursor[key] = i + 1
        return pool[i]

    def _complete(self, text: str, config: GenerationConfig) -> Completion:
        cut, stop = truncate_at_stop(text, config.stop)
        finish = "stop"
        if self.tokenizer is None:
            words = cut.split()
            if len(words) > config.max_new_tokens:
                # Keep the original spacing of the first max_new_tokens words.
                end = 0
                for word in words[: config.max_new_tokens]:
                    end = cut.index(word, end) + len(word)
                cut, stop, finish = cut[:end], None, "length"
        else:
            ids = list(self.tokenizer.encode(cut))
            if len(ids) > config.max_new_tokens:
                cut, stop, finish = self.tokenizer.decode(ids[: config.max_new_tokens]), None, "length"
        return Completion(cut, tuple(self._ids(cut)), finish, None, stop)
