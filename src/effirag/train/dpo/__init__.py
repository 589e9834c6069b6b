"""Preference learning of the agent: DPO with the policy's own tokens only (inserted observations masked).

- :mod:`~effirag.train.dpo.config` — the typed configs of a step-level DPO run and of a TeaRAG IP-DPO run;
- :mod:`~effirag.train.dpo.pairs` — preference pairs as token ids + policy masks: from engine samples, or from a
  RAG-ProGuide-shaped JSONL of text pairs cut by the protocol's inserted spans;
- :mod:`~effirag.train.dpo.trainer` — TRL's DPOTrainer fed those masks (sigmoid DPO + η·SFT on the chosen side);
- :mod:`~effirag.train.dpo.scoring` — one IP-DPO round's scores (format, outcome, process) and pairs;
- :mod:`~effirag.train.dpo.ipdpo` — the iterative loop (sample → score → pair → train, round after round);
- :mod:`~effirag.train.dpo.step` — step-level DPO on a pairs file.
"""
