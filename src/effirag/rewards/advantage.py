"""Group standardisation (GRPO): each value standardised within its group of samples for one prompt.

RouteRAG eq. 8 (after DeepSeekMath's GRPO): Â_i = (r_i − mean(r)) / std(r) over the G samples of one question.

We use the *population* standard deviation (ddof = 0), as the issue and RouteRAG's formula state. TRL's
``GRPOTrainer`` uses ``torch.std`` with its default Bessel correction (ddof = 1), so its advantages are smaller by a
factor √((G − 1)/G) for a group of G samples (e.g. √(3/4) ≈ 0.866 for G = 4); the ranking of samples is the same.

A group whose rewards are all equal carries no learning signal: every member gets advantage 0. Equality is tested with a
tolerance (``STD_EPS``), because three equal floats can have a computed std of ~1e-16, and dividing by it would blow a
rounding error up to ±1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

STD_EPS = 1e-9
"""A group whose population std is below this is treated as all-equal (every advantage 0)."""


def _as_group(values: Sequence[float] | npt.NDArray[np.floating], name: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one group (1-D), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name}[{bad}] = {arr[bad]!r} is not finite")
    return arr


def zscore(values: Sequence[float] | npt.NDArray[np.floating], *, name: str = "values") -> npt.NDArray[np.float64]:
    """(x − mean) / std within one group, population std (ddof = 0); all zeros when std < ``STD_EPS``.

    An empty group gives an empty array; a group of one has std 0 and so gives ``[0.0]``.
    """
    arr = _as_group(values, name)
    if arr.size == 0:
        return arr
    std = float(arr.std())  # ddof = 0
    if std < STD_EPS:
        return np.zeros_like(arr)
    return (arr - arr.mean()) / std
