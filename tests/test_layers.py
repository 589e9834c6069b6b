"""The library's layers flow one way (DEVELOPERS.md, "How we write code" 1): no module imports a higher layer.

types ← data/world ← retrieval, llm ← agent ← rewards ← env ← train, eval ← cli; the applications beside the CLI
(reproduce, view, serve, integrations) sit with it at the top. Imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "effirag"

LAYERS: dict[str, int] = {
    **dict.fromkeys(("types", "errors", "config", "metrics", "distributed"), 0),
    **dict.fromkeys(("data", "world"), 1),
    **dict.fromkeys(("retrieval", "llm"), 2),
    "agent": 3,
    "rewards": 4,
    "env": 5,
    **dict.fromkeys(("train", "eval"), 6),
    **dict.fromkeys(("cli", "reproduce", "view", "serve", "integrations"), 7),
}
"""Top-level package or module of ``effirag`` → its layer; a module may import its own layer and those below."""


def upward_imports(layers: dict[str, int]) -> list[str]:
    """``file: module`` for every import of a higher layer, and for every part of ``effirag`` the table lacks."""
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        part = path.relative_to(SRC).parts[0].removesuffix(".py")
        if part == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if not name.startswith("effirag."):
                    continue
                dep = name.split(".")[1]
                if part not in layers or dep not in layers:
                    bad.append(f"{path.relative_to(SRC)}: {name} (layer of {part!r} or {dep!r} unknown)")
                elif layers[dep] > layers[part]:
                    bad.append(f"{path.relative_to(SRC)}: {name} (layer {layers[part]} imports {layers[dep]})")
    return bad


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_imports(LAYERS) == []


def test_env_sits_between_rewards_and_the_trainers() -> None:
    """env builds on agent, retrieval and the rewards' judges, and every trainer builds its run through it: placed
    below rewards or above train, the layer check fails."""
    assert upward_imports({**LAYERS, "env": LAYERS["rewards"] - 1})
    assert upward_imports({**LAYERS, "env": LAYERS["train"] + 1})
