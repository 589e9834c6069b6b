"""The recipe of EffiRAG's embedded default policy (checkpoints/demo-policy): seven SFT stages of one ~5M-parameter
LFM2 model trained from scratch on the demo world (exported to checkpoints/demo-policy-sft), a cost-aware GRPO stage
(``rl_*.yaml``), plus the KAG reranker. ``run.sh`` runs it; ``stage.py`` runs one
stage; the modules here build what only this small model needs (renamed entities, known-fact rows, comparison rows
and drill). Import it with ``recipes/`` on ``sys.path`` (``stage.py`` puts it there)."""
