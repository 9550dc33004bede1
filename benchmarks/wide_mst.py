"""The MST arms of ``benchmarks/wide.py``, run inside a peer's virtual environment.

MST (McKenna, Miklau and Sheldon 2021) from one of two packages that are not dependencies of
PrivSyn Studio; ``benchmarks/wide.py --install-peers`` makes their environments and runs this
file there as a subprocess:

* ``--implementation dpmm`` (arm ``mst``): dpmm 0.1.9 (Apache-2.0) in
  ``benchmarks/.peers-venv``. Its ``MSTGM`` is fitted on the codes as they are (no
  discretisation, no domain compression: every arm of the benchmark sees the same coded
  table and domain).
* ``--implementation snsynth`` (arm ``mst-sn``): smartnoise-synth 1.0.8 (MIT) in
  ``benchmarks/.snsynth-venv``, the reference MST of Private-PGM (mbi 1.1, on JAX) wrapped:
  its 1-way measurements, its own domain compression (values under 3 sigma merged), the
  spanning tree chosen with a third of rho, and 5,000 iterations of mirror descent. Its
  transformer reads each column's categories off the codes (``preprocessor_eps=0``: no
  budget, as dpmm's declared domain). It runs where dpmm fails: on caravan (86 columns)
  dpmm's final estimate builds a junction tree too wide for NumPy.

It reads an integer-coded table (``.npy``, rows x columns) and its domain (JSON: column
names and sizes, in column order), writes the synthetic codes (``.npy``) and prints one JSON
line: seconds to fit and to sample, the number of cliques measured (dpmm) and the peak RSS.
Imports only what the peer's environment has.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def peak_rss_mb() -> float:
    """This process's peak RSS since it started (VmHWM). Not getrusage's ru_maxrss: on Linux
    that survives fork and exec, so a child started by a large parent reports the parent's."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--codes", required=True, help="input .npy of integer codes")
    parser.add_argument("--domain", required=True, help="JSON list of [name, size]")
    parser.add_argument("--output", required=True, help="output .npy of synthetic codes")
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--delta", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, help="synthetic rows (default: as many as real)")
    parser.add_argument("--iters", type=int, default=5000, help="Private-PGM iterations")
    parser.add_argument(
        "--select-iters", type=int, default=2500, help="iterations of the selection's estimate"
    )
    parser.add_argument("--implementation", choices=["dpmm", "snsynth"], default="dpmm")
    args = parser.parse_args()
    if args.implementation == "snsynth":
        smartnoise(args)
        return

    import dpmm.models.mst as mst
    import pandas as pd

    # MST.select estimates the model of the 1-way measurements with a hard-coded 2,500
    # iterations of Private-PGM before it scores every pair: on wide tables that step alone
    # takes minutes. Only that call goes through this module's name, so this changes its
    # iteration count and nothing else (the final estimate reads ``n_iters``).
    inference = mst.FactoredInference

    def selection_inference(domain: object, iters: int = 2500, **kwargs: object) -> object:
        return inference(domain, iters=args.select_iters, **kwargs)

    mst.FactoredInference = selection_inference

    codes = np.load(args.codes)
    names_sizes = json.loads(Path(args.domain).read_text())
    names = [name for name, _ in names_sizes]
    domain = {name: int(size) for name, size in names_sizes}
    table = pd.DataFrame(codes.astype(np.int64), columns=names)

    started = time.perf_counter()
    model = mst.MSTGM(
        epsilon=args.epsilon,
        delta=args.delta,
        n_iters=args.iters,
        compress=False,
        domain=domain,
        random_state=np.random.RandomState(args.seed),
        n_jobs=1,
    )
    model.fit(table)
    fitted = time.perf_counter()
    synthetic = model.generate(n_records=args.rows or len(table))
    sampled = time.perf_counter()
    out = synthetic[names].to_numpy(dtype=np.int64)
    np.save(args.output, out)
    cliques = [c for c in getattr(model.generator, "cliques", []) if len(c) > 1]
    print(
        json.dumps(
            {
                "fit_s": fitted - started,
                "sample_s": sampled - fitted,
                "cliques": len(cliques),
                "rows": int(out.shape[0]),
                "select_iters": args.select_iters,
                "iters": args.iters,
                "rss_MB": peak_rss_mb(),
            }
        )
    )


def smartnoise(args: argparse.Namespace) -> None:
    """MST as smartnoise-synth runs it (its own iteration counts: ``--iters`` is dpmm's)."""
    import numpy as np
    import pandas as pd
    from snsynth.mst import MSTSynthesizer

    codes = np.load(args.codes)
    names = [name for name, _ in json.loads(Path(args.domain).read_text())]
    table = pd.DataFrame(codes.astype(np.int64), columns=names)
    # its Gaussian noise is OpenDP's, from secure randomness: a run cannot be repeated, and
    # the seed reaches only what it draws with NumPy's global generator (the tree's choices)
    np.random.seed(args.seed)
    started = time.perf_counter()
    model = MSTSynthesizer(epsilon=args.epsilon, delta=args.delta)
    model.fit(table, categorical_columns=names, preprocessor_eps=0.0)
    fitted = time.perf_counter()
    synthetic = model.sample(args.rows or len(table))
    sampled = time.perf_counter()
    out = synthetic[names].to_numpy(dtype=np.int64)
    np.save(args.output, out)
    print(
        json.dumps(
            {
                "fit_s": fitted - started,
                "sample_s": sampled - fitted,
                "rows": int(out.shape[0]),
                "rss_MB": peak_rss_mb(),
            }
        )
    )


if __name__ == "__main__":
    main()
