"""DPO + η·SFT on preference pairs with TRL's DPOTrainer, the loss restricted to the policy's own tokens.

TRL 1.16's DPOTrainer computes every loss term from one ``completion_mask`` (1 = completion token): the sequence
log-probabilities of the sigmoid DPO loss, Σ_t mask_t·log π(y_t | x, y_<t), and the ``sft`` term, the mean NLL over
the chosen side's masked tokens (the forward only scores positions whose label is not −100). Its collator builds that
mask as "everything after the prompt". :class:`MaskedPreferenceCollator` multiplies each pair's per-token policy
mask into it, so inserted observations count in neither term (TeaRAG eq. 15–16), and :class:`MaskedDPOTrainer`
takes rows already tokenised (the engine's ids, never re-encoded) and keeps the two mask columns. With
``loss_type=["sigmoid", "sft"]`` and ``loss_weights=[1, η]`` the objective is TeaRAG's L_ALL = L_DPO + η·L_SFT
(eq. 17), with L_SFT averaged per policy token as in SFT (eq. 4) rather than summed.

The reference policy is the model the trainer was given, as it was when training started (TRL reloads it from the
model's own folder; with LoRA, the base model with the adapter disabled). In IP-DPO that is Θ_{p−1}, the previous
round's policy, as eq. 16 asks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from trl import DPOConfig, DPOTrainer
from trl.trainer.dpo_trainer import DataCollatorForPreference

from effirag.train.dpo.config import DPOTrainConfig
from effirag.train.dpo.pairs import PreferencePair
from effirag.train.sft import peft_config

LOG_KEYS = (
    *("loss", "grad_norm", "learning_rate", "rewards/chosen", "rewards/rejected", "rewards/accuracies"),
    *("rewards/margins", "logps/chosen", "logps/rejected", "entropy", "mean_token_accuracy"),
)


class MaskedPreferenceCollator(DataCollatorForPreference):  # type: ignore[misc]
    """TRL's preference collator, with each row's ``chosen_mask`` / ``rejected_mask`` (1 = policy token) multiplied
    into the ``completion_mask`` it builds (prompt positions stay 0; truncation as TRL's ``keep_start``)."""

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        out = super().torch_call(examples)
        rows = [[0] * len(e["prompt_ids"]) + list(e["chosen_mask"]) for e in examples]
        rows += [[0] * len(e["prompt_ids"]) + list(e["rejected_mask"]) for e in examples]
        width = out["completion_mask"].shape[1]
        policy = torch.zeros_like(out["completion_mask"])  # (2B, T): chosen rows, then rejected rows
        for i, row in enumerate(rows):
            row = row[: self.max_length] if self.max_length is not None else row
            policy[i, : min(len(row), width)] = torch.tensor(row[:width], dtype=policy.dtype)
        out["completion_mask"] = out["completion_mask"] * policy
        return out


class MaskedDPOTrainer(DPOTrainer):  # type: ignore[misc]
    """TRL's DPOTrainer over rows that are already token ids with policy masks (:meth:`PreferencePair.row`)."""

    def _prepare_dataset(self, dataset: Any, processing_class: Any, args: Any, dataset_name: str) -> Any:
        needed = {"prompt_ids", "chosen_ids", "rejected_ids", "chosen_mask", "rejected_mask"}
        missing = needed - set(dataset.column_names)
        if missing:
            raise ValueError(f"{dataset_name} dataset lacks the columns {sorted(missing)} (rows of PreferencePair)")
        return dataset

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()
        columns: list[str] = list(self._signature_columns or ())
        self._signature_columns = [*columns, "chosen_mask", "rejected_mask"]  # type: ignore[assignment]  # TRL types it None


def dpo_args(cfg: DPOTrainConfig, output_dir: str | Path, save_steps: int = 0, **extra: Any) -> DPOConfig:
    """TRL's DPOConfig for ``cfg``: sigmoid DPO, plus the ``sft`` term weighted η when ``cfg.sft_weight`` > 0;
    a checkpoint every ``save_steps`` steps (0: none); logging every step."""
    sft = cfg.sft_weight > 0
    kwargs: dict[str, Any] = dict(
        output_dir=str(output_dir),
        learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps or -1,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        beta=cfg.beta,
        loss_type=["sigmoid", "sft"] if sft else ["sigmoid"],
        loss_weights=[1.0, cfg.sft_weight] if sft else [1.0],
        max_length=cfg.max_length,
        pad_to_multiple_of=None,
        logging_steps=1,
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500,
        seed=cfg.seed,
        data_seed=cfg.seed,
        bf16=cfg.bf16,
        use_cpu=not torch.cuda.is_available(),  # transformers refuses bf16 on a machine without a GPU otherwise
        report_to="none",
        disable_tqdm=True,
    )
    kwargs.update(extra)
    return DPOConfig(**kwargs)


def lora_model(cfg: DPOTrainConfig, model: Any) -> Any:
    """``model`` wrapped in the LoRA adapter of ``cfg.lora`` when it is enabled, else ``model``."""
    lora = peft_config(cfg.lora)
    if lora is None:
        return model
    from peft import get_peft_model

    return get_peft_model(model, lora)


def build_dpo_trainer(
    cfg: DPOTrainConfig,
    model: Any,
    tokenizer: Any,
    pairs: Sequence[PreferencePair],
    output_dir: str | Path,
    *,
    save_steps: int = 0,
    callbacks: Sequence[Any] = (),
    ref_model: Any = None,
    **trl_extra: Any,
) -> MaskedDPOTrainer:
    """A :class:`MaskedDPOTrainer` on ``pairs`` (see the module docstring). ``ref_model`` None: the reference is
    ``model`` as loaded from its folder (or the LoRA base)."""
    import os

    from datasets import Dataset

    if not pairs:
        raise ValueError("build_dpo_trainer: no preference pairs to train on")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    collator = MaskedPreferenceCollator(pad_token_id=int(tokenizer.pad_token_id), max_length=cfg.max_length)
    return MaskedDPOTrainer(
        model=lora_model(cfg, model),
        ref_model=ref_model,
        args=dpo_args(cfg, output_dir, save_steps, **trl_extra),
        data_collator=collator,
        train_dataset=Dataset.from_list([p.row() for p in pairs]),
        processing_class=tokenizer,
        callbacks=list(callbacks),
    )


class DPOStepLog(TrainerCallback):  # type: ignore[misc]
    """One JSON record per optimiser step: TRL's DPO statistics (loss, reward margins and accuracy, log-probs) and the
    step's seconds; ``extra`` is added to every record (e.g. the IP-DPO round). On resume, records of steps after the
    checkpoint are dropped first, so the log has each step once."""

    def __init__(self, path: str | Path, **extra: Any) -> None:
        self.path = Path(path)
        self.extra = extra
        self._t0 = time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.path.is_file():  # a resumed run: keep the steps up to the checkpoint it continues from
            kept = [r for r in self.path.read_text(encoding="utf-8").splitlines() if r.strip()]
            kept = [r for r in kept if json.loads(r)["step"] <= state.global_step]
            self.path.write_text("".join(r + "\n" for r in kept), encoding="utf-8")

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._t0 = time.perf_counter()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        logs = logs or {}
        if "loss" not in logs:  # the end-of-training summary, not a step
            return
        rec: dict[str, Any] = {"step": int(state.global_step), **self.extra}
        rec.update({k: float(v) for k, v in logs.items() if k in LOG_KEYS and isinstance(v, int | float)})
        rec["step_s"] = time.perf_counter() - self._t0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
