#!/usr/bin/env python3
"""gpt_fineweb --reducer mpi under mpiexec: equal to one process, stops together, survives a kill.

Small CPU runs (d2, B=2, T=32, one thread per rank, the embedded corpus) in three modes:

  equal    2 ranks x 1 micro-batch and 1 process x 2 micro-batches (--total-batch-tokens 128):
           every metrics line (loss, lr, grad_norm, val_loss, tokens as the exact strings) and the
           exported model file are identical; one metrics line and one console line per step (rank
           0 alone writes them).
  sigterm  SIGTERM to rank 1 alone: the job exits 0, both ranks stopped after the same step (a
           rank that stopped alone would leave the other waiting in its all-reduce: the job would
           time out), and the final checkpoint of that step was written once, by rank 0. The
           same for SIGUSR1 to mpiexec, which passes it on to every rank.
  errors   an error on one rank (rank 1 alone is given a corrupt --data shard) and a divergence
           (every rank's averaged loss turns NaN at the same step): the job ends, never hangs,
           with exit code 2 and the message naming the rank.
  zero1    the same as equal with --reducer mpi-zero1 (ZeRO-1: gradients reduce-scattered, each
           rank updates its shard, parameters all-gathered): metrics lines and exported model
           identical to one process's, and the optimizer state rank 0 reports is half of one
           process's 2 x 4 bytes per parameter (to one norm chunk, 2 x 4 x 32768 bytes).
  muon     --optimizer muon, whose 2-rank form is sharded_muon_cpu (the ranks split the matrices
           and all-gather them): as equal, for GPT-2 (metrics and exported llm.c file) and for
           Llama (metrics and --export-hf's model.safetensors); then its sharded checkpoints as
           zero1's (2 ranks resume bit for bit, one process with muon_cpu resumes them).
  normuon  --optimizer muon --muon-normuon (NorMuon's second moment sharded with the momentum):
           as muon for GPT-2, its sharded checkpoints resumed bit for bit on 2 ranks; one process
           (muon_cpu) and 2 ranks without --muon-normuon refuse them (exit 2, naming what misses).
  sigkill  SIGKILL to rank 1 mid-run: mpiexec ends the job within seconds with a non-zero code; a
           2-rank --resume continues from the newest complete checkpoint and its metrics lines
           and exported model equal an uninterrupted 2-rank run's.

    gpt_fineweb_mpi.py --exe build/examples/gpt_fineweb/gpt_fineweb --mpiexec mpiexec \\
        --mode equal --work /tmp/mpi_test
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

COMPARED = ("step", "loss", "lr", "grad_norm", "val_loss", "tokens")
TIMEOUT_S = 120  # a hang (ranks disagreeing on a collective) ends here


def raw_fields(line):
    fields = {}
    for key in COMPARED:
        m = re.search(r'"%s":([^,}]+)' % key, line)
        if m:
            fields[key] = m.group(1)
    return fields


def read_metrics(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        # the run header line ({"run":{...}}) opens a fresh file: not a step
        return [raw_fields(line) for line in f.read().split("\n")[:-1]
                if not line.startswith('{"run"')]


def checkpoints(ckpt):
    if not os.path.isdir(ckpt):
        return []
    return sorted(int(n[5:]) for n in os.listdir(ckpt) if re.fullmatch(r"step_\d{8}", n))


class Runner:
    def __init__(self, args):
        self.args = args
        self.failures = []
        self.reducer = "mpi"
        self.extra = []  # flags every run of the mode adds (--optimizer muon ...)
        self.label = "ZeRO-1"  # what zero1_checkpoints' messages call the sharded run
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def fail(self, msg):
        self.failures.append(msg)
        print("FAIL: " + msg, flush=True)

    def flags(self, name, steps, extra=(), outputs=None):
        """The run's flags; its metrics and exported model are <outputs or name>.jsonl/.bin."""
        w = self.args.work
        out = os.path.join(w, outputs or name)
        export = (["--export-hf", out + ".hf"] if "llama" in self.extra
                  else ["--export", out + ".bin"])
        return ["--model", "d2", "--batch", "2", "--seq", "32", "--steps", str(steps),
                "--total-batch-tokens", "128", "--eval-every", "4", "--eval-batches", "3",
                "--threads", "1", "--no-progress", "--metrics", out + ".jsonl"] + export + \
            self.extra + list(extra)

    def command(self, ranks, flags):
        if ranks == 0:  # one process, no MPI
            return [self.args.exe] + flags
        # Each rank writes its pid, so a test can signal one rank alone.
        pid_file = os.path.join(self.args.work, "pid.$OMPI_COMM_WORLD_RANK")
        return ([self.args.mpiexec, "-n", str(ranks), "--oversubscribe", "sh", "-c",
                 'echo $$ > %s; exec "$0" "$@"' % pid_file, self.args.exe, "--reducer",
                 self.reducer]
                + flags)

    def spawn(self, ranks, name, flags):
        for r in range(4):
            p = os.path.join(self.args.work, "pid.%d" % r)
            if os.path.exists(p):
                os.remove(p)
        out = open(os.path.join(self.args.work, name + ".out"), "w")
        err = open(os.path.join(self.args.work, name + ".err"), "w")
        return subprocess.Popen(self.command(ranks, flags), stdout=out, stderr=err, env=self.env)

    def finish(self, proc, name, expect_rc=0):
        try:
            rc = proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.fail("%s did not end within %d s (a rank hangs)" % (name, TIMEOUT_S))
            return None
        if expect_rc is not None and rc != expect_rc:
            self.fail("%s exited %d, expected %d:\n%s" % (name, rc, expect_rc, self.text(name, "err")))
        return rc

    def text(self, name, kind):
        with open(os.path.join(self.args.work, "%s.%s" % (name, kind))) as f:
            return f.read()

    def run(self, ranks, name, flags, expect_rc=0):
        self.finish(self.spawn(ranks, name, flags), name, expect_rc)

    def same_model(self, a, b):
        """The exported models of runs a and b are the same bytes (llm.c file or HF weights)."""
        if "llama" in self.extra:
            return self.same_file(os.path.join(a + ".hf", "model.safetensors"),
                                  os.path.join(b + ".hf", "model.safetensors"))
        return self.same_file(a + ".bin", b + ".bin")

    def same_file(self, a, b):
        with open(os.path.join(self.args.work, a), "rb") as f, \
                open(os.path.join(self.args.work, b), "rb") as g:
            return f.read() == g.read()

    def wait_for_lines(self, proc, metrics, n):
        deadline = time.monotonic() + TIMEOUT_S
        while len(read_metrics(metrics)) < n:
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def rank_pid(self, r):
        with open(os.path.join(self.args.work, "pid.%d" % r)) as f:
            return int(f.read())

    def equal(self):
        steps = 8
        self.run(0, "one", self.flags("one", steps))
        self.run(2, "two", self.flags("two", steps))
        one, two = (read_metrics(os.path.join(self.args.work, n + ".jsonl")) for n in ("one", "two"))
        if len(one) != steps or len(two) != steps:
            self.fail("metrics lines: one process %d, two ranks %d, expected %d each"
                      % (len(one), len(two), steps))
        for a, b in zip(one, two):
            if a != b:
                self.fail("step %s: one process %s, two ranks %s" % (a.get("step"), a, b))
        if not any("val_loss" in a for a in one):
            self.fail("no validation loss was compared")
        if not self.same_model("one", "two"):
            self.fail("the exported models differ")
        console = [l for l in self.text("two", "out").splitlines() if l.startswith("step ")]
        if len(console) != steps:
            self.fail("2 ranks printed %d step lines, expected %d (rank 0 alone)"
                      % (len(console), steps))
        if "2 ranks" not in self.text("two", "out"):
            self.fail("the 2-rank run does not say it has 2 ranks")

    def zero1(self):
        self.reducer = "mpi-zero1"
        self.equal()
        out = self.text("two", "out")
        params = re.search(r"\| (\d+) parameters", out)
        state = re.search(r"optimizer state ([0-9.]+) MiB per rank", out)
        if not params or not state:
            self.fail("the 2-rank ZeRO-1 run does not report its parameters and optimizer state")
            return
        one_process = 2 * 4 * int(params.group(1))
        per_rank = float(state.group(1)) * (1 << 20)
        if abs(per_rank - one_process / 2) > 2 * 4 * 32768 + 0.01 * (1 << 20):
            self.fail("ZeRO-1 optimizer state %.0f bytes per rank, one process %d"
                      % (per_rank, one_process))
        self.zero1_checkpoints()

    def zero1_checkpoints(self, one_process=True):
        """Sharded checkpoints: 2 ranks of a sharded optimizer (ZeRO-1's, or Muon's) save every 4
        steps (each rank its shard); the step 8 checkpoint is removed and 2 ranks resume from step
        4: the same metrics and model bit for bit as the uninterrupted run (two's); one process
        (adamw_cpu, muon_cpu) resumes the same checkpoint, resharded, to 1e-5."""
        steps = 8
        label = self.label
        ckpt = os.path.join(self.args.work, "zckpt")
        ckpt_flags = ["--ckpt-mode", "sync", "--ckpt-dir", ckpt, "--ckpt-every", "4"]
        self.run(2, "zsave", self.flags("zsave", steps, ckpt_flags))
        if checkpoints(ckpt) != [4, 8]:
            self.fail("%s checkpoints %s, expected [4, 8]" % (label, checkpoints(ckpt)))
            return
        shards = sorted(n for n in os.listdir(os.path.join(ckpt, "step_00000004"))
                        if n.startswith("shard_"))
        if shards != ["shard_00000", "shard_00001"]:
            self.fail("the step 4 checkpoint holds shards %s, expected one per rank" % shards)
        shutil.rmtree(os.path.join(ckpt, "step_00000008"))
        resume = ckpt_flags + ["--resume"]
        self.run(2, "zresume", self.flags("zresume", steps, resume))
        if "resumed from checkpoint at step 4" not in self.text("zresume", "out"):
            self.fail("2 %s ranks did not resume from step 4:\n%s"
                      % (label, self.text("zresume", "out")))
        ref = read_metrics(os.path.join(self.args.work, "two.jsonl"))
        resumed = read_metrics(os.path.join(self.args.work, "zresume.jsonl"))
        if [int(r["step"]) for r in resumed] != list(range(5, steps + 1)):
            self.fail("resumed %s metrics steps %s" % (label, [r["step"] for r in resumed]))
        for r in resumed:
            if r != ref[int(r["step"]) - 1]:
                self.fail("%s step %s after resume: %s, uninterrupted %s"
                          % (label, r["step"], r, ref[int(r["step"]) - 1]))
        if not self.same_model("two", "zresume"):
            self.fail("the resumed %s model differs from the uninterrupted run's" % label)
        shutil.rmtree(os.path.join(ckpt, "step_00000008"), ignore_errors=True)
        if not one_process:
            return
        self.run(0, "zone", self.flags("zone", steps, resume))
        one = read_metrics(os.path.join(self.args.work, "zone.jsonl"))
        if [int(r["step"]) for r in one] != list(range(5, steps + 1)):
            self.fail("one process resuming a 2-rank %s checkpoint ran steps %s"
                      % (label, [r["step"] for r in one]))
        for r in one:
            a, b = float(r["loss"]), float(ref[int(r["step"]) - 1]["loss"])
            if abs(a - b) > 1e-5 * abs(b):
                self.fail("step %s: one process from the %s checkpoint %s, 2 ranks %s"
                          % (r["step"], label, a, b))

    def muon(self):
        self.label = "sharded Muon"
        for arch in ("gpt2", "llama"):
            self.extra = ["--optimizer", "muon", "--arch", arch]
            self.equal()
            if "optimizer state" not in self.text("two", "out"):
                self.fail("%s: the 2-rank Muon run does not report its sharded state" % arch)
        self.zero1_checkpoints()

    def normuon(self):
        self.label = "sharded NorMuon"
        self.extra = ["--optimizer", "muon", "--arch", "gpt2", "--muon-normuon"]
        self.equal()
        self.zero1_checkpoints(one_process=False)
        ckpt = os.path.join(self.args.work, "zckpt")
        resume = ["--ckpt-mode", "sync", "--ckpt-dir", ckpt, "--ckpt-every", "4", "--resume"]
        # muon_cpu keeps its second moment as one tensor of lines, which the sharded checkpoint
        # does not hold: one process refuses it rather than resuming with a zero second moment.
        self.run(0, "none", self.flags("none", 8, resume), expect_rc=2)
        if "optim.muon.second_moment" not in self.text("none", "err"):
            self.fail("one process resuming a sharded NorMuon checkpoint: %s"
                      % self.text("none", "err"))
        # Without --muon-normuon the checkpoint's second moment would be dropped: refused.
        self.extra = ["--optimizer", "muon", "--arch", "gpt2"]
        self.run(2, "nplain", self.flags("nplain", 8, resume), expect_rc=2)
        if "normuon" not in self.text("nplain", "err").lower():
            self.fail("2 ranks without --muon-normuon resuming a NorMuon checkpoint: %s"
                      % self.text("nplain", "err"))

    def sigterm(self):
        self.stop_by("term", lambda proc: os.kill(self.rank_pid(1), signal.SIGTERM))
        self.stop_by("usr1", lambda proc: proc.send_signal(signal.SIGUSR1))

    def stop_by(self, name, send):
        ckpt = os.path.join(self.args.work, name + "_ckpt")
        metrics = os.path.join(self.args.work, name + ".jsonl")
        proc = self.spawn(2, name, self.flags(name, 200, ["--ckpt-mode", "async",
                                                           "--ckpt-dir", ckpt]))
        if not self.wait_for_lines(proc, metrics, 3):
            self.fail("%s: the run ended or stalled before step 3" % name)
        send(proc)
        if self.finish(proc, name) is None:
            return
        rows = read_metrics(metrics)
        out = self.text(name, "out")
        m = re.search(r"stopped by signal at step (\d+)", out)
        if not m:
            self.fail("%s: rank 0 does not report the stop:\n%s" % (name, out))
            return
        stop = int(m.group(1))
        if not rows or int(rows[-1]["step"]) != stop or stop >= 200:
            self.fail("%s: stopped at step %d, the last metrics line is %s"
                      % (name, stop, rows[-1:]))
        if checkpoints(ckpt) != [stop]:
            self.fail("%s: checkpoints %s, expected exactly step %d"
                      % (name, checkpoints(ckpt), stop))
        lines = len(re.findall(r"^step .*", out, re.M))
        if lines != stop:
            self.fail("%s: %d console step lines for %d steps" % (name, lines, stop))

    def errors(self):
        w = self.args.work
        bad = os.path.join(w, "corrupt_000.bin")
        with open(bad, "wb") as f:
            f.write(b"not a shard" * 1000)
        flags = self.flags("err", 6)
        # MPMD: rank 0 trains on the embedded corpus, rank 1 alone gets the corrupt shard.
        cmd = [self.args.mpiexec, "--oversubscribe", "-n", "1", self.args.exe, "--reducer", "mpi"]
        cmd += flags + [":", "-n", "1", self.args.exe, "--reducer", "mpi"] + flags + ["--data", bad]
        out = open(os.path.join(w, "err.out"), "w")
        err = open(os.path.join(w, "err.err"), "w")
        started = time.monotonic()
        self.finish(subprocess.Popen(cmd, stdout=out, stderr=err, env=self.env), "err", 2)
        print("an error on rank 1: the job ended after %.2f s" % (time.monotonic() - started))
        if not re.search(r"gpt_fineweb: rank 1 of 2: error: .*corrupt_000\.bin", self.text("err", "err")):
            self.fail("rank 1's error is not reported naming the rank and the file:\n"
                      + self.text("err", "err"))
        self.run(2, "diverge", self.flags("diverge", 30, ["--lr", "1e4", "--grad-clip", "0"]), 2)
        text = self.text("diverge", "err")
        for r in (0, 1):
            if not re.search(r"rank %d of 2: fatal: training diverged: loss is \S*nan at step" % r,
                             text):
                self.fail("rank %d does not report the divergence:\n%s" % (r, text))

    def sigkill(self):
        steps = 12
        self.run(2, "ref", self.flags("ref", steps))
        ref = read_metrics(os.path.join(self.args.work, "ref.jsonl"))
        ckpt = os.path.join(self.args.work, "ckpt")
        metrics = os.path.join(self.args.work, "kill.jsonl")
        ckpt_flags = ["--ckpt-mode", "sync", "--ckpt-dir", ckpt, "--ckpt-every", "2"]
        flags = self.flags("kill", steps, ckpt_flags)
        proc = self.spawn(2, "kill", flags)
        if not self.wait_for_lines(proc, metrics, 5):
            self.fail("the run ended or stalled before step 5")
        os.kill(self.rank_pid(1), signal.SIGKILL)
        killed = time.monotonic()
        rc = self.finish(proc, "kill", expect_rc=None)
        took = time.monotonic() - killed
        if rc == 0:
            self.fail("the job exited 0 after one rank was killed")
        if took > 10:
            self.fail("the job took %.1f s to end after the kill" % took)
        print("SIGKILL of rank 1: the job ended %.2f s later (exit %s)" % (took, rc), flush=True)
        newest = max(checkpoints(ckpt), default=0)
        if newest == 0 or newest >= steps:
            self.fail("newest checkpoint after the kill: %d" % newest)
        self.run(2, "resume", self.flags("resume", steps, ckpt_flags + ["--resume"], "resumed"))
        if ("resumed from checkpoint at step %d" % newest) not in self.text("resume", "out"):
            self.fail("the resume did not start from step %d:\n%s"
                      % (newest, self.text("resume", "out")))
        resumed = read_metrics(os.path.join(self.args.work, "resumed.jsonl"))
        if [int(r["step"]) for r in resumed] != list(range(newest + 1, steps + 1)):
            self.fail("resumed metrics steps %s" % [r["step"] for r in resumed])
        for r in resumed:
            if r != ref[int(r["step"]) - 1]:
                self.fail("step %s after resume: %s, uninterrupted %s"
                          % (r["step"], r, ref[int(r["step"]) - 1]))
        if not os.path.exists(os.path.join(self.args.work, "resumed.bin")):
            self.fail("the resumed run exported no model")
        elif not self.same_file("ref.bin", "resumed.bin"):
            self.fail("the resumed run's model differs from the uninterrupted run's")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--mode", choices=("equal", "zero1", "sigterm", "sigkill", "errors", "muon",
                                       "normuon"),
                    required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    r = Runner(args)
    getattr(r, args.mode)()
    if r.failures:
        print("gpt_fineweb mpi %s: %d failure(s)" % (args.mode, len(r.failures)))
        return 1
    print("gpt_fineweb mpi %s: passed" % args.mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
