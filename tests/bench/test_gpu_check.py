#!/usr/bin/env python3
"""tests/bench/test_gpu_check.py — bench/gpu_check.sh itself, on the CPU, against stub programs.

The device check gets one call on a lent GPU; a script that cannot pass, or that loses the rest of
the call to one bad row, wastes it. This test runs the script (its device half, as on the lent
machine) over tests/bench/gpu_check_stub.py linked under every program name, GoogleTest binaries
listing the test names of their real sources (so a filter the script passes that names no test,
or a skip it does not expect, fails here):

* every stub succeeds: exit 0, every row ok, or na for what one GPU or this build cannot run (the
  2-rank sharded Muon test; without cudnn-frontend, the cuDNN test and Llama's cuDNN case), and
  every row that runs attention names its engine; the d48 PyTorch row starts;
* one stub fails, hangs or crashes (or a sanitizer reports a finding, or cannot attach): that row
  alone changes, every other row still runs and has the status it has in the all-ok run.

    python3 tests/bench/test_gpu_check.py [REPO] [SCRATCH]   (TEST_GPU_CHECK_QUICK=1: all-ok runs only)
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(REPO, "bench", "gpu_check.sh")
STUB = os.path.join(REPO, "tests", "bench", "gpu_check_stub.py")
HANG_CAP = 2  # GPU_CHECK_STEP_CAP: what a hanging stub costs, in seconds

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAILED: {what}", flush=True)
    return cond


def test_sources():
    """binary -> its first source file, from the tests' CMakeLists (trainkit_add_test/add_executable)."""
    found = {}
    for area in ("cuda", "optim"):
        path = os.path.join(REPO, "tests", area, "CMakeLists.txt")
        text = open(path).read()
        for m in re.finditer(r"trainkit_add_test\((test_\w+)\s+SOURCES\s+(\S+)", text):
            found[m.group(1)] = os.path.join(REPO, "tests", area, m.group(2))
        for m in re.finditer(r"add_executable\((test_\w+)\s+(test_\w+\.cu)\)", text):
            found[m.group(1)] = os.path.join(REPO, "tests", area, m.group(2))
    return found


def script_binaries():
    """The names gpu_check.sh --build carries: its tests, optional tests, benches and programs."""
    text = open(SCRIPT).read()
    names = []
    for var in ("tests", "benches", "programs"):
        m = re.search(rf"^{var}=\(([^)]*)\)", text, re.M)
        names += m.group(1).split()
    names += re.findall(r"tests\+=\((test_\w+)\)", text)
    return names


def make_carry(root, cudnn):
    carry = os.path.join(root, "build-gpu")
    bindir, pathdir = os.path.join(carry, "bin"), os.path.join(root, "path")
    os.makedirs(bindir)
    os.makedirs(os.path.join(carry, "golden"))
    os.makedirs(pathdir)
    sources = test_sources()
    spec = {}
    for name in script_binaries():
        if name == "test_cuda_cudnn_attention" and not cudnn:
            continue
        os.symlink(STUB, os.path.join(bindir, name))
        if name.startswith("test_") and name != "test_cuda_link":
            src = open(sources[name]).read()
            spec[name] = [f"{s}.{n}" for s, n in
                          re.findall(r"^TEST(?:_F)?\((\w+),\s*(\w+)\)", src, re.M)]
            check(spec[name], f"{name}: no TEST in {sources[name]}")
    for name in ("torch_reference.py", "torch_attention.py"):
        os.symlink(STUB, os.path.join(carry, name))
    for name in ("nvidia-smi", "compute-sanitizer"):
        os.symlink(STUB, os.path.join(pathdir, name))
    with open(os.path.join(carry, "COMMIT"), "w") as f:
        f.write("stub\n")
    with open(os.path.join(root, "spec.json"), "w") as f:
        json.dump(spec, f)
    return carry, pathdir


