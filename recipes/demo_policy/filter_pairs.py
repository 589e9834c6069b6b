"""Filter the step pairs of an existing MCTS pairs file as ``effirag data mcts`` does while mining, for pairs mined
without the rule: ``--distinct-content`` (``search.distinct_content``) drops pairs whose two steps say the same thing
in other words, as the protocol reads them; ``--same-action`` (``search.same_action``) keeps pairs of one action.

    python recipes/demo_policy/filter_pairs.py reasonrag runs/prl/mcts/pairs.jsonl runs/prl/pairs-kept.jsonl \\
        --distinct-content --same-action
"""

from __future__ import annotations

import argparse
import json

from effirag.agent import get_protocol
from effirag.data.io import iter_jsonl, write_jsonl
from effirag.train.mcts import MCTSConfig
from effirag.train.mcts.pairs import keep_pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("protocol", help="the protocol the pairs were mined in (reads each step's content)")
    ap.add_argument("pairs", help="pairs.jsonl of `effirag data mcts`")
    ap.add_argument("out", help="where the kept pairs go (JSONL)")
    ap.add_argument("--distinct-content", action="store_true", help="drop pairs of two phrasings of one content")
    ap.add_argument("--same-action", action="store_true", help="keep only pairs of two steps of the same action")
    args = ap.parse_args()
    if not (args.distinct_content or args.same_action):
        ap.error("give --distinct-content, --same-action or both")
    records = [r for _, r in iter_jsonl(args.pairs)]
    rules = MCTSConfig(distinct_content=args.distinct_content, same_action=args.same_action)
    kept, _ = keep_pairs(records, rules, get_protocol(args.protocol))
    write_jsonl(args.out, kept)
    print(json.dumps({"pairs": len(records), "kept": len(kept), "out": args.out}))


if __name__ == "__main__":
    main()
