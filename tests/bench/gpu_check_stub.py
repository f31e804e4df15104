#!/usr/bin/env -S python3 -S
"""tests/bench/gpu_check_stub.py — every program bench/gpu_check.sh runs, as a CPU stub.

One file, linked under each name the script calls (the GPU test binaries, the benchmarks,
gpt_fineweb, torch_reference.py, torch_attention.py, nvidia-smi, compute-sanitizer); it acts by the
name it was called under. The GoogleTest binaries list and run the test names of their real
sources ($STUB_SPEC, a JSON map binary -> ["Suite.Name", ...], written by test_gpu_check.py from
the repository), honour --gtest_filter, and print GoogleTest's lines, so the script's filters are
checked against the real names. Each program prints the lines the script parses.

STUB_FAULT=MODE:REGEX[;;MODE:REGEX...] makes a call whose command line ("name arg ...") matches
REGEX misbehave:
fail (exit 1; a gtest binary fails its first test), hang (sleeps until killed), crash (SIGSEGV),
and for compute-sanitizer also finding (an invalid access reported) and refuse (cannot attach).
"""

import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import time

NAME = os.path.basename(sys.argv[0])
ARGS = sys.argv[1:]
CARRY_BIN = os.path.dirname(os.path.abspath(sys.argv[0]))


def fault():
    for spec in filter(None, os.environ.get("STUB_FAULT", "").split(";;")):
        mode, _, regex = spec.partition(":")
        if re.search(regex, " ".join([NAME] + ARGS)):
            return mode
    return None


def misbehave(mode):
    if mode == "hang":
        time.sleep(3600)
    if mode == "crash":
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGSEGV)


def arg(flag, default=None):
    return ARGS[ARGS.index(flag) + 1] if flag in ARGS else default


def has_cudnn():
    """The build had cudnn-frontend when its cuDNN test binary is carried (as gpu_check decides)."""
    bin_dir = os.environ.get("STUB_BIN", CARRY_BIN)
    return os.path.exists(os.path.join(bin_dir, "test_cuda_cudnn_attention"))


def gtest_matches(name, filt):
    pos, _, neg = filt.partition("-")
    pos_pats = [p for p in pos.split(":") if p] or ["*"]
    neg_pats = [p for p in neg.split(":") if p]
    return any(fnmatch.fnmatchcase(name, p) for p in pos_pats) and not any(
        fnmatch.fnmatchcase(name, p) for p in neg_pats)


def skips(test):
    """The skips of a one-GPU machine: the 2-rank test, and the cuDNN case in a build without it."""
    if test == "ShardedMuonCuda.RanksGatherEveryMatrixAndKeepTheirShareOnly":
        return "run under mpiexec -n 2"
    if test == "LlamaCuda.CudnnMatchesCpu" and not has_cudnn():
        return "this build has no cuDNN attention"
    return None


def gtest(tests, mode):
    if "--gtest_list_tests" in ARGS:
        misbehave(mode)
        suite = None
        for t in tests:
            s, n = t.split(".")
            if s != suite:
                print(f"{s}.")
                suite = s
            print(f"  {n}")
        return 0
    selected = [t for t in tests if gtest_matches(t, arg_eq("--gtest_filter") or "*")]
    print(f"[==========] Running {len(selected)} tests from 1 test suite.")
    passed, skipped, failed = [], [], []
    for i, t in enumerate(selected):
        print(f"[ RUN      ] {t}", flush=True)
        if i == 0 and mode in ("hang", "crash"):
            misbehave(mode)
        if i == 0 and mode == "fail":
            print(f"stub.cpp:1: Failure\n[  FAILED  ] {t} (3 ms)")
            failed.append(t)
        elif skips(t):
            print(f"stub.cpp:1: Skipped\n{skips(t)}\n[  SKIPPED ] {t} (0 ms)")
            skipped.append(t)
        else:
            print(f"[       OK ] {t} (1 ms)")
            passed.append(t)
    print(f"[==========] {len(selected)} tests from 1 test suite ran. (5 ms total)")
    print(f"[  PASSED  ] {len(passed)} tests.")
    if skipped:
        print(f"[  SKIPPED ] {len(skipped)} tests, listed below:")
        for t in skipped:
            print(f"[  SKIPPED ] {t}")
    if failed:
        print(f"[  FAILED  ] {len(failed)} tests, listed below:")
        for t in failed:
            print(f"[  FAILED  ] {t}")
    return 1 if failed else 0


