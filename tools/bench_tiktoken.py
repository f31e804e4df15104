"""Time tiktoken's gpt2 encoding on the text bench/bench_tokenizer.cpp uses, for side-by-side MB/s.

The text is the embedded default corpus (examples/gpt_fineweb/data/default_corpus.hpp, Python
documentation prose) decoded back to its documents, so both programs encode the same bytes
without any download. tiktoken is built offline from the same vocab files (gpt2_tiktoken.py).
Prints single-thread MB/s (encode_ordinary per document, as trainkit's encode) and, for
reference, tiktoken's own batch API on every core.

    pip install tiktoken
    python3 tools/bench_tiktoken.py [--vocab DIR] [--seconds 3]
"""

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_tiktoken import EOT, default_vocab_dir, load_gpt2  # noqa: E402

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def corpus_documents(enc):
    with open(os.path.join(REPO, "examples/gpt_fineweb/data/default_corpus.hpp"), encoding="utf-8") as f:
        src = f.read()
    tokens = []
    for name in ("default_corpus_tokens", "default_corpus_val_tokens"):
        body = re.search(name + r"\[\] = \{(.*?)\};", src, re.S).group(1)
        tokens += [int(t) for t in body.replace("\n", " ").split(",") if t.strip()]
    docs, cur = [], []
    for t in tokens:
        if t == EOT:
            if cur:
                docs.append(enc.decode(cur))
            cur = []
        else:
            cur.append(t)
    if cur:
        docs.append(enc.decode(cur))
    return docs


def time_it(fn, seconds, clock=time.perf_counter):
    """Seconds per call of fn on `clock` (process CPU time is fair on a shared, busy machine)."""
    fn()  # warm up
    n, start = 0, clock()
    while True:
        fn()
        n += 1
        elapsed = clock() - start
        if elapsed >= seconds:
            return elapsed / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", default=default_vocab_dir())
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    import tiktoken

    enc = load_gpt2(args.vocab)
    docs = corpus_documents(enc)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)

    def single():
        for d in docs:
            enc.encode_ordinary(d)

    print(f"tiktoken {tiktoken.__version__} gpt2, {len(docs)} docs, {nbytes / 1e6:.3f} MB")
    per_cpu = time_it(single, args.seconds, time.process_time)
    per_wall = time_it(single, args.seconds)
    # MB = 1e6 bytes here; Google Benchmark's "M/s" is MiB/s (divide our MB/s by 1.048576).
    print(f"tiktoken single-thread encode_ordinary: {nbytes / per_cpu / 1e6:.2f} MB/s of CPU time,"
          f" {nbytes / per_wall / 1e6:.2f} MB/s wall clock")
    threads = os.cpu_count() or 1
    per_batch = time_it(lambda: enc.encode_ordinary_batch(docs, num_threads=threads), args.seconds)
    print(f"tiktoken encode_ordinary_batch, {threads} threads: {nbytes / per_batch / 1e6:.2f} MB/s")


if __name__ == "__main__":
    main()
