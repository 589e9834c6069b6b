"""Trainers' progress stays on stderr: the bar and its per-step log lines never reach stdout (``--json`` reports)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from effirag.train.progress import StderrProgressCallback, progress_on_stderr


def test_log_lines_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    cb = StderrProgressCallback()
    state = SimpleNamespace(is_world_process_zero=True, max_steps=2, global_step=0)
    cb.on_train_begin(None, state, None)
    cb.on_log(None, state, None, logs={"loss": 2.345678, "total_flos": 1.0, "epoch": 1})
    cb.on_train_end(None, state, None)
    out, err = capsys.readouterr()
    assert out == ""
    assert "{'loss': '2.346', 'epoch': 1}" in err  # floats to 4 significant digits; total_flos left out


def test_the_trainers_progress_callback_is_swapped() -> None:
    from transformers.trainer_callback import CallbackHandler, ProgressCallback

    handler = CallbackHandler([ProgressCallback()], None, None, None, None)
    trainer = SimpleNamespace(remove_callback=handler.remove_callback, add_callback=handler.add_callback)
    progress_on_stderr(trainer)
    assert [type(cb) for cb in handler.callbacks] == [StderrProgressCallback]
