"""Drop the step pairs of an existing MCTS pairs file whose two steps say the same thing in other words, as the
protocol reads them: what ``effirag data mcts search.distinct_content=true`` does while mining, for pairs mined
without it.

    python recipes/demo_policy/distinct_pairs.py reasonrag runs/prl/mcts/pairs.jsonl runs/prl/pairs-distinct.jsonl
"""

from __future__ import annotations

import argparse
import json

from effirag.agent import get_protocol
from effirag.data.io import iter_jsonl, write_jsonl
from effirag.train.mcts.pairs import distinct_content


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("protocol", help="the protocol the pairs were mined in (reads each step's content)")
    ap.add_argument("pairs", help="pairs.jsonl of `effirag data mcts`")
    ap.add_argument("out", help="where the kept pairs go (JSONL)")
    args = ap.parse_args()
    records = [r for _, r in iter_jsonl(args.pairs)]
    kept = distinct_content(records, get_protocol(args.protocol))
    write_jsonl(args.out, kept)
    print(json.dumps({"pairs": len(records), "kept": len(kept), "out": args.out}))


if __name__ == "__main__":
    main()
