"""Reinforcement learning of the agent: on-policy multi-turn rollouts from EffiRAG's engine, trained with TRL's
GRPOTrainer (:mod:`~effirag.train.rl.rollout`, :mod:`~effirag.train.rl.grpo`, :mod:`~effirag.train.rl.log`)."""
