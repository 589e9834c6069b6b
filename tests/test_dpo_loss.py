"""The DPO loss sees policy tokens only: TRL's DPOTrainer, fed each pair's policy mask, computes L_DPO + η·L_SFT
(TeaRAG eq. 15–17) over exactly the masked-in tokens, an observation's content does not move it, and five steps on a
tiny model change its parameters."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from effirag.agent import get_protocol
from effirag.train.dpo.config import DPOTrainConfig
from effirag.train.dpo.pairs import PreferencePair, encode_text_pair, inserted_spans
from effirag.train.dpo.trainer import build_dpo_trainer
from effirag.train.sft import LoraConfig
from tiny_models import make_tiny_model

LORA = LoraConfig(enabled=True, r=4, alpha=32, dropout=0.1, target_modules=("q_proj", "v_proj"))

BETA, ETA = 0.5, 0.7


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from transformers import AutoTokenizer

    d = make_tiny_model(tmp_path_factory.mktemp("dpo_loss_tiny"), arch="qwen2", seed=3)
    return d, AutoTokenizer.from_pretrained(str(d))


def _models(d: Path) -> tuple[Any, Any]:
    """The policy, and a reference that differs from it (so that the log-ratios are not all zero)."""
    from transformers import AutoModelForCausalLM

    policy = AutoModelForCausalLM.from_pretrained(str(d))
    ref = copy.deepcopy(policy)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    return policy, ref.eval()


def _loss(d: Path, tok: Any, pairs: list[PreferencePair], tmp: Path) -> float:
    policy, ref = _models(d)
    cfg = DPOTrainConfig(beta=BETA, sft_weight=ETA, max_steps=1)
    trainer = build_dpo_trainer(cfg, policy, tok, pairs, tmp, ref_model=ref)
    batch = trainer.data_collator([p.row() for p in pairs])
    policy.eval()  # no dropout either way; the loss is a pure function of the weights and the batch
    with torch.no_grad():
        return float(trainer.compute_loss(trainer.model, batch))


def _seq_logps(model: Any, prompt: tuple[int, ...], ids: tuple[int, ...]) -> torch.Tensor:
    """log π(y_j | x, y_<j) for every completion token j (shape (len(ids),))."""
    full = torch.tensor([list(prompt + ids)])
    with torch.no_grad():
        logp = torch.log_softmax(model(full).logits[0].float(), dim=-1)  # (T, V)
    pos = torch.arange(len(prompt) - 1, len(prompt) + len(ids) - 1)
    return logp[pos, torch.tensor(ids)]


PAIRS = [
    PreferencePair((5, 6, 7), (20, 21, 90, 91, 22), (1, 1, 0, 0, 1), (30, 92, 31, 32), (1, 0, 1, 1)),
    PreferencePair((8, 9), (40, 41), (1, 1), (50, 93, 94, 51), (1, 0, 0, 1)),
]


def test_trl_loss_is_masked_dpo_plus_eta_sft_over_policy_tokens(tiny: tuple[Path, Any], tmp_path: Path) -> None:
    """Recomputed here from the models' per-token log-probs with the masks applied by hand:
    L = mean_pairs −log σ(β·[(Σ_c m·logπ − Σ_c m·logπ_ref) − (Σ_r m·logπ − Σ_r m·logπ_ref)])
        + η · mean over the chosen sides' policy tokens of −log π."""
    d, tok = tiny
    got = _loss(d, tok, PAIRS, tmp_path)
    policy, ref = _models(d)
    dpo_terms, chosen_nll = [], []
    for p in PAIRS:
        cm, rm = torch.tensor(p.chosen_mask, dtype=torch.bool), torch.tensor(p.rejected_mask, dtype=torch.bool)
        pc, pr = _seq_logps(policy, p.prompt_ids, p.chosen_ids), _seq_logps(policy, p.prompt_ids, p.rejected_ids)
        rc, rr = _seq_logps(ref, p.prompt_ids, p.chosen_ids), _seq_logps(ref, p.prompt_ids, p.rejected_ids)
        margin = (pc[cm].sum() - rc[cm].sum()) - (pr[rm].sum() - rr[rm].sum())
        dpo_terms.append(-torch.nn.functional.logsigmoid(BETA * margin))
        chosen_nll += list(-pc[cm])
    want = float(torch.stack(dpo_terms).mean() + ETA * torch.stack(chosen_nll).mean())
    assert got == pytest.approx(want, abs=1e-5)
    # The same with every token counted differs: the masked positions really are left out.
    unmasked = [PreferencePair(p.prompt_ids, p.chosen_ids, (1,) * len(p.chosen_ids), p.rejected_ids,
                               (1,) * len(p.rejected_ids)) for p in PAIRS]  # fmt: skip
    assert abs(_loss(d, tok, unmasked, tmp_path) - got) > 1e-3


