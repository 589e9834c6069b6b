""":class:`LivePolicy`: a :class:`~effirag.llm.base.Generator` standing for a policy that is being trained.

HiPRAG's over-search judge (§3.2) asks *the policy* to re-answer a step's sub-question without retrieval. During RL the
judge is built with the environment, before the trainer exists, and the policy's weights change every step: the judge
holds a :class:`LivePolicy`, which the run binds, once its trainer is built, to a factory returning a generator over
the policy's current weights (the generator the step's episodes were sampled with).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from effirag.llm.base import Completion, GenerationConfig, Generator
from effirag.llm.chat import as_chat


class LivePolicy:
    """Forwards every call to ``factory()`` as :meth:`bind` set it; calls before :meth:`bind` fail naming it."""

    def __init__(self, name: str = "policy") -> None:
        self._name = name
        self._factory: Callable[[], Generator] | None = None

    def bind(self, factory: Callable[[], Generator]) -> None:
        """``factory()`` returns a generator over the policy's weights as they are now."""
        self._factory = factory

    @property
    def bound(self) -> bool:
        return self._factory is not None

    def _current(self) -> Generator:
        if self._factory is None:
            raise RuntimeError(f"LivePolicy {self._name!r} is used before the trainer bound it to the policy")
        return self._factory()

    @property
    def name(self) -> str:
        return self._name

    def count_tokens(self, text: str) -> int:
        return self._current().count_tokens(text)

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        return self._current().generate(prompts, config)

    def format_prompt(self, text: str) -> str:
        """``text`` as the current generator starts an episode from it (in its chat template for a chat policy)."""
        return as_chat(self._current(), text)
