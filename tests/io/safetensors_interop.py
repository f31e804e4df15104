#!/usr/bin/env python3
"""tests/io/safetensors_interop.py — checks trainkit's safetensors files with PyPI's safetensors.

  check FILE   FILE (written by test_safetensors.cpp) loads with safetensors.numpy and holds the
               tensors the test's value formula gives; exit 1 naming the first difference.
  write FILE   writes F32 and F16 tensors with safetensors.numpy for trainkit to read back.
safetensors and numpy are required (CI installs them: .ci/run); without them the check fails
with the pip command that installs them rather than skipping.
"""
import sys

try:
    import numpy as np
    import safetensors
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError as e:
    sys.exit(f"safetensors_interop: {e}; run: python3 -m pip install safetensors numpy")


def expected(name, shape):
    """The test's values: exactly representable in bf16 and f16, different per tensor."""
    k = sum(map(ord, name)) % 7 + 1
    n = int(np.prod(shape)) if shape else 1
    i = np.arange(n, dtype=np.int64)
    return (((i % 17) - 8) * k / 4.0).astype(np.float32).reshape(shape)


TENSORS = {"alpha": (3, 5), "beta.weight": (4, 2, 3), "gamma": (7,), "scalar": ()}


def decode(dtype, data, shape):
    """Raw little-endian bytes to float32 (numpy has no bfloat16: widen its bits)."""
    if dtype == "BF16":
        bits = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    return np.frombuffer(data, dtype={"F32": "<f4", "F16": "<f2"}[dtype]).astype(np.float32).reshape(shape)


def check(path):
    raw = open(path, "rb").read()
    # deserialize runs the Rust reference's validation (header, offsets tiling the data).
    got = {name: info for name, info in safetensors.deserialize(raw)}
    if sorted(got) != sorted(TENSORS):
        sys.exit(f"{path}: tensors {sorted(got)} != {sorted(TENSORS)}")
    with safe_open(path, framework="np") as f:
        if f.metadata() != {"format": "pt", "writer": "trainkit"}:
            sys.exit(f"{path}: metadata {f.metadata()}")
    header_len = int.from_bytes(raw[:8], "little")
    if header_len % 8 != 0:
        sys.exit(f"{path}: header length {header_len} is not a multiple of 8")
    for name, shape in TENSORS.items():
        info = got[name]
        if tuple(info["shape"]) != shape:
            sys.exit(f"{path}: {name} shape {info['shape']} != {shape}")
        want_dtype = "BF16" if name == "beta.weight" else "F32"
        if info["dtype"].upper() != want_dtype:
            sys.exit(f"{path}: {name} dtype {info['dtype']} != {want_dtype}")
        if not np.array_equal(decode(want_dtype, bytes(info["data"]), shape), expected(name, shape)):
            sys.exit(f"{path}: {name} values differ")
    print(f"{path}: {len(TENSORS)} tensors agree with safetensors {safetensors.__version__}")


def write(path):
    tensors = {name: expected(name, shape) for name, shape in TENSORS.items()}
    tensors["gamma"] = tensors["gamma"].astype(np.float16)
    save_file(tensors, path, metadata={"source": "python"})
    print(f"wrote {path}")


if __name__ == "__main__":
    {"check": check, "write": write}[sys.argv[1]](sys.argv[2])
