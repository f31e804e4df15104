#!/usr/bin/env python3
"""SIGKILL soak of gpt_fineweb's asynchronous checkpointer: kill, resume, repeat, compare.

A small CPU run (d2, B=2, T=16, one thread, random data order, an async checkpoint of its 80 MB
state every step, so a background write is in flight much of the time: about half the kills land
inside one) is started, killed with
SIGKILL after a random delay, resumed from its checkpoint directory, and so on --kills times;
then the last resume runs to the final step. Checked:

  1. every resume succeeds: each run starts from the newest checkpoint in the directory, which
     `gpt_fineweb verify` finds valid with all others ("resumed from checkpoint at step N" and its
     first metrics line is N + 1); the only warnings are the removal of killed saves' temporaries;
     the last run exits 0 at the final step;
  2. every metrics line any run wrote (loss, lr, grad_norm, val_loss, as the exact strings) equals
     the uninterrupted run's line for that step, and the exported model and the final
     checkpoint's tensors.bin are byte-identical to the uninterrupted run's.

The delays come from --seed (random and printed when not given), so a failure can be replayed:
    gpt_fineweb_sigkill_soak.py --exe build/examples/gpt_fineweb/gpt_fineweb --work /tmp/soak \
        --kills 50 --seed SEED
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

COMPARED = ("loss", "lr", "grad_norm", "val_loss")
RESUMED = re.compile(r"resumed from checkpoint at step (\d+)")
# The one warning a resume after SIGKILL may print: a killed save's (or prune's) temporary removed.
ALLOWED_WARNING = re.compile(r"warning: removed \.tmp\.\S+ left in .* interrupted save")


def raw_fields(line):
    """The compared values of one metrics line as the exact strings the run printed."""
    fields = {}
    for key in ("step",) + COMPARED:
        m = re.search(r'"%s":([^,}]+)' % key, line)
        if m:
            fields[key] = m.group(1)
    return fields


def read_metrics(path):
    """Complete lines only: a SIGKILL can cut the last one off."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    rows = []
    for line in text.split("\n")[:-1]:  # the piece after the last newline is incomplete
        json.loads(line)  # every complete line must be valid JSON
        if line.startswith('{"run"'):
            continue  # the run header a fresh file opens with: not a step
        rows.append(raw_fields(line))
    return rows


def newest_checkpoint(ckpt):
    if not os.path.isdir(ckpt):
        return 0
    steps = [int(n[5:]) for n in os.listdir(ckpt) if re.fullmatch(r"step_\d{8}", n)]
    return max(steps, default=0)