def run(root, carry, pathdir, fault=""):
    out = tempfile.mkdtemp(dir=root)
    env = dict(os.environ, GPU_CHECK_CARRY=carry, OUT=out, GPU_CHECK_STEP_CAP=str(HANG_CAP),
               STUB_SPEC=os.path.join(root, "spec.json"), STUB_BIN=os.path.join(carry, "bin"),
               STUB_FAULT=fault, PATH=pathdir + os.pathsep + os.environ["PATH"])
    for k in ("GPU_CHECK_ONLY", "GPU_CHECK_BUDGET", "CUDA_VISIBLE_DEVICES"):
        env.pop(k, None)
    p = subprocess.run(["bash", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=600)
    rows = {}
    with open(os.path.join(out, "rows.tsv")) as f:
        for line in f:
            name, status, secs, detail = line.rstrip("\n").split("\t")
            check(name not in rows, f"{fault or 'all ok'}: row {name} twice")
            rows[name] = (status, detail)
    summary = open(os.path.join(out, "summary.txt")).read()
    return p.returncode, rows, p.stdout, summary


def row_like(rows, pattern):
    hits = [n for n in rows if re.search(pattern, n)]
    check(len(hits) == 1, f"one row matching /{pattern}/, found {hits}")
    return hits[0] if hits else None


def all_ok(root, cudnn):
    carry, pathdir = make_carry(os.path.join(root, f"cudnn{int(cudnn)}"), cudnn)
    rc, rows, stdout, summary = run(os.path.dirname(carry), carry, pathdir)
    tag = f"all ok, cudnn={int(cudnn)}"
    check(rc == 0, f"{tag}: exit {rc}\n{stdout[-3000:]}")
    na = {n for n, (s, _) in rows.items() if s == "na"}
    expect_na = {"test_sharded_muon_cuda RanksGatherEveryMatrixAndKeepTheirShareOnly"}
    if not cudnn:
        expect_na |= {"test_cuda_cudnn_attention", "test_cuda_llama LlamaCuda.CudnnMatchesCpu"}
    check(na == expect_na, f"{tag}: na rows {sorted(na)}, expected {sorted(expect_na)}")
    bad = {n: s for n, (s, _) in rows.items() if s not in ("ok", "na")}
    check(not bad, f"{tag}: rows not ok: {bad}")
    check(re.search(r"gpu_check: \d+ ok, 0 not ok", stdout), f"{tag}: verdict line")
    check(len(rows) > 40, f"{tag}: only {len(rows)} rows")
    # The rows the issue asks for.
    for pattern in (r"^torch_reference d48 B=16", r"^memcheck flash", r"^racecheck flash",
                    r"^synccheck flash", r"^memcheck llama kernels", r"^racecheck llama kernels",
                    r"^synccheck llama kernels", r"^memcheck llama_cuda", r"^test_cuda_llama$",
                    r"^test_sharded_muon_cuda \(one rank\)", r"^bench_gpu_attention"):
        row_like(rows, pattern)
    # Every attention-running row names its engine; gpt_fineweb's from the program's own line.
    auto = "cudnn" if cudnn else "flash"
    for name, engine in (("fineweb_d12_20steps", auto), ("fineweb_d12_flash", "flash"),
                         ("fineweb_d2_llama_muon", auto), ("test_cuda_flash_attention", "flash"),
                         ("bench_gpu_training", "flash"), ("torch_reference d12 B=32 T=1024",
                                                           "sdpa-flash")):
        detail = rows.get(name, ("", ""))[1]
        check(f"attention={engine}" in detail, f"{tag}: {name} says '{detail}', not {engine}")
    for name in rows:
        if rows[name][0] != "na" and (name.startswith("fineweb_") or "flash" in name.lower() or
                                      "attention" in name.lower()):
            check("attention=" in rows[name][1], f"{tag}: {name} names no attention engine")
    # The attention table: trainkit's flash beside SDPA at hs 128, goals beside the figures.
    check(re.search(r"^hs128 B=8 T=1024 hs=128 +310/210 .* 310/210 ", summary, re.M),
          f"{tag}: attention table row for hs128")
    check(re.search(r"own flash forward, hs 128.* 310 +>= 300 +yes", summary),
          f"{tag}: flash forward goal row")
    check(re.search(r"llama d12 T=1024: MFU \(%\) +47.0 +>= 45 +yes", summary),
          f"{tag}: Llama d12 MFU goal 45%")
    return carry, pathdir, rows


# Faults, in groups that run together (each costs one run of the script; the rows they hit are
# far apart): (mode, command-line regex, the row it must change, that row's status). A binary that
# cannot list its tests costs one row in place of its per-test rows, its tests run in one process.
FAULT_GROUPS = [
    [("fail", r"^test_cuda_gpt2 ", "test_cuda_gpt2", "FAIL(rc=1)"),
     ("crash", r"^test_cuda_kernels .*--gtest_filter=CudaKernels.GeluForward$",
      "cuda_kernels/CudaKernels.GeluForward", "FAIL(rc=139)"),
     ("crash", r"^bench_gpu_training$", "bench_gpu_training", "FAIL(rc=139)"),
     ("fail", r"^torch_reference.py --model d48", "torch_reference d48 B=16 T=1024", "FAIL(rc=1)"),
     ("fail", r"^gpt_fineweb --device cuda --model d2 --steps 20 --ckpt-mode sync .*--export",
      "fineweb_d2_sync_ckpt_export", "FAIL(rc=1)")],
    [("hang", r"^test_cuda_core ", "test_cuda_core", "TIMEOUT"),
     ("hang", r"^test_cuda_llama_kernels --gtest_list_tests",
      "test_cuda_llama_kernels (could not list its tests)", "ok"),
     ("hang", r"^gpt_fineweb .*--model d12 .*--steps 20 ", "fineweb_d12_20steps", "TIMEOUT")],
    [("crash", r"^bench_gpu_attention", "bench_gpu_attention + torch_attention.py (SDPA)",
      "FAIL(rc=139)"),
     ("finding", r"^compute-sanitizer --tool racecheck .*test_cuda_flash_attention",
      "racecheck flash forward+backward (hs64, hs128; T=17..193)", "FAIL(findings)"),
     ("refuse", r"^compute-sanitizer --tool synccheck .*test_cuda_llama_kernels",
      "synccheck llama kernels (rmsnorm, rope, qk-norm, swiglu, relu2)", "refused"),
     ("crash", r"^gpt_fineweb --device cuda --init-from", "fineweb_d2_init_from", "FAIL(rc=139)")],
]


def fault_group(carry, pathdir, ok_rows, group):
    tag = "; ".join(f"{mode} {target}" for mode, _, target, _ in group)
    fault = ";;".join(f"{mode}:{regex}" for mode, regex, _, _ in group)
    rc, rows, stdout, _ = run(os.path.dirname(carry), carry, pathdir, fault)
    expected = dict(ok_rows)
    for _, _, target, status in group:
        if target.endswith("(could not list its tests)"):
            binary = target.split()[0].removeprefix("test_")
            expected = {n: v for n, v in expected.items() if not n.startswith(binary + "/")}
        expected[target] = (status, "")
    failing = [s for _, _, _, s in group if s not in ("ok", "refused")]
    check(rc == (1 if failing else 0), f"{tag}: exit {rc}")
    for _, _, target, status in group:
        got = rows.get(target, ("missing",))[0]
        if check(got == status, f"{target}: the row says {rows.get(target)}, expected {status}"):
            print(f"ok: {target}: {rows[target][0]} ({rows[target][1]})", flush=True)
    changed = {n: (expected.get(n, ("missing",))[0], rows.get(n, ("missing",))[0])
               for n in set(rows) | set(expected)
               if rows.get(n, ("missing",))[0] != expected.get(n, ("missing",))[0]}
    check(not changed, f"{tag}: other rows changed (all-ok status, now): {changed}")
    print(f"ok: the {len(rows) - len(group)} other rows as in the all-ok run", flush=True)


def main():
    scratch = sys.argv[2] if len(sys.argv) > 2 else None
    root = tempfile.mkdtemp(prefix="gpu-check-test.", dir=scratch)
    try:
        all_ok(root, cudnn=False)
        carry, pathdir, ok_rows = all_ok(root, cudnn=True)
        print(f"ok: all stubs succeed: {len(ok_rows)} rows ok or na, exit 0", flush=True)
        for group in [] if os.environ.get("TEST_GPU_CHECK_QUICK") else FAULT_GROUPS:
            fault_group(carry, pathdir, ok_rows, group)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if failures:
        print(f"test_gpu_check: {len(failures)} check(s) failed")
        return 1
    print("test_gpu_check: every row answered on its own")
    return 0


if __name__ == "__main__":
    sys.exit(main())
