"""Training progress on stderr only.

transformers' progress callback draws its bar on stderr but writes each log dict with ``tqdm.write``, which goes to
stdout, where a command's ``--json`` report must stand alone. :class:`StderrProgressCallback` writes those lines to
stderr too, so the trainers can show progress whatever the output format.
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.trainer_callback import ProgressCallback


class StderrProgressCallback(ProgressCallback):
    """transformers' progress bar, with the per-step log lines on stderr (floats to 4 significant digits)."""

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if state.is_world_process_zero and self.training_bar is not None:
            shown = {k: f"{v:.4g}" if isinstance(v, float) else v for k, v in (logs or {}).items() if k != "total_flos"}
            self.training_bar.write(str(shown), file=sys.stderr)


def progress_on_stderr(trainer: Any) -> None:
    """Swap a trainer's progress callback for :class:`StderrProgressCallback` (stdout stays free for reports)."""
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(StderrProgressCallback)