class Soak:
    def __init__(self, args):
        self.args = args
        self.failures = []

    def fail(self, msg):
        self.failures.append(msg)
        print("FAIL: " + msg, flush=True)

    def command(self, ckpt, metrics, export=None, resume=False):
        cmd = [self.args.exe, "--batch", "2", "--seq", "16", "--steps", str(self.args.steps),
               "--order", "random", "--eval-every", "0", "--eval-batches", "2", "--threads", "1",
               "--no-progress", "--log-every", "1000000", "--ckpt-mode", "async",
               "--ckpt-dir", ckpt, "--ckpt-every", "1", "--ckpt-keep", "3", "--metrics", metrics]
        if export:
            cmd += ["--export", export]
        if resume:
            cmd.append("--resume")
        return cmd

    def spawn(self, cmd, name):
        out = open(os.path.join(self.args.work, name + ".out"), "w")
        err = open(os.path.join(self.args.work, name + ".err"), "w")
        env = dict(os.environ, OMP_NUM_THREADS="1")
        return subprocess.Popen(cmd, stdout=out, stderr=err, env=env), out, err

    def verify_pick(self, ckpt, run):
        """The checkpoint resume must take: the newest, and every listed one must verify."""
        newest = newest_checkpoint(ckpt)
        if newest == 0:
            return 0
        v = subprocess.run([self.args.exe, "verify", ckpt], capture_output=True, text=True)
        if v.returncode != 0 or "INVALID" in v.stdout:
            self.fail("run %d: verify %s after a kill (exit %d):\n%s%s"
                      % (run, ckpt, v.returncode, v.stdout, v.stderr))
        if "resume would use step_%08d" % newest not in v.stdout:
            self.fail("run %d: verify does not pick the newest checkpoint step_%08d:\n%s"
                      % (run, newest, v.stdout))
        return newest

    def check_run(self, run, name, metrics, expected_start, baseline):
        with open(os.path.join(self.args.work, name + ".out")) as f:
            out = f.read()
        with open(os.path.join(self.args.work, name + ".err")) as f:
            err = f.read()
        m = RESUMED.search(out)
        resumed = int(m.group(1)) if m else 0
        # A killed run may not have got as far as printing it; a run that got to training has.
        rows = read_metrics(metrics)
        if (m or rows) and resumed != expected_start:
            self.fail("run %d resumed from step %d, the newest complete checkpoint is %d"
                      % (run, resumed, expected_start))
        for line in err.splitlines():
            self.fail("run %d: stderr: %s" % (run, line))
        for line in out.splitlines():
            if line.startswith("warning:") and not ALLOWED_WARNING.fullmatch(line):
                self.fail("run %d: unexpected warning: %s" % (run, line))
        for i, row in enumerate(rows):
            step = int(row["step"])
            if step != expected_start + 1 + i:
                self.fail("run %d: metrics line %d is step %d, expected %d"
                          % (run, i, step, expected_start + 1 + i))
                break
            if row != baseline[step - 1]:
                self.fail("run %d, step %d: %s differs from the uninterrupted run's %s"
                          % (run, step, row, baseline[step - 1]))
        return rows

    def run(self):
        a = self.args
        started = time.monotonic()
        rng = random.Random(a.seed)
        print("sigkill soak: seed %d, %d kills, %d steps, delays %.2f-%.2f s"
              % (a.seed, a.kills, a.steps, a.min_delay, a.max_delay), flush=True)

        base_ckpt = os.path.join(a.work, "base_ckpt")
        base_metrics = os.path.join(a.work, "base.jsonl")
        base_model = os.path.join(a.work, "base_model.bin")
        p, *files = self.spawn(self.command(base_ckpt, base_metrics, base_model), "base")
        rc = p.wait()
        for f in files:
            f.close()
        baseline = read_metrics(base_metrics)
        if rc != 0 or len(baseline) != a.steps:
            self.fail("the uninterrupted run exited %d with %d of %d steps (see %s/base.err)"
                      % (rc, len(baseline), a.steps, a.work))
            return False
        print("uninterrupted run: %d steps in %.1f s" % (a.steps, time.monotonic() - started),
              flush=True)

        ckpt = os.path.join(a.work, "ckpt")
        model = os.path.join(a.work, "model.bin")
        kills = 0
        run = 0
        inside_a_save = 0
        while True:
            start = self.verify_pick(ckpt, run)
            if os.path.isdir(ckpt) and any(n.startswith(".tmp.") for n in os.listdir(ckpt)):
                inside_a_save += 1  # the last kill cut a background write (or a prune) short
            name = "run%03d" % run
            metrics = os.path.join(a.work, name + ".jsonl")
            to_kill = kills < a.kills
            delay = rng.uniform(a.min_delay, a.max_delay) if to_kill else 0.0
            p, *files = self.spawn(self.command(ckpt, metrics, model, resume=run > 0), name)
            if to_kill:
                time.sleep(delay)
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGKILL)
            rc = p.wait()
            for f in files:
                f.close()
            rows = self.check_run(run, name, metrics, start, baseline)
            last_step = int(rows[-1]["step"]) if rows else start
            if rc == -signal.SIGKILL:
                kills += 1
                print("run %3d: from step %3d, killed after %.3f s (%d steps logged)"
                      % (run, start, delay, last_step - start), flush=True)
            elif rc == 0:
                print("run %3d: from step %3d, finished (exit 0)" % (run, start), flush=True)
                break
            else:
                self.fail("run %d exited %d (see %s/%s.err)" % (run, rc, a.work, name))
                return False
            run += 1
            if self.failures:
                return False

        if kills < a.kills:
            self.fail("the run reached its final step after %d of %d kills: raise --steps"
                      % (kills, a.kills))
        if last_step != a.steps:
            self.fail("the last run ended at step %d, not %d" % (last_step, a.steps))
        with open(model, "rb") as f1, open(base_model, "rb") as f2:
            if f1.read() != f2.read():
                self.fail("the exported model differs from the uninterrupted run's")
        final = "step_%08d/tensors.bin" % a.steps
        with open(os.path.join(ckpt, final), "rb") as f1, \
                open(os.path.join(base_ckpt, final), "rb") as f2:
            if f1.read() != f2.read():
                self.fail("the final checkpoint's tensors differ from the uninterrupted run's")
        if not self.failures:
            print("sigkill soak: %d/%d kills resumed (%d inside a save), final losses and model "
                  "bit-identical (%d runs, final loss %s, seed %d, %.1f s)"
                  % (kills, a.kills, inside_a_save, run + 1, baseline[-1]["loss"], a.seed,
                     time.monotonic() - started), flush=True)
        return not self.failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", required=True, help="gpt_fineweb")
    ap.add_argument("--work", required=True, help="scratch directory (emptied first)")
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--steps", type=int, default=0, help="default: 5 * kills + 10")
    ap.add_argument("--seed", type=int, default=None, help="default: random, printed")
    ap.add_argument("--min-delay", type=float, default=0.05, help="seconds after the start")
    ap.add_argument("--max-delay", type=float, default=2.0)
    ap.add_argument("--keep", action="store_true", help="keep --work after a pass")
    args = ap.parse_args()
    if args.steps == 0:
        args.steps = 5 * args.kills + 10
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    ok = Soak(args).run()
    if ok and not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)
    if not ok:
        print("replay: %s --exe %s --work %s --kills %d --steps %d --seed %d"
              % (sys.argv[0], args.exe, args.work, args.kills, args.steps, args.seed))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