def _step_pair(tok: Any, documents: str, masked: bool = True) -> PreferencePair:
    """A ReasonRAG-like step pair whose two steps end with a retrieved <documents> observation."""
    spans = inserted_spans(get_protocol("reasonrag")) if masked else []
    rec = {
        "prompt": "Question: Who directed Blue River?\n",
        "chosen": f"query: Blue River director\n<documents>\n{documents}\n</documents>\n",
        "rejected": f"query: capital of Spain\n<documents>\n{documents}\n</documents>\n",
    }
    return encode_text_pair(rec, tok, spans, {"record": "test"})


def test_changing_inserted_tokens_leaves_the_loss_unchanged(tiny: tuple[Path, Any], tmp_path: Path) -> None:
    d, tok = tiny
    a = _step_pair(tok, "Doc 1 Ana Lopez directed the film Blue River in 1999.")
    b = _step_pair(tok, "Doc 1 Madrid is the capital of Spain, on no river at all.")
    assert a.chosen_ids != b.chosen_ids and len(a.chosen_ids) != len(b.chosen_ids)
    assert a.policy_tokens == b.policy_tokens  # the policy text is the same; only the observation differs
    assert _loss(d, tok, [a], tmp_path) == pytest.approx(_loss(d, tok, [b], tmp_path), abs=1e-6)
    # Without the protocol's spans the observation is trained, and its content moves the loss (the test can fail).
    ua, ub = (
        _step_pair(tok, "Doc 1 Ana Lopez directed the film Blue River in 1999.", False),
        _step_pair(tok, "Doc 1 Madrid is the capital of Spain, on no river at all.", False),
    )
    assert abs(_loss(d, tok, [ua], tmp_path) - _loss(d, tok, [ub], tmp_path)) > 1e-3


def test_five_dpo_steps_change_the_parameters(tiny: tuple[Path, Any], tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from effirag.train.outputs import save_policy

    d, tok = tiny
    model = AutoModelForCausalLM.from_pretrained(str(d))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = DPOTrainConfig(beta=0.5, sft_weight=0.5, learning_rate=1e-3, max_steps=5, batch_size=1)
    trainer = build_dpo_trainer(cfg, model, tok, PAIRS, tmp_path / "run")
    trainer.train()
    assert trainer.state.global_step == 5
    after = save_policy(trainer.accelerator.unwrap_model(trainer.model), tok, tmp_path / "policy")
    trained = AutoModelForCausalLM.from_pretrained(str(after)).state_dict()
    unchanged = [k for k in before if torch.equal(before[k], trained[k])]
    assert unchanged == []
    logs = [r for r in trainer.state.log_history if "loss" in r]
    assert len(logs) == 5 and all("rewards/margins" in r for r in logs)


def test_pairs_file_lines_are_checked(tiny: tuple[Path, Any], tmp_path: Path) -> None:
    from effirag.errors import DataError
    from effirag.train.dpo.pairs import load_text_pairs

    _, tok = tiny
    f = tmp_path / "pairs.jsonl"
    good = {"prompt": "Q?\n", "chosen": "a", "rejected": "b", "stage": "query", "chosen_value": 0.9}
    f.write_text(json.dumps(good) + "\n" + json.dumps({"prompt": "Q?\n", "chosen": "a"}) + "\n")
    with pytest.raises(DataError, match=r"line 2.*'rejected'"):
        load_text_pairs(f, tok, get_protocol("reasonrag"))
    f.write_text(json.dumps({**good, "chosen": "<documents>\nonly inserted\n</documents>\n"}) + "\n")
    with pytest.raises(DataError, match=r"line 1.*'chosen'.*no policy text"):
        load_text_pairs(f, tok, get_protocol("reasonrag"))
    f.write_text(json.dumps({**good, "chosen": [["a step ", True], ["<obs>", False]]}) + "\n")
    [pair] = load_text_pairs(f, tok, get_protocol("reasonrag"))
    assert pair.chosen_mask == (1,) * len(tok.encode("a step ")) + (0,) * len(tok.encode("<obs>"))
    assert pair.meta == {"stage": "query", "chosen_value": 0.9}


def test_lora_trains_an_adapter_and_saves_it_merged(tiny: tuple[Path, Any], tmp_path: Path) -> None:
    """With LoRA the base weights stay frozen during training (the reference is the base with the adapter
    off) and the saved policy is a plain model: the adapter merged into the attention projections it wraps."""
    from transformers import AutoModelForCausalLM

    from effirag.train.outputs import save_policy

    d, tok = tiny
    model = AutoModelForCausalLM.from_pretrained(str(d))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = DPOTrainConfig(learning_rate=1e-2, max_steps=2, batch_size=2, lora=LORA)
    trainer = build_dpo_trainer(cfg, model, tok, PAIRS, tmp_path / "run")
    trainer.train()
    merged = AutoModelForCausalLM.from_pretrained(
        str(save_policy(trainer.accelerator.unwrap_model(trainer.model), tok, tmp_path / "policy"))
    ).state_dict()
    assert merged.keys() == before.keys()  # no adapter tensors left
    changed = sorted(k for k in before if not torch.equal(before[k], merged[k]))
    assert changed and all(k.endswith(("q_proj.weight", "v_proj.weight")) for k in changed)
