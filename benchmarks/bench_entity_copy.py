"""Does the policy shape learn to write the question's entity in TeaRAG's first step, and how fast?

Why: the embedded policy's failure is copying names (BENCHMARKS.md, "Embedded default policy"). This probe isolates
the first trained segment of TeaRAG's SFT data, ``<entities> X </entities>\\n<subquery> … </subquery>`` after the
protocol prompt with the question, trains a fresh model of the demo shape on it (plain AdamW, constant learning rate,
right padding, loss on the trained segment only) and every ``--every`` steps greedily decodes held-out *test*
questions, reporting the share whose ``<entities>`` line equals the gold one exactly (the entity must be copied from
the question: test entities are not in the training rows' targets in the same role). Arms:

    .venv/bin/python benchmarks/bench_entity_copy.py --tokenizer runs/demo-policy-lfm2-bpe/tokenizer   # BPE names
    .venv/bin/python benchmarks/bench_entity_copy.py --tokenizer runs/demo-policy/tokenizer            # entity tokens
    .venv/bin/python benchmarks/bench_entity_copy.py --tokenizer runs/demo-policy/tokenizer --shared-init 1.0

``--shared-init s`` adds one shared random direction (norm ``s`` times an embedding row's) to every entity token's
initial embedding: a feature "this is a name" an attention head can select on from step 0, where otherwise each of
~2,200 rare rows must learn it from its own few occurrences. ``--emb-std``, ``--final-norm`` and ``--copy-init`` set
``ModelConfig``'s copy-ready initialisation (the first arm that copied, BENCHMARKS.md):

    .venv/bin/python benchmarks/bench_entity_copy.py --tokenizer checkpoints/demo-policy --fact-paths \
        --conv-layers 1,3 --heads 4 --kv-heads 4 --emb-std 1.0 --final-norm 0.0625 --copy-init 1.0

Every evaluation also prints the mean residual norm after each block (does the embedding, token identity, still
count against what the blocks write?) and splits the score: the decision (search first, or answer at once) and, among
questions whose gold first step searches, the exact copies, and scores whole test trajectories teacher-forced: the
share of entity tokens predicted right in each block (entities, subquery, summary, final answer), and the stop
decision after each summary (``next=search``: the gold opens another step; ``next=final``: it answers). ``--rows full``
trains on whole TeaRAG trajectories instead of first steps. ``--knowledge qa|text|both`` mixes the known facts' rows of
the full recipe into the training pool. ``--save DIR`` writes the trained model and tokenizer: a copy-first start for
the full recipe (``model: DIR`` in its config; BENCHMARKS.md, "Where the copy-ready start is lost in the full
mixture").
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import replace
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=Path, default=Path("runs/world-demo-seed0"))
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("--shared-init", type=float, default=0.0)
    ap.add_argument("--arch", choices=("lfm2", "qwen2"), default="lfm2", help="fresh model: the demo shape's family")
    ap.add_argument("--heads", type=int, default=8, help="attention heads (head size = 256 / heads)")
    ap.add_argument("--kv-heads", type=int, default=2, help="key/value heads")
    ap.add_argument("--emb-std", type=float, default=0.0, help="fresh model: ModelConfig.embedding_init_std")
    ap.add_argument("--final-norm", type=float, default=0.0, help="fresh model: ModelConfig.final_norm_init")
    ap.add_argument("--conv-layers", default="0,2", help="lfm2: comma-separated convolution block indices")
    ap.add_argument("--copy-init", type=float, default=0.0, help="fresh model: ModelConfig.copy_init")
    ap.add_argument("--induction-init", type=float, default=0.0, help="fresh model: ModelConfig.induction_init")
    ap.add_argument("--fact-paths", action="store_true", help="also train on every unknown non-test world fact")
    ap.add_argument(
        "--knowledge",
        choices=("none", "qa", "text", "both"),
        default="none",
        help="also train on the known facts: zero-shot questions, LM text, or both (the full mix's rows)",
    )
    ap.add_argument(
        "--rows",
        choices=("first", "full"),
        default="first",
        help="train on TeaRAG's first step only, or on whole trajectories (summaries and final answers too)",
    )
    ap.add_argument(
        "--rename",
        type=float,
        default=0.0,
        help="--rows full, train rows only: SFTDataConfig.rename_rate (swap entity names)",
    )
    ap.add_argument("--knowledge-repeats", type=int, default=4, help="copies of each known fact with --knowledge")
    ap.add_argument("--init", type=Path, default=None, help="continue from this checkpoint instead of a fresh model")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--every", type=int, default=200)
    ap.add_argument("--eval-split", choices=("test", "train"), default="test", help="questions scored")
    ap.add_argument("--eval", type=int, default=60, help="held-out test questions decoded per evaluation")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--show", type=int, default=2, help="print gold and output for this many questions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", type=Path, default=None, help="save the trained model + tokenizer here (HF folder)")
    args = ap.parse_args()

    import torch
    from transformers import AutoTokenizer

    from effirag.train.gold_paths import world_fact_paths, world_paths
    from effirag.train.masking import encode_segments
    from effirag.train.model import ModelConfig, build_model
    from effirag.train.pipeline import entity_pool
    from effirag.train.sft_data import SFTDataBuilder, SFTDataConfig, tokenize_examples
    from effirag.train.tokenizer import protocol_tags

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    tok = AutoTokenizer.from_pretrained(str(args.tokenizer))
    tags = set(protocol_tags())
    entity_ids = sorted(
        i for t, i in tok.get_added_vocab().items() if t not in tags and t not in (tok.eos_token, tok.pad_token)
    )
    entity_set = set(entity_ids)

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False))

    cfg = SFTDataConfig(protocols=("tearag",), redundant_step_rate=0.0, single_hop_rate=0.5, k=3,
                        max_inserted_tokens=160, seed=args.seed)  # fmt: skip

    def first_steps(split: str) -> list[tuple[list[int], list[int], str, str]]:
        paths, passages, triplets = world_paths(args.world, split)
        if split == "train" and args.fact_paths:
            paths += world_fact_paths(args.world)
        out = []
        for ex in SFTDataBuilder(passages, triplets, count, cfg).build(paths):
            prompt, target = ex.pairs[0][0], ex.pairs[0][1]
            ids, labels = encode_segments([prompt, target], tok, eos_id=None)
            out.append((ids, labels, prompt.text, target.text.split("\n")[0]))
        return out

    def full_rows(split: str, rename: float = 0.0) -> list[tuple[list[int], list[int], str, str]]:
        paths, passages, triplets = world_paths(args.world, split)
        if split == "train" and args.fact_paths:
            paths += world_fact_paths(args.world)
        pool = entity_pool(args.world) if rename else None
        builder = SFTDataBuilder(passages, triplets, count, replace(cfg, rename_rate=rename), pool)
        rows = tokenize_examples(builder.build(paths), tok, 768)
        return [(r["input_ids"], r["labels"], "", "") for r in rows]

    train = first_steps("train") if args.rows == "first" else full_rows("train", args.rename)
    if args.knowledge != "none":
        from effirag.train.knowledge import knowledge_examples, load_known_facts

        keep = {"qa": ("zeroshot",), "text": ("knowledge",), "both": ("zeroshot", "knowledge")}[args.knowledge]
        facts = load_known_facts(args.world / "knowledge.jsonl")
        kex = [e for e in knowledge_examples(facts, args.knowledge_repeats, seed=args.seed) if e.protocol in keep]
        train += [(r["input_ids"], r["labels"], "", "") for r in tokenize_examples(kex, tok, 768)]
    test = first_steps("test") if args.eval_split == "test" else first_steps("train")
    test = rng.sample(test, min(args.eval, len(test)))
    whole = full_rows(args.eval_split)  # whole trajectories, scored teacher-forced
    whole = rng.sample(whole, min(args.eval, len(whole)))
    conv = tuple(int(i) for i in args.conv_layers.split(",") if i) if args.arch == "lfm2" else ()
    shape = ModelConfig(architecture=args.arch, conv_layers=conv, conv_kernel=3, hidden_size=256,
                        intermediate_size=768, num_layers=4, num_heads=args.heads, num_kv_heads=args.kv_heads,
                        embedding_init_std=args.emb_std, final_norm_init=args.final_norm, copy_init=args.copy_init,
                        induction_init=args.induction_init,
                        seed=args.seed)  # fmt: skip
    if args.init is not None:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(args.init))
    else:
        model = build_model(shape, tok)
    if args.shared_init and entity_ids:
        emb = model.get_input_embeddings().weight  # (vocab, hidden)
        with torch.no_grad():
            d = torch.randn(emb.shape[1], generator=torch.Generator().manual_seed(args.seed + 1))
            row_norm = emb.norm(dim=1).mean()
            emb[entity_ids] += args.shared_init * row_norm * d / d.norm()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    pad = tok.pad_token_id
    print(f"tokenizer {args.tokenizer} ({len(tok)} tokens, {len(entity_ids)} entity tokens), shared-init "
          f"{args.shared_init}; {len(train)} train rows, {len(test)} test questions")  # fmt: skip

    blocks = {tok.convert_tokens_to_ids(t): t.strip("<>") for t in ("<entities>", "<subquery>", "<summary>")}

    def block_accuracy(rows: list[tuple[list[int], list[int], str, str]]) -> str:
        """Share of trained entity tokens predicted right (teacher-forced), by the block they stand in: names copied
        from the question (entities, subquery), from the reference (summary), from the summary (final answer)."""
        hits: dict[str, list[int]] = {}
        for ids, labels, _, _ in rows:
            pred = model(torch.tensor([ids])).logits[0].argmax(-1).tolist()  # (T,)
            block, line, seen = "?", "", ""
            for p, (i, y) in enumerate(zip(ids, labels, strict=True)):
                # The stop decision: the first token after a summary opens the next step or the final answer.
                if y != -100 and p > 0 and seen.rstrip(" ").endswith("</summary>\n"):
                    b = "next=" + ("final" if tok.decode([y]).strip().startswith("Final") else "search")
                    h = hits.setdefault(b, [0, 0])
                    h[0] += pred[p - 1] == y
                    h[1] += 1
                piece = tok.decode([i])
                seen = (seen + piece)[-40:]
                line = piece.rsplit("\n", 1)[-1] if "\n" in piece else line + piece
                block = blocks.get(i, block)
                if y != -100 and y in entity_set and p > 0:
                    b = "final" if line.lstrip().startswith("Final answer") else block
                    h = hits.setdefault(b, [0, 0])
                    h[0] += pred[p - 1] == y
                    h[1] += 1
        return ", ".join(f"{b} {h}/{n}" for b, (h, n) in sorted(hits.items()))

    def evaluate() -> float:
        model.eval()
        hits = 0
        # Split the score: the decision (search first, or answer at once) and, where gold searches, the copy itself.
        decided, searches, copied = 0, 0, 0
        with torch.no_grad():
            for j, (ids, labels, _, gold) in enumerate(test):
                n_prompt = next(i for i, x in enumerate(labels) if x != -100)
                x = torch.tensor([ids[:n_prompt]])
                out = model.generate(x, max_new_tokens=20, do_sample=False, pad_token_id=pad)
                text = tok.decode(out[0, n_prompt:], skip_special_tokens=True)
                exact = text.split("\n")[0].strip() == gold.strip()
                hits += exact
                gold_direct = gold.strip().startswith("Final answer")
                decided += text.strip().startswith("Final answer") == gold_direct
                searches += not gold_direct
                copied += exact and not gold_direct
                if j < args.show:  # a glimpse of what it writes
                    print(f"    gold {gold.strip()!r}  got {text.split(chr(10))[0].strip()!r}")
            # Residual norms: does token identity (the embedding) survive against what the blocks write?
            hs = model(torch.tensor([test[0][0]]), output_hidden_states=True).hidden_states  # (1, T, H) each
            print(f"    decision (search vs answer at once) right {decided}/{len(test)}; "
                  f"gold searches {searches}, exact among them {copied}")  # fmt: skip
            print("    teacher-forced entity tokens right, by block: " + block_accuracy(whole))
            print("    residual norm by depth " + " ".join(f"{h[0].norm(dim=-1).mean():.1f}" for h in hs))
        model.train()
        return hits / len(test)

    t0 = time.perf_counter()
    losses: list[float] = []
    for step in range(1, args.steps + 1):
        batch = rng.sample(train, args.batch)
        width = max(len(b[0]) for b in batch)
        x = torch.full((len(batch), width), pad)  # (B, T)
        y = torch.full((len(batch), width), -100)  # (B, T)
        att = torch.zeros((len(batch), width), dtype=torch.long)
        for r, (ids, labels, _, _) in enumerate(batch):
            x[r, : len(ids)] = torch.tensor(ids)
            y[r, : len(ids)] = torch.tensor(labels)
            att[r, : len(ids)] = 1
        loss = model(input_ids=x, attention_mask=att, labels=y).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % args.every == 0:
            acc = evaluate()
            print(f"step {step:5d}  loss {sum(losses[-args.every:]) / args.every:.3f}  "
                  f"entities exact {acc:.1%}  {time.perf_counter() - t0:.0f}s", flush=True)  # fmt: skip

    if args.save is not None:  # a copy-first start for the full SFT recipe (`model:` in its config)
        model.save_pretrained(str(args.save))
        tok.save_pretrained(str(args.save))
    if args.steps == 0:  # score a checkpoint as it is (with --init)
        print(f"step 0  entities exact {evaluate():.1%}", flush=True)


if __name__ == "__main__":
    main()
