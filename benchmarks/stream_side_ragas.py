"""ragas' evaluate() end to end on a JSONL file (load, build samples, score): samples/s.

python stream_side_ragas.py --data file.jsonl --n 20000
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("OPENAI_API_KEY", "unused-no-request-is-made")
warnings.simplefilter("ignore")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--n", type=int, default=20_000)
    args = parser.parse_args()
    from ragas import EvaluationDataset, evaluate
    from ragas.metrics import ToolCallAccuracy, ToolCallF1

    start = time.perf_counter()
    with open(args.data, encoding="utf-8") as handle:
        rows = [json.loads(line) for line, _ in zip(handle, range(args.n), strict=False)]
    for row in rows:
        for message in row["user_input"]:
            if message["type"] == "ai" and not message.get("tool_calls"):
                message.pop("tool_calls", None)
    dataset = EvaluationDataset.from_list(rows)
    evaluate(dataset, metrics=[ToolCallAccuracy(), ToolCallF1()], show_progress=False)
    elapsed = time.perf_counter() - start
    print(json.dumps({"samples": len(rows), "seconds": elapsed, "per_s": len(rows) / elapsed}))


if __name__ == "__main__":
    main()
