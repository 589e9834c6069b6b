"""PPO checkpoints: everything a resumed run needs to continue to the weights an uninterrupted run reaches.

``OUTPUT_DIR/checkpoint-N/`` holds ``policy/`` (the HF model and tokenizer after N steps; a LoRA run writes its
adapter alone to ``adapter/`` instead, :mod:`effirag.train.rl.ppo_lora`), ``value_head.safetensors`` (and with
``critic: separate`` the critic's trunk in ``critic/``, :mod:`effirag.train.rl.ppo_critic`),
``optimizer.pt`` (AdamW's state: tensors and numbers only, read back with ``weights_only=True``), ``rng.safetensors``
(torch's CPU generator state) and ``state.json`` (the step). A checkpoint is written to ``checkpoint-N.tmp`` and
renamed when complete, so a run killed mid-save leaves no half checkpoint behind. Question order, rollout seeds and
mini-batch order are functions of (seed, step), so these states are all a resumed run lacks.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file


def checkpoints(output_dir: str | Path) -> list[Path]:
    """The complete ``checkpoint-N`` folders of a run, oldest first."""
    found = [p for p in Path(output_dir).glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    return sorted((p for p in found if (p / "state.json").is_file()), key=lambda p: int(p.name.split("-")[-1]))


def save_checkpoint(
    output_dir: str | Path,
    step: int,
    policy: Any,
    tokenizer: Any,
    head: torch.nn.Module,
    optimizer: Any,
    model_folder: str = "policy",
    critic: Any = None,
) -> Path:
    """Write ``checkpoint-{step}`` (see the module docstring; ``policy.save_pretrained`` goes to ``model_folder``, a
    separate ``critic``'s trunk to ``critic/``) and return its folder."""
    from effirag.train.rl.ppo_critic import save_critic

    final = Path(output_dir) / f"checkpoint-{step}"
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    policy.save_pretrained(str(tmp / model_folder))
    tokenizer.save_pretrained(str(tmp / model_folder))
    save_file({k: v.contiguous() for k, v in head.state_dict().items()}, str(tmp / "value_head.safetensors"))
    save_critic(critic, tmp)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    save_file({"cpu": torch.get_rng_state()}, str(tmp / "rng.safetensors"))
    (tmp / "state.json").write_text(json.dumps({"step": step}), encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def checkpoint_step(folder: Path) -> int:
    return int(json.loads((folder / "state.json").read_text(encoding="utf-8"))["step"])


def restore_checkpoint(folder: Path, head: torch.nn.Module, optimizer: Any) -> int:
    """Load the value head, optimiser and RNG state of ``folder`` (the policy or adapter is loaded by the caller,
    :func:`effirag.train.rl.ppo_lora.load_policy`); returns the step it was taken at."""
    head.load_state_dict(load_file(str(folder / "value_head.safetensors")))
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True, map_location="cpu"))
    torch.set_rng_state(load_file(str(folder / "rng.safetensors"))["cpu"])
    return checkpoint_step(folder)
