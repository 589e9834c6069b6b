"""The RL rollout's generator choice (``rollout.generator``) and the vLLM mismatch formulas, without vLLM: config
checks naming the field, the log-prob gap and truncated IS weights by hand, PPO's weighted surrogate, the behaviour
log-probs' alignment in PPO's batch, and the weights a LoRA policy syncs (adapters merged, the trainer untouched).
vLLM itself runs in tests/on_vllm/test_vllm_rl.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from effirag.errors import BackendError, ConfigError
from effirag.train.ppo import ppo_policy_loss
from effirag.train.rl.ppo_batch import pad_samples
from effirag.train.rl.rollout_split import RolloutConfig
from effirag.train.rl.vllm_sync import (
    VLLMSync,
    episode_context,
    logprob_gap,
    policy_weights,
    rollout_generator,
    tis_weights,
)
from effirag.train.samples import EpisodeSample
from tiny_models import make_tiny_model


def test_generator_field_is_checked_and_the_server_is_refused_by_name() -> None:
    assert RolloutConfig().generator == "hf" and RolloutConfig(generator="vllm", tis_cap=2.0).tis_cap == 2.0
    with pytest.raises(ConfigError, match=r"RolloutConfig.generator='sglang'"):
        RolloutConfig(generator="sglang")
    with pytest.raises(ConfigError, match=r"generator='vllm-server:http://h:8000'.*not implemented"):
        RolloutConfig(generator="vllm-server:http://h:8000")
    with pytest.raises(ConfigError, match=r"generator='vllm'.*ray_actors"):
        RolloutConfig(generator="vllm", ray_actors=2)
    with pytest.raises(ConfigError, match=r"tis_cap=2.0.*generator: vllm"):
        RolloutConfig(tis_cap=2.0)
    with pytest.raises(ConfigError, match=r"tis_cap=-1.0"):
        RolloutConfig(generator="vllm", tis_cap=-1.0)


def test_vllm_rollout_generator_starts_on_the_env_model_for_grpo_and_ppo() -> None:
    """``generator: vllm`` builds the sync for the run's policy folder (``env.model``) with the rollout's KV cache and
    the run's seed; vLLM itself starts only on the first sync (not here)."""
    from effirag.env import EnvConfig
    from effirag.train.rl.grpo import GRPORunConfig
    from effirag.train.rl.ppo_config import PPORunConfig

    env, rollout = EnvConfig(model="models/policy"), RolloutConfig(generator="vllm", vllm_kv_cache_gb=0.5)
    for cfg in (GRPORunConfig(env=env, rollout=rollout, seed=3), PPORunConfig(env=env, rollout=rollout, seed=3)):
        sync = rollout_generator(cfg, tokenizer=None)
        assert isinstance(sync, VLLMSync) and sync.generator is None
        assert (sync.model_dir, sync.kv_cache_gb, sync.seed) == ("models/policy", 0.5, 3)
        assert sync.context == episode_context(env.engine)


def test_rollout_engine_context_is_the_episode_budget_capped_by_the_model(tmp_path: Path) -> None:
    """The Gemma recipe's budgets (1536 total tokens, 3 turns of 64 new tokens): 1536 + 3 × 64 = 1728 tokens; the
    engine gets the smaller of that and the model's own context (a multimodal config declares it in
    ``text_config``), and the model's whole context when the sync is given none."""
    from effirag.agent.config import EngineConfig

    assert episode_context(EngineConfig(max_steps=3, max_new_tokens=64, max_total_tokens=1536)) == 1728
    assert episode_context(EngineConfig(max_steps=8, max_new_tokens=256, max_total_tokens=4096)) == 6144
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"max_position_embeddings": 32768}}))
    assert VLLMSync(str(tmp_path), context=1728)._max_model_len() == 1728
    assert VLLMSync(str(tmp_path), context=40000)._max_model_len() == 32768
    assert VLLMSync(str(tmp_path))._max_model_len() is None
    with pytest.raises(BackendError, match=r"vllm:.*missing.*config.json"):
        VLLMSync(str(tmp_path / "missing"), context=1728)._max_model_len()