def arg_eq(flag):
    for a in ARGS:
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def attention_lines(engines):
    for case, B, H, hs in (("d12", 16, 12, 64), ("d48", 4, 25, 64), ("hs128", 8, 16, 128)):
        for i, e in enumerate(engines):
            print(f"attn-result engine={e} case={case} B={B} T=1024 H={H} hs={hs} fwd_ms=1.000 "
                  f"bwd_ms=2.000 fwd_tflops={310 + i} bwd_tflops={210 + i}")


def program(mode):
    if mode == "fail":
        print(f"{NAME}: stub failure")
        return 1
    misbehave(mode)
    if NAME == "nvidia-smi":
        q = arg_eq("--query-gpu") or ""
        print("NVIDIA H200, 143771 MiB, 570.86, 1980 MHz, 3201 MHz" if "," in q else "NVIDIA H200")
    elif NAME == "test_cuda_link":
        print("cuda link: two CUDA units and the umbrella linked (loss 10.9)")
    elif NAME == "bench_gpu_training":
        if "--cuda-graph" in ARGS:
            print("CUDA graph             B  eager steps/s  graph steps/s     gain     goal   met")
        elif arg("--arch") == "llama":
            for m, B in (("d12", 32), ("d24", 16)):
                print(f"llama-result impl=trainkit model={m} B={B} T=1024 accum=1 recompute=0 "
                      "attention=flash graph=0 tok_s=400000 mfu=0.4700 median_ms=80.00 "
                      "first_ms=150.00 fallbacks=0 mem_gib=40.00")
        else:
            for m, B in (("d12", 32), ("d48", 16)):
                print(f"result impl=trainkit model={m} B={B} T=1024 accum=1 recompute=0 "
                      "attention=flash graph=0 tok_s=500000 mfu=0.5200 median_ms=60.00 "
                      "first_ms=100.00 fallbacks=0 mem_gib=50.00")
            print("case               B    ms/step")
    elif NAME == "profile_kernels":
        with open(arg("--out"), "w") as f:
            f.write("stub profile\n")
        print("profile done")
    elif NAME == "bench_gpu_attention":
        attention_lines(["flash", "cudnn", "naive"] if has_cudnn() else ["flash", "naive"])
    elif NAME == "torch_attention.py":
        attention_lines(["sdpa-flash", "sdpa-cudnn"])
    elif NAME == "torch_reference.py":
        tag = "llama-result" if arg("--arch") == "llama" else "result"
        print(f"{tag} impl=torch model={arg('--model')} B={arg('--batch')} T={arg('--seq')} "
              f"accum={arg('--accum', '1')} attention=sdpa-flash tok_s=400000 mfu=0.4000 "
              "median_ms=80.00 first_ms=9000.00")
    elif NAME == "gpt_fineweb":
        device = arg("--device", "cpu")
        engine = arg("--attention", "auto")
        if engine == "auto":
            engine = "cudnn" if has_cudnn() else "flash"
        where = f" | NVIDIA H200 | attention {engine} | arena 1 GiB" if device == "cuda" else ""
        print(f"model L=2 H=2 C=128 | 6966784 parameters{where}")
        steps, every = int(arg("--steps", "10")), int(arg("--log-every", "1"))
        for s in range(1, steps + 1):
            if s % every == 0 or s == steps:
                print(f"step {s:6d}/{steps} | loss 10.0 | lr 1.00e-04 | norm 1.0 | 1.0 ms")
        print("---- report ----")
        if arg("--export"):
            print(f"exported llm.c model file {arg('--export')}")
    else:
        print(f"gpu_check_stub: no stub for {NAME}", file=sys.stderr)
        return 3
    return 0


def sanitizer(mode):
    tool = arg("--tool")
    rest = ARGS[ARGS.index("--error-exitcode") + 2:]
    if mode == "refuse":
        print("========= Error: Target application terminated before first instrumented API call")
        return 1
    print(f"========= COMPUTE-SANITIZER ({tool} stub)", flush=True)
    rc = subprocess.call(rest)
    if mode == "finding":
        print("========= Invalid __global__ read of size 4 bytes\n=========     at stub_kernel+0x10")
        print("========= ERROR SUMMARY: 1 error")
        return int(arg("--error-exitcode"))
    if tool == "racecheck":
        print("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)")
    else:
        print("========= ERROR SUMMARY: 0 errors")
    return rc


def main():
    mode = fault()
    if NAME == "compute-sanitizer":
        return sanitizer(mode)
    with open(os.environ["STUB_SPEC"]) as f:
        spec = json.load(f)
    if NAME in spec:
        if mode == "fail" and "--gtest_list_tests" in ARGS:
            return 1
        return gtest(spec[NAME], mode)
    return program(mode)


if __name__ == "__main__":
    sys.exit(main())
