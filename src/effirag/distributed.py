"""Ray, the optional extra that spreads work over actors (``eval qa --ray N``, the RL trainers' rollouts).

Ray is imported only here and only when a run asks for actors, so EffiRAG works without it; a run that asks for it
without it installed fails at once with :data:`INSTALL_HINT`.
"""

from __future__ import annotations

from typing import Any

from effirag.errors import ConfigError

INSTALL_HINT = "Ray is not installed: install EffiRAG's distributed extra (pip install 'ray>=2.9')"


def import_ray(where: str = "eval qa", field: str = "ray") -> Any:
    """The ``ray`` module, or a :class:`ConfigError` naming ``where``/``field`` and saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise ConfigError(where, field, "not installed", INSTALL_HINT) from e
    return ray


def join_or_start(ray: Any, address: str | None, num_cpus: float) -> bool:
    """Join the Ray instance this process already started, else the cluster at ``address`` (``"auto"``: the one
    ``ray start`` runs here), else start a local one with ``num_cpus`` CPUs (at least 1). True when this call
    started or joined it, so the caller shuts it down when done; False when it was already running."""
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(num_cpus=max(1, round(num_cpus)), include_dashboard=False, log_to_driver=False)
    return True
