"""Runs the demo policy (LFM2) greedily through HF and vLLM and writes what tests/on_vllm/test_vllm_lfm2.py
compares, as JSON.

A script, run in a subprocess by the test (vllm_support.py says why): one vLLM engine start serves every prompt.

    python lfm2_driver.py MODEL_DIR OUT.json

Per prompt (the TeaRAG prompts of the shared questions, as `effirag eval qa` starts an episode, and one raw text):
vLLM's greedy ids and log-probs, HF's greedy ids (the same finishing rule), and HF's teacher-forced log-probs of
vLLM's ids. Then driver.py's 16 seeded sampled prompts of more than one scheduler step's tokens, run twice.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from driver import long_seeded
from vllm_support import QUESTIONS, teacher_logprobs


def main() -> None:
    from effirag.agent import get_protocol
    from effirag.llm.base import GenerationConfig
    from effirag.llm.hf import HFGenerator
    from effirag.llm.vllm_engine import VLLMGenerator

    model, out = Path(sys.argv[1]), Path(sys.argv[2])
    texts = [get_protocol("tearag").build_prompt(q) for q in QUESTIONS] + ["The river that flows through"]
    cfg = GenerationConfig(max_new_tokens=24, logprobs=True)
    hf = HFGenerator(model, device="cpu", dtype="float32").load()
    vllm = VLLMGenerator(model, dtype="float32", max_model_len=2048, kv_cache_gb=0.25, eager=True).load()
    prompts = [vllm.encode(t, prompt=True) for t in texts]
    rows: list[dict[str, Any]] = []
    for p, v, h in zip(prompts, vllm.generate_ids(prompts, cfg), hf.generate_ids(prompts, cfg), strict=True):
        v_ids = list(v[0].token_ids)
        rows.append(
            {
                "prompt_len": len(p),
                "vllm_ids": v_ids,
                "hf_ids": list(h[0].token_ids),
                "vllm_logprobs": list(v[0].logprobs or ()),
                "hf_logprobs": teacher_logprobs(hf.model, p, v_ids),
            }
        )
    seeded = long_seeded(vllm)
    vllm.close()
    out.write_text(json.dumps({"rows": rows, "long_seeded": seeded}))


if __name__ == "__main__":
    main()
