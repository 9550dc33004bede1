"""dpmm's MST on a raw CSV, as a user of that library would run it; for ``raw_tables.py``.

Runs in ``benchmarks/.peers-venv`` (``python benchmarks/raw_tables.py --install-peers``:
dpmm 0.1.9, Apache-2.0, which pins its own NumPy and pandas), as a subprocess: reads the
real CSV with pandas' own type inference, fits ``MSTPipeline`` (its PrivTree binner reads
every domain off the data, and says so in a warning) and writes the synthetic CSV. dpmm spends
its binner's ``proc_epsilon`` on top of the model's epsilon; the model here gets
``epsilon - proc_epsilon`` so the two tools spend the same total. Prints one JSON line: seconds
to fit and to sample, and the rows written.

Run: ``benchmarks/.peers-venv/bin/python benchmarks/raw_tables_peer.py --input real.csv
--output synthetic.csv --epsilon 1 --delta 1e-9 [--seed 0]``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--delta", type=float, required=True)
    parser.add_argument("--proc-epsilon", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import pandas as pd
    from dpmm.pipelines.mst import MSTPipeline

    real = pd.read_csv(args.input)
    started = time.perf_counter()
    pipeline = MSTPipeline(
        epsilon=args.epsilon - args.proc_epsilon,
        delta=args.delta,
        proc_epsilon=args.proc_epsilon,
        n_jobs=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipeline.fit(real, random_state=args.seed)
        fitted = time.perf_counter()
        synthetic = pipeline.generate(n_records=len(real), random_state=args.seed)
    sampled = time.perf_counter()
    synthetic[list(real.columns)].to_csv(args.output, index=False)
    print(
        json.dumps(
            {"fit_s": fitted - started, "sample_s": sampled - fitted, "rows": len(synthetic)}
        )
    )


if __name__ == "__main__":
    main()
