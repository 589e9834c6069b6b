"""EffiRAG-World: a generated multi-hop knowledge world with exact ground truth.

``generate_world(load_world_config("demo"), "out/world")`` writes the corpus, triplets, questions, knowledge and
``world.json`` (see :mod:`effirag.world.build`); ``World.load("out/world")`` reads the ground truth back
(see :mod:`effirag.world.world` for the API: facts, known subset, ``fact_for``).
"""

from effirag.world.build import generate_world
from effirag.world.config import PRESETS, WorldConfig, load_world_config
from effirag.world.world import Entity, Fact, World

__all__ = ["PRESETS", "Entity", "Fact", "World", "WorldConfig", "generate_world", "load_world_config"]
