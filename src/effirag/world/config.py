"""``WorldConfig``: every knob of EffiRAG-World, with presets ``demo``, ``small`` and ``large``.

Resolution order (later wins): the dataclass defaults, a preset, a YAML file, ``key=value`` overrides.
The defaults *are* the ``demo`` preset; the other presets only change sizes (``configs/world/*.yaml`` mirror them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from effirag.config import check, from_dict, merge, merge_written, option, parse_overrides
from effirag.errors import ConfigError

HOP_FIELDS = ("one_hop", "two_hop", "three_hop", "four_hop", "comparison")
TYPE_SHARE_FIELDS = (
    "share_country",
    "share_city",
    "share_university",
    "share_company",
    "share_band",
    "share_person",
    "share_film",
)


@dataclass
class WorldConfig:
    """Size, shape and noise of a generated world."""

    seed: int = option(0, help="Random seed: the same seed and config give byte-identical files.")
    passages: int = option(3000, help="Number of corpus passages (exact).")
    train_questions: int = option(800, help="Questions in questions_train.jsonl.")
    dev_questions: int = option(200, help="Questions in questions_dev.jsonl.")
    test_questions: int = option(300, help="Questions in questions_test.jsonl.")
    one_hop: float = option(0.2, help="Share of 1-hop questions (hop mix; the five shares sum to 1).")
    two_hop: float = option(0.4, help="Share of 2-hop compositional questions.")
    three_hop: float = option(0.15, help="Share of 3-hop compositional questions.")
    four_hop: float = option(0.1, help="Share of 4-hop compositional questions.")
    comparison: float = option(0.15, help="Share of comparison questions (which first / same nationality).")
    known_share: float = option(0.3, help="Share of facts the policy knows (written to knowledge.jsonl).")
    text_only_share: float = option(0.2, help="Share of stated facts that get no triplet (OpenIE misses them).")
    noisy_triplet_share: float = option(0.1, help="Share of triplets that are noise (no fact of the world).")
    collision_share: float = option(0.05, help="Share of films and cities reusing an existing name (disambiguated).")
    surname_pool: float = option(0.35, help="Distinct surnames per person without parents (lower: more sharing).")
    child_share: float = option(0.3, help="Share of persons with a recorded father and mother.")
    death_share: float = option(0.6, help="Share of persons with a death date.")
    films_per_director: float = option(4.0, help="Mean number of films per director.")
    companies_per_founder: float = option(1.5, help="Mean number of companies per founder.")
    members_per_band: float = option(2.5, help="Mean number of members per band.")
    min_words: int = option(60, help="Shortest passage, in words (filler sentences are added up to a random length).")
    max_words: int = option(150, help="Longest passage, in words.")
    share_country: float = option(0.02, help="Share of passages about countries (type shares sum to 1).")
    share_city: float = option(0.1, help="Share of passages about cities.")
    share_university: float = option(0.05, help="Share of passages about universities.")
    share_company: float = option(0.08, help="Share of passages about companies.")
    share_band: float = option(0.03, help="Share of passages about bands.")
    share_person: float = option(0.52, help="Share of passages about persons (two passages per person).")
    share_film: float = option(0.2, help="Share of passages about films (takes the rounding remainder).")

    def __post_init__(self) -> None:
        check(self.passages >= 200, self, "passages", "must be at least 200 (every entity type needs members)")
        for name in ("train_questions", "dev_questions", "test_questions"):
            check(getattr(self, name) >= 0, self, name, "must be >= 0")
        check(self.test_questions > 0, self, "test_questions", "must be > 0")
        for name in (*HOP_FIELDS, *TYPE_SHARE_FIELDS):
            v = getattr(self, name)
            check(0.0 <= v <= 1.0, self, name, "must be a share in [0, 1]")
        for name in ("known_share", "text_only_share", "collision_share", "child_share", "death_share"):
            check(0.0 <= getattr(self, name) <= 1.0, self, name, "must be a share in [0, 1]")
        check(0.0 <= self.noisy_triplet_share < 1.0, self, "noisy_triplet_share", "must be in [0, 1)")
        check(0.0 < self.surname_pool <= 1.0, self, "surname_pool", "must be in (0, 1]")
        hop_sum = sum(getattr(self, n) for n in HOP_FIELDS)
        check(
            abs(hop_sum - 1.0) < 1e-6,
            self,
            "comparison",
            f"the hop mix {', '.join(HOP_FIELDS)} must sum to 1 (sums to {hop_sum:.6g})",
        )
        type_sum = sum(getattr(self, n) for n in TYPE_SHARE_FIELDS)
        check(abs(type_sum - 1.0) < 1e-6, self, "share_film", f"the type shares must sum to 1 (sum {type_sum:.6g})")
        for name in TYPE_SHARE_FIELDS:
            check(getattr(self, name) > 0, self, name, "every entity type needs a positive share")
        for name in ("films_per_director", "companies_per_founder"):
            check(getattr(self, name) >= 1.0, self, name, "must be >= 1")
        check(self.members_per_band >= 1.0, self, "members_per_band", "must be >= 1")
        check(self.min_words >= 20, self, "min_words", "must be >= 20")
        check(self.max_words >= self.min_words + 40, self, "max_words", "must be at least min_words + 40")

    def hop_mix(self) -> dict[str, float]:
        """``{"1": …, "2": …, "3": …, "4": …, "comparison": …}``."""
        return dict(zip(("1", "2", "3", "4", "comparison"), (getattr(self, n) for n in HOP_FIELDS), strict=True))


#: Presets: overrides of the defaults (the defaults are the demo preset).
PRESETS: dict[str, dict[str, Any]] = {
    "demo": {},
    "small": {"passages": 20000, "train_questions": 5000, "dev_questions": 500, "test_questions": 1000},
    "large": {"passages": 1000000, "train_questions": 50000, "dev_questions": 2000, "test_questions": 5000},
}


def load_world_config(
    preset: str | None = "demo",
    path: str | Path | None = None,
    overrides: Sequence[str] = (),
    **explicit: Any,
) -> WorldConfig:
    """Preset, then YAML file, then ``key=value`` overrides, then explicit keyword values (CLI flags; None skipped)."""
    data: dict[str, Any] = {}
    if preset is not None:
        if preset not in PRESETS:
            raise ConfigError("WorldConfig", "preset", preset, f"unknown preset; known: {sorted(PRESETS)}")
        data = dict(PRESETS[preset])
    source = f"preset {preset}"
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError("WorldConfig", "<file>", str(p), "config file not found")
        loaded = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, Mapping):
            raise ConfigError("WorldConfig", "<root>", str(p), "the YAML file must hold a mapping")
        data = merge_written(data, loaded)
        source = str(p)
    data = merge_written(data, parse_overrides(overrides))
    data = merge(data, {k: v for k, v in explicit.items() if v is not None})
    return from_dict(WorldConfig, data, source=source)


def config_dict(cfg: WorldConfig) -> dict[str, Any]:
    """The config as plain data, in field order."""
    return {f.name: getattr(cfg, f.name) for f in fields(cfg)}
