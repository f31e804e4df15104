#!/usr/bin/env python3
"""tests/scripts/test_parquet_to_jsonl.py — parquet → shards gives the JSONL route's tokens.

  test_parquet_to_jsonl.py GPT_FINEWEB SOURCE_DIR WORK_DIR

Writes parquet files with pyarrow (several row groups, a null text, non-ASCII, newlines, quotes,
an extra column), streams them through scripts/parquet_to_jsonl.py into `gpt_fineweb prepare -`,
and compares the shards byte for byte with `prepare` on the same rows written as JSONL by
json.dumps (ASCII-escaped: a different encoding of the same documents). Also checks the bad-input
cases end with exit 2 and one line. pyarrow is required (CI installs it); without it this fails.
"""
import json
import pathlib
import shutil
import subprocess
import sys

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as e:
    sys.exit(f"test_parquet_to_jsonl: {e}; run: python3 -m pip install pyarrow")

exe, source, work = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
script = source / "scripts" / "parquet_to_jsonl.py"
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)

docs = [f"Document {i}: the quick brown fox jumps over the lazy dog {i * 7}." for i in range(300)]
docs[3] = "Ünïcödé — “quotes”, emoji 🦊, CJK 漢字, and a \"backslash\" \\ here"
docs[10] = "line one\nline two\n\n  indented\ttab"
docs[11] = " leading space and trailing space "
texts = docs[:150] + [None] + docs[150:]  # a null row in the first file: skipped

first = pa.table({"id": list(range(151)), "text": texts[:151]})
second = pa.table({"id": list(range(151, len(texts))), "text": texts[151:]})
pq.write_table(first, work / "a.parquet", row_group_size=40)  # four row groups
pq.write_table(second, work / "b.parquet", row_group_size=64)
if pq.ParquetFile(work / "a.parquet").num_row_groups < 2:
    sys.exit("fixture: expected several row groups")

with open(work / "same.jsonl", "w") as f:
    for d in docs:
        f.write(json.dumps({"text": d}) + "\n")

prepare = ["--shard-tokens", "1500", "--val-tokens", "500", "--threads", "2",
           "--progress-seconds", "0"]
ref = subprocess.run([exe, "prepare", "--out", work / "from_jsonl", *prepare, work / "same.jsonl"],
                     capture_output=True, text=True)
if ref.returncode != 0:
    sys.exit(f"prepare on JSONL failed: {ref.stderr}")

conv = subprocess.Popen([sys.executable, script, "--batch-rows", "17", work / "a.parquet",
                         work / "b.parquet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
got = subprocess.run([exe, "prepare", "--out", work / "from_parquet", *prepare, "-"],
                     stdin=conv.stdout, capture_output=True, text=True)
conv.stdout.close()
conv_err = conv.stderr.read().decode()
if conv.wait() != 0 or got.returncode != 0:
    sys.exit(f"parquet route failed: {conv_err} {got.stderr}")
if "300 documents from 2 file(s), 1 null texts skipped" not in conv_err:
    sys.exit(f"unexpected summary: {conv_err}")

a = sorted(p.name for p in (work / "from_jsonl").iterdir())
b = sorted(p.name for p in (work / "from_parquet").iterdir())
if a != b or len(a) < 3:
    sys.exit(f"shard names differ or too few shards: {a} vs {b}")
for name in a:
    if (work / "from_jsonl" / name).read_bytes() != (work / "from_parquet" / name).read_bytes():
        sys.exit(f"{name}: parquet route differs from the JSONL route")


def expect_bad(args, needle):
    r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    err = r.stderr.strip()
    if r.returncode != 2 or needle not in err or "\n" in err:
        sys.exit(f"{args}: exit {r.returncode}, stderr {err!r}; expected 2 and {needle!r}")


expect_bad([work / "missing.parquet"], "missing.parquet")
(work / "not.parquet").write_text("not parquet at all")
expect_bad([work / "not.parquet"], "not.parquet")
expect_bad(["--column", "body", work / "a.parquet"], "no column 'body'")
pq.write_table(pa.table({"text": [1, 2]}), work / "ints.parquet")
expect_bad([work / "ints.parquet"], "not strings")
print(f"parquet route: {len(a)} shards byte-identical to the JSONL route; bad inputs refused")
