#!/usr/bin/env python3
"""Checks trainkit's TensorBoard event files with TensorBoard's own reader.

trainkit writes event files by hand (trainer/tensorboard.hpp: TFRecord framing + a hand-encoded
Event protobuf). The C++ test decodes them with a reader written from the same spec, so this script
is the independent check: TensorBoard's EventAccumulator must load every scalar, and the values
must match the metrics JSONL of the same run.

  check_tensorboard.py --gpt-fineweb build/examples/gpt_fineweb/gpt_fineweb [--hellaswag FILE]
      runs a short training (embedded corpus) with --tensorboard and --metrics, then checks; with
      --hellaswag also --hellaswag-every 3, and checks EVENT_DIR/hellaswag's eval/hellaswag_acc and
      eval/hellaswag_acc_norm against the run's <metrics stem>.hellaswag.jsonl
  check_tensorboard.py EVENT_DIR --metrics METRICS.jsonl
      checks an existing run

Needs `pip install tensorboard`. Exit code 0 on success, 1 with a message on a mismatch.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

EXPECTED_TAGS = [
    "train/loss", "train/lr", "train/grad_norm", "val/loss", "perf/tok_per_s", "perf/tflops",
    "perf/mfu", "perf/dt_ms", "phase/data_wait_ms", "phase/h2d_ms", "phase/compute_ms",
    "phase/comm_ms", "phase/optimizer_ms", "phase/ckpt_stall_ms", "phase/log_ms", "phase/eval_ms", "phase/other_ms",
]
# JSONL field for each tag whose value must match step by step.
MATCH = {"train/loss": "loss", "train/lr": "lr", "train/grad_norm": "grad_norm",
         "val/loss": "val_loss", "perf/tok_per_s": "tok_per_s", "perf/mfu": "mfu",
         "perf/dt_ms": "dt_ms", "phase/compute_ms": "compute_ms", "phase/comm_ms": "comm_ms",
         "phase/data_wait_ms": "data_wait_ms", "phase/ckpt_stall_ms": "ckpt_stall_ms"}


def fail(msg):
    print("check_tensorboard: FAIL: " + msg)
    sys.exit(1)


def check(event_dir, metrics_path):
    from tensorboard.backend.event_processing import event_accumulator

    files = [f for f in os.listdir(event_dir) if f.startswith("events.out.tfevents.")]
    if len(files) != 1:
        fail(f"expected one event file in {event_dir}, found {files}")
    acc = event_accumulator.EventAccumulator(event_dir, size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    missing = [t for t in EXPECTED_TAGS if t not in tags]
    if missing:
        fail(f"tags missing from the event file: {missing} (found {sorted(tags)})")

    with open(metrics_path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines:
        fail(f"{metrics_path} has no lines")
    checked = 0
    for tag, field in MATCH.items():
        events = {e.step: e.value for e in acc.Scalars(tag)}
        want = {j["step"]: j[field] for j in lines if j.get(field) is not None}
        if set(events) != set(want):
            fail(f"{tag}: steps {sorted(events)} in TensorBoard, {sorted(want)} in the metrics")
        for step, value in want.items():
            # Scalars are float32 in the event file; the JSONL rounds (tok/s to 0.1, ms to 0.001,
            # the rest to 6 significant digits).
            abs_tol = 0.05 if field == "tok_per_s" else 6e-4 if field.endswith("_ms") else 1e-6
            if not math.isclose(events[step], value, rel_tol=2e-5, abs_tol=abs_tol):
                fail(f"{tag} at step {step}: TensorBoard {events[step]} vs metrics {value}")
            checked += 1
    steps = sorted(e.step for e in acc.Scalars("train/loss"))
    print(f"check_tensorboard: OK: {len(tags)} scalar tags, steps {steps[0]}..{steps[-1]}, "
          f"{checked} values match {os.path.basename(metrics_path)}")


def check_hellaswag(event_dir, metrics_path):
    from tensorboard.backend.event_processing import event_accumulator

    log = os.path.splitext(metrics_path)[0] + ".hellaswag.jsonl"
    with open(log) as f:
        points = [json.loads(line) for line in f if line.strip()]
    if not points:
        fail(f"{log} has no lines")
    acc = event_accumulator.EventAccumulator(os.path.join(event_dir, "hellaswag"),
                                             size_guidance={"scalars": 0})
    acc.Reload()
    for tag, field in (("eval/hellaswag_acc", "acc"), ("eval/hellaswag_acc_norm", "acc_norm")):
        if tag not in acc.Tags()["scalars"]:
            fail(f"{tag} missing from {event_dir}/hellaswag (found {acc.Tags()['scalars']})")
        events = {e.step: e.value for e in acc.Scalars(tag)}
        want = {p["step"]: p[field] for p in points}
        if set(events) != set(want):
            fail(f"{tag}: steps {sorted(events)} in TensorBoard, {sorted(want)} in {log}")
        for step, value in want.items():
            if not math.isclose(events[step], value, rel_tol=1e-6, abs_tol=1e-7):
                fail(f"{tag} at step {step}: TensorBoard {events[step]} vs log {value}")
    print(f"check_tensorboard: OK: HellaSwag at steps {sorted(p['step'] for p in points)} matches "
          f"{os.path.basename(log)}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("event_dir", nargs="?")
    p.add_argument("--metrics")
    p.add_argument("--gpt-fineweb", help="run this gpt_fineweb binary first")
    p.add_argument("--hellaswag", help="with --gpt-fineweb: score this HellaSwag file every 3 steps")
    a = p.parse_args()
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        fail("the tensorboard package is not installed (pip install tensorboard)")
    if a.gpt_fineweb:
        with tempfile.TemporaryDirectory(prefix="trainkit-tb-check-") as tmp:
            event_dir = os.path.join(tmp, "tb")
            metrics = os.path.join(tmp, "metrics.jsonl")
            cmd = [a.gpt_fineweb, "--steps", "6", "--eval-every", "3", "--eval-batches", "2",
                   "--batch", "4", "--seq", "32", "--no-progress", "--metrics", metrics,
                   "--tensorboard", event_dir]
            if a.hellaswag:
                cmd += ["--hellaswag", a.hellaswag, "--hellaswag-every", "3"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
            check(event_dir, metrics)
            if a.hellaswag:
                check_hellaswag(event_dir, metrics)
    else:
        if not a.event_dir or not a.metrics:
            p.error("give EVENT_DIR --metrics FILE, or --gpt-fineweb BINARY")
        check(a.event_dir, a.metrics)


if __name__ == "__main__":
    main()
