#!/usr/bin/env python3
"""scripts/parquet_to_jsonl.py — stream the text column of parquet files as JSONL.

FineWeb and FineWeb-Edu are distributed as parquet files with a `text` column. This step turns
them into the JSONL that `gpt_fineweb prepare` reads, without a temporary file:

    python3 scripts/parquet_to_jsonl.py data/*.parquet | gpt_fineweb prepare --out shards -

Each row becomes one line {"text": ...}, in file order, row group by row group, so memory stays
at one batch of rows (--batch-rows) whatever the file size. Null texts are skipped and counted.
The tokens are the same as `prepare` on the same rows written as JSONL (tested:
tests/scripts/test_parquet_to_jsonl.py). Needs pyarrow (python3 -m pip install pyarrow); C++
Apache Arrow is not packaged by Debian 12, and pyarrow's reader is the same library.
Exit status: 0 on success, 2 on a bad input file or column (one line on stderr).
"""
import argparse
import json
import sys


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="parquet files, read in the order given")
    parser.add_argument("--column", default="text", help="the column holding documents (text)")
    parser.add_argument("--batch-rows", type=int, default=1024,
                        help="rows converted at once; bounds memory (1024)")
    args = parser.parse_args(argv)
    if args.batch_rows < 1:
        parser.error("--batch-rows must be at least 1")
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        sys.exit(f"parquet_to_jsonl: {e}; run: python3 -m pip install pyarrow")

    out = sys.stdout
    rows = skipped = 0
    for path in args.files:
        try:
            f = pq.ParquetFile(path)
        except (OSError, ValueError) as e:  # missing file, not parquet
            print(f"parquet_to_jsonl: '{path}': {e}", file=sys.stderr)
            return 2
        if args.column not in f.schema_arrow.names:
            print(f"parquet_to_jsonl: '{path}' has no column '{args.column}' "
                  f"(columns: {', '.join(f.schema_arrow.names)})", file=sys.stderr)
            return 2
        for batch in f.iter_batches(batch_size=args.batch_rows, columns=[args.column]):
            for text in batch.column(0).to_pylist():
                if text is None:
                    skipped += 1
                    continue
                if not isinstance(text, str):
                    print(f"parquet_to_jsonl: '{path}': column '{args.column}' holds "
                          f"{type(text).__name__}, not strings", file=sys.stderr)
                    return 2
                out.write(json.dumps({"text": text}, ensure_ascii=False))
                out.write("\n")
                rows += 1
    out.flush()
    print(f"parquet_to_jsonl: {rows} documents from {len(args.files)} file(s)"
          + (f", {skipped} null texts skipped" if skipped else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # the consumer stopped reading (e.g. prepare failed): its error counts
        sys.exit(1)