def test_logprob_gap_and_tis_weights_by_hand() -> None:
    """Trainer [−1, −2, −0.5], sampler [−1.1, −1, −0.5], mask [1, 0, 1]: |Δ| at policy tokens 0.1 and 0 → mean 0.05,
    max 0.1 (the 1.0 at the masked column is ignored). Ratios exp(0.1) = 1.10517 and 1; cap 1.05 truncates the first;
    the masked column gets 0."""
    trainer = torch.tensor([[-1.0, -2.0, -0.5]])
    sampler = torch.tensor([[-1.1, -1.0, -0.5]])
    mask = torch.tensor([[1.0, 0.0, 1.0]])
    mean, top = logprob_gap(trainer, sampler, mask)
    assert mean == pytest.approx(0.05, abs=1e-6) and top == pytest.approx(0.1, abs=1e-6)
    assert logprob_gap(trainer, sampler, torch.zeros(1, 3)) == (0.0, 0.0)
    assert tis_weights(trainer, sampler, mask, 2.0).tolist()[0] == pytest.approx([math.exp(0.1), 0.0, 1.0])
    assert tis_weights(trainer, sampler, mask, 1.05).tolist()[0] == pytest.approx([1.05, 0.0, 1.0])


def test_ppo_surrogate_weights_scale_each_tokens_term() -> None:
    """ρ = 1 (new = old), A = [1, −2], mask [1, 1]: terms −A = [−1, 2], mean 0.5. Weights [0.5, 2]: [−0.5, 4], mean
    1.75; all-ones weights give the unweighted loss exactly."""
    new, old = torch.zeros(1, 2), torch.zeros(1, 2)
    adv, mask = torch.tensor([[1.0, -2.0]]), torch.ones(1, 2)
    assert float(ppo_policy_loss(new, old, adv, mask, 0.2)) == pytest.approx(0.5)
    assert float(ppo_policy_loss(new, old, adv, mask, 0.2, torch.tensor([[0.5, 2.0]]))) == pytest.approx(1.75)
    assert float(ppo_policy_loss(new, old, adv, mask, 0.2, torch.ones(1, 2))) == float(
        ppo_policy_loss(new, old, adv, mask, 0.2)
    )


def test_behaviour_logprobs_align_with_the_scored_columns() -> None:
    """Prompt [5, 6], completion [7, 8, 9] with 8 inserted and behaviour log-probs [−0.1, 0, −0.3]: column j scores
    token j + 1, so the behaviour row is [0, −0.1, 0, −0.3]; a batch with a sample without log-probs has none."""
    s = EpisodeSample("q", 0, (5, 6), (7, 8, 9), (1, 0, 1), (-0.1, 0.0, -0.3))
    b = pad_samples([s], pad_id=0)
    assert b.need("behaviour_logp").tolist() == [pytest.approx([0.0, -0.1, 0.0, -0.3])]
    assert b.mask.tolist() == [[0.0, 1.0, 0.0, 1.0]]
    no_lp = EpisodeSample("q", 1, (5,), (7,), (1,), None)
    assert pad_samples([s, no_lp], pad_id=0).behaviour_logp is None


def test_lora_policy_syncs_merged_weights_and_stays_untouched(tmp_path: Path) -> None:
    """The synced weights of a LoRA policy are peft's merged model's, under the plain model's names, and reading
    them leaves the trainer's adapters and base weights bit for bit."""
    from transformers import AutoModelForCausalLM

    from effirag.train.rl.ppo_lora import lora_policy
    from effirag.train.sft import LoraConfig

    folder = make_tiny_model(tmp_path / "m", seed=2)
    policy = lora_policy(LoraConfig(enabled=True, r=4, dropout=0.0), AutoModelForCausalLM.from_pretrained(folder), 1)
    with torch.no_grad():  # trained adapters: B is zero at init, which would make the merge trivial
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(len(name))) * 0.1)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    synced = dict(policy_weights(policy))
    assert all(bool((v == before[k]).all()) for k, v in policy.state_dict().items())
    plain = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    assert synced.keys() == plain.keys()
    import copy

    merged = copy.deepcopy(policy).merge_and_unload().state_dict()
    assert max(float((synced[k] - merged[k]).abs().max()) for k in plain) < 1e-6
    assert any(not torch.equal(synced[k], plain[k]) for k in plain)  # the adapters changed the synced weights
