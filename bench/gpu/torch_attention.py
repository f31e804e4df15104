#!/usr/bin/env python3
"""bench/gpu/torch_attention.py — PyTorch's SDPA beside trainkit's attention kernels, same shapes.

Causal bf16 attention forward and backward, timed apart with CUDA events (median of 10 after 3
warm-ups), through F.scaled_dot_product_attention held to one backend at a time: its flash kernel
(FlashAttention-2) and its cuDNN one. The shapes are bench_gpu_attention's (d12: B=16 H=12 hs 64;
d48: B=4 H=25 hs 64; hs128: B=8 H=16 hs 128; T = 1024), FLOPs counted as there: forward
2·B·H·T²·hs (causal: half of the square's two products), backward 2.5× that. One line per backend
and shape, as bench_gpu_attention prints for its engines, which bench/gpu_check.sh sets side by side
in one row's table:

    attn-result engine=sdpa-flash case=hs128 B=8 T=1024 H=16 hs=128 fwd_ms=.. bwd_ms=..
      fwd_tflops=.. bwd_tflops=..

A backend this machine's PyTorch cannot run prints `sdpa-cudnn case=...: not available (...)`
instead of its line. `--device cpu --check` runs tiny shapes on the CPU (the math backend) and
compares SDPA against a plain softmax(QK^T)V: the script's own test, without a GPU.

    python3 bench/gpu/torch_attention.py
    python3 bench/gpu/torch_attention.py --device cpu --check
"""

import argparse
import math
import statistics
import sys

import torch
import torch.nn.functional as F

# name, B, H, hs (T = --seq): bench_gpu_attention.cu's run_case calls.
CASES = [("d12", 16, 12, 64), ("d48", 4, 25, 64), ("hs128", 8, 16, 128)]


def causal_flops(B, H, T, hs):
    """Forward FLOPs of causal attention: two products over half the T x T square."""
    return 2.0 * B * H * T * T * hs


def time_ms(fn, cuda, reps=10, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            import time
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run(engine, backend, name, B, H, T, hs, device):
    """Times one backend at one shape; returns the attn-result line."""
    from torch.nn.attention import sdpa_kernel
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    g = torch.Generator(device="cpu").manual_seed(1)
    q, k, v, dout = (torch.randn(B, H, T, hs, generator=g).to(device, dtype) for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # raises if not available
        fwd = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), cuda)

        bwd = time_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), cuda)
    f = causal_flops(B, H, T, hs)
    return (f"attn-result engine={engine} case={name} B={B} T={T} H={H} hs={hs} fwd_ms={fwd:.3f} "
            f"bwd_ms={bwd:.3f} fwd_tflops={f / (fwd * 1e9):.1f} bwd_tflops={2.5 * f / (bwd * 1e9):.1f}")


def check_cpu():
    """SDPA (math backend) against softmax(QK^T / sqrt(hs) + causal mask) V; the line's format."""
    from torch.nn.attention import SDPBackend
    g = torch.Generator().manual_seed(3)
    B, H, T, hs = 2, 3, 17, 8
    q, k, v = (torch.randn(B, H, T, hs, generator=g, dtype=torch.float64) for _ in range(3))
    ours = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = q @ k.transpose(-1, -2) / math.sqrt(hs)
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    ref = torch.softmax(s, dim=-1) @ v
    err = (ours - ref).abs().max().item()
    if err > 1e-10:
        raise SystemExit(f"torch_attention --check: SDPA differs from softmax(QK^T)V by {err}")
    if causal_flops(1, 1, 1024, 128) != 2 * 1024 * 1024 * 128:
        raise SystemExit("torch_attention --check: causal FLOPs are not 2*B*H*T^2*hs")
    line = run("sdpa-math", SDPBackend.MATH, "tiny", 1, 2, 33, 16, torch.device("cpu"))
    fields = dict(kv.split("=") for kv in line.split()[1:])
    for key in ("engine", "case", "B", "T", "H", "hs", "fwd_ms", "bwd_ms", "fwd_tflops",
                "bwd_tflops"):
        if key not in fields:
            raise SystemExit(f"torch_attention --check: {key}= missing from {line}")
    print(line)
    print(f"torch_attention --check: SDPA matches softmax(QK^T)V within {err:.1e}; line ok")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--device", default="cuda")
    p.add_argument("--check", action="store_true", help="CPU self-check (tiny shapes)")
    args = p.parse_args(argv)
    if args.check:
        check_cpu()
        return 0
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("torch_attention: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    from torch.nn.attention import SDPBackend
    backends = [("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION)]
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(device)}", flush=True)
    ran = 0
    for name, B, H, hs in CASES:
        for engine, backend in backends:
            try:
                print(run(engine, backend, name, B, H, args.seq, hs, device), flush=True)
                ran += 1
            except RuntimeError as e:  # a backend this build or GPU lacks
                print(f"{engine} case={name}: not available ({str(e).splitlines()[0][:100]})",
                      flush=True)
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main())
