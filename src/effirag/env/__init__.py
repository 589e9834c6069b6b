"""The environment of a run, one section for every trainer and command: :class:`EnvConfig` (the ``env:`` of a run
config) and :func:`build_env` (questions, protocol, retriever, judge, policy generator)."""

from effirag.env.build import Env, build_env, make_judge, make_retriever, policy_and_retriever
from effirag.env.config import EnvConfig, SettingsUsed, load_run_config, with_settings

__all__ = [
    "Env",
    "EnvConfig",
    "SettingsUsed",
    "build_env",
    "load_run_config",
    "make_judge",
    "make_retriever",
    "policy_and_retriever",
    "with_settings",
]
