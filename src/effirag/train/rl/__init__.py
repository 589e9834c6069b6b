"""Reinforcement learning of the agent: on-policy multi-turn rollouts from EffiRAG's engine, trained with TRL's
GRPOTrainer.

- :mod:`~effirag.train.rl.rollout` — TRL's ``rollout_func`` over the engine's token path (ids, env_mask, logprobs);
- :mod:`~effirag.train.rl.grpo` — the run config and the trainer (how the cost-aware advantage reaches the update);
- :mod:`~effirag.train.rl.log` — the per-step JSONL log;
- :mod:`~effirag.train.rl.run` — a run from its config (load, train, checkpoints, resume, final policy).
"""
