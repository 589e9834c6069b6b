"""Reinforcement learning of the agent: on-policy multi-turn rollouts from EffiRAG's engine, trained with TRL's
GRPOTrainer or with EffiRAG's own PPO.

- :mod:`~effirag.train.rl.rollout` — TRL's ``rollout_func`` over the engine's token path (ids, env_mask, logprobs);
- :mod:`~effirag.train.rl.grpo` — the run config and the trainer (how the cost-aware advantage reaches the update);
- :mod:`~effirag.train.rl.log` — the per-step JSONL log;
- :mod:`~effirag.train.rl.run` — a GRPO run from its config (load, train, checkpoints, resume, stages, final policy);
- :mod:`~effirag.train.rl.ppo_config`, :mod:`~effirag.train.rl.ppo_batch`, :mod:`~effirag.train.rl.ppo_trainer`,
  :mod:`~effirag.train.rl.ppo_checkpoint`, :mod:`~effirag.train.rl.ppo_run` — PPO: its config, the batch tensors and
  losses, the step (rollout, advantages, update), checkpoints, and a run from its config.
"""
