"""Runs one model through HF and vLLM and writes what tests/on_vllm/test_vllm_backend.py compares, as JSON.

A script, run in a subprocess by the tests: vLLM's engine is created under ``if __name__ == "__main__":`` (its
worker processes, when it spawns any, re-import the main module), and one engine start serves every check.

    python driver.py MODEL_DIR OUT.json

Records: (1) every listed protocol's greedy trajectories through the rollout engine on both backends (text path),
and the token path's segments (ids and behaviour log-probs); (2) token-level requests of mixed settings (greedy with
stop strings, sampled with a seed) on vLLM, with HF's log-probs of the very completion ids vLLM returned, from one
teacher-forced forward pass.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from vllm_support import QUESTIONS, teacher_logprobs

PROTOCOLS = ("searchr1", "tearag")


def _summary(ts: list[Any]) -> list[Any]:
    return [
        [
            t.question_id,
            t.sample_index,
            t.prediction,
            t.format_ok,
            t.prompt,
            t.end,
            [[s.action.value, s.generated_tokens, s.query] for s in t.steps],
        ]
        for t in ts
    ]


def _segments(ts: list[Any]) -> list[Any]:
    return [
        [[s.kind.value, list(s.ids), None if s.logprobs is None else list(s.logprobs)] for s in t.tokens] for t in ts
    ]


def _engine(gen: Any, cfg: Any) -> dict[str, Any]:
    from dataclasses import replace

    from effirag.agent import get_protocol, run_episodes
    from test_engine_support import LexicalRetriever

    out: dict[str, Any] = {}
    for name in PROTOCOLS:
        proto = get_protocol(name)
        out[name] = _summary(run_episodes(gen, LexicalRetriever(), proto, QUESTIONS, cfg))
    tokens = run_episodes(gen, LexicalRetriever(), get_protocol("searchr1"), QUESTIONS, replace(cfg, token_ids=True))
    out["token_segments"] = _segments(tokens)
    return out


def _token_level(vllm: Any, hf: Any) -> list[dict[str, Any]]:
    from effirag.llm.base import GenerationConfig
    from effirag.llm.tokens import TokenRequest

    # Stop strings the tiny model's greedy text reaches (" info", "re"), so stopping is compared too.
    greedy = GenerationConfig(max_new_tokens=24, stop=("</answer>", " info", "re"), logprobs=True)
    sampled = GenerationConfig(max_new_tokens=24, temperature=1.0, top_p=0.9, n=2, seed=7, logprobs=True)
    prompts = [vllm.encode(q, prompt=True) for q in [*QUESTIONS, "<think> The film"]]
    requests = [TokenRequest(tuple(p), cfg) for p in prompts for cfg in (greedy, sampled)]
    rows: list[dict[str, Any]] = []
    for r, completions in zip(requests, vllm.generate_tokens(requests), strict=True):
        hf_greedy = hf.generate_ids([list(r.prompt_ids)], r.config)[0][0] if r.config.temperature == 0 else None
        for c in completions:
            rows.append(
                {
                    "sampled": r.config.temperature > 0,
                    "n": r.config.n,
                    "count": len(completions),
                    "ids": list(c.token_ids),
                    "text": c.text,
                    "finish_reason": c.finish_reason,
                    "stop_string": c.stop_string,
                    "decoded": vllm._decode(c.token_ids),
                    "vllm_logprobs": list(c.logprobs or ()),
                    "hf_logprobs": teacher_logprobs(hf.model, list(r.prompt_ids), list(c.token_ids)),
                    "hf_greedy_ids": None if hf_greedy is None else list(hf_greedy.token_ids),
                    "hf_greedy_text": None if hf_greedy is None else hf_greedy.text,
                }
            )
    return rows


def long_seeded(vllm: Any) -> dict[str, Any]:
    """16 seeded sampled requests whose prompts (about 400 tokens each) exceed one scheduler step's token budget
    together, as an RL group's rollouts do, run twice."""
    from effirag.llm.base import GenerationConfig
    from effirag.llm.tokens import TokenRequest

    sampled = GenerationConfig(max_new_tokens=8, temperature=1.0, seed=11)
    prompts = [vllm.encode(f"{i} " + "the film was directed by " * 80, prompt=True) for i in range(16)]
    requests = [TokenRequest(tuple(p), sampled) for p in prompts]
    runs = [[[list(c.token_ids) for c in cs] for cs in vllm.generate_tokens(requests)] for _ in range(2)]
    return {"prompt_tokens": sum(len(p) for p in prompts), "runs": runs}


def main() -> None:
    from effirag.agent import EngineConfig
    from effirag.llm.hf import HFGenerator
    from effirag.llm.vllm_engine import VLLMGenerator

    model, out = Path(sys.argv[1]), Path(sys.argv[2])
    cfg = EngineConfig(max_steps=3, max_new_tokens=12, max_total_tokens=1024, max_inserted_tokens=64, k=2, n=1)
    hf = HFGenerator(model, device="cpu", dtype="float32").load()
    t0 = time.perf_counter()
    vllm = VLLMGenerator(model, dtype="float32", max_model_len=2048, kv_cache_gb=0.25, eager=True).load()
    result: dict[str, Any] = {"vllm_start_s": time.perf_counter() - t0}
    t0 = time.perf_counter()
    result["hf"] = _engine(hf, cfg)
    result["vllm"] = _engine(vllm, cfg)
    result["token_level"] = _token_level(vllm, hf)
    result["long_seeded"] = long_seeded(vllm)
    vllm.close()
    result["checks_s"] = time.perf_counter() - t0
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
