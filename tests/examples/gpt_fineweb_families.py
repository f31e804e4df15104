#!/usr/bin/env python3
"""gpt_fineweb --arch llama and --optimizer muon, run the way a user runs them.

Small CPU runs (d2, one thread, the embedded corpus unless a mode writes its own shard):

  llama     a Llama d2 run trains (the last losses well below the first); its shape flags reach
            the model (the "model ..." line of --kv-heads 2 --mlp relu2 --qk-norm
            --tie-embeddings); TensorBoard, `report`, HellaSwag during training (and `eval
            --init-from-hf --arch llama` of its export, the same score) and --sample from its
            checkpoint work as for GPT-2.
  muon      --optimizer muon trains both families (losses fall; the checkpoint holds Muon's
            momentum, so Muon ran, and the losses differ from AdamW's, so the flag was not
            ignored); --muon-lr reaches the run (another rate, other losses).
  refusals  one line on stderr naming the flag and exit 2: --resume from a checkpoint of another
            --arch, --optimizer, Llama shape or --device (a CPU Muon checkpoint on CUDA); a Llama
            flag with gpt2, a Muon flag with adamw; --device cuda with llama, what its CUDA model
            lacks (--attention naive, --cuda-graph); muon on CUDA runs or lacks a device; llm.c
            files with llama; --export-hf of a variant HF cannot hold; a preset of the other
            family; Muon's sharded state with async checkpoints (--reducer mpi and nccl) or a
            ZeRO-1 reducer.
  recipe    --recipe speedrun trains a d2 Llama (losses fall) with every model part on (the "model
            ..." line), says what it set, keeps an explicit flag; with --arch gpt2, with
            --export-hf and (its model parts) with --device cuda it is refused naming the flag.
  hf        a Llama trained by the program and written with --export-hf loads back: an independent
            numpy Llama (tests/model/hf_llama_check.py, numpy + safetensors only) computes from the
            folder the validation loss the program printed for the same tokens, to 1e-4, and
            --init-from-hf of it then --export-hf again writes the same bytes. Untied and tied.

    gpt_fineweb_families.py --exe build/examples/gpt_fineweb/gpt_fineweb --mode llama \\
        --work /tmp/families --repo .
"""

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys

SMALL = ["--model", "d2", "--batch", "4", "--seq", "32", "--threads", "1", "--no-progress",
         "--eval-every", "0"]


def read_losses(path):
    with open(path, encoding="utf-8") as f:
        # the run header line ({"run":{...}}) opens a fresh file: not a step
        return [json.loads(line)["loss"] for line in f
                if line.strip() and not line.startswith('{"run"')]


class Runner:
    def __init__(self, args):
        self.args = args
        self.failures = []
        self.env = dict(os.environ, OMP_NUM_THREADS="1")

    def fail(self, msg):
        self.failures.append(msg)
        print("FAIL: " + msg, flush=True)

    def path(self, name):
        return os.path.join(self.args.work, name)

    def run(self, flags, expect_rc=0, stderr_regex=None):
        """Runs the program; returns its stdout. Exit code and, for exit 2, the one stderr line
        are checked."""
        p = subprocess.run([self.args.exe] + flags, capture_output=True, text=True, env=self.env,
                           cwd=self.args.work, timeout=600)
        shown = " ".join(flags)
        if p.returncode != expect_rc:
            self.fail("`%s`: exit %d, expected %d\n%s" % (shown, p.returncode, expect_rc,
                                                         p.stderr.strip()))
        elif expect_rc == 2:
            err = p.stderr.strip()
            if "\n" in err:
                self.fail("`%s`: more than one line on stderr:\n%s" % (shown, err))
            if stderr_regex and not re.search(stderr_regex, err):
                self.fail("`%s`: stderr '%s' does not match '%s'" % (shown, err, stderr_regex))
            if re.search(r"_config|lr_schedule", err):
                self.fail("`%s`: the message names a config field: %s" % (shown, err))
        return p.stdout

    def trains(self, name, flags, steps=20):
        """Trains `steps` steps; checks the loss falls (mean of the last 3 at least 1 nat below
        the first) and returns the losses."""
        metrics = self.path(name + ".jsonl")
        out = self.run(SMALL + ["--steps", str(steps), "--warmup", "3", "--metrics", metrics]
                       + flags)
        if not os.path.exists(metrics):
            self.fail("%s wrote no metrics" % name)
            return [], out
        losses = read_losses(metrics)
        if len(losses) != steps:
            self.fail("%s: %d metrics lines, expected %d" % (name, len(losses), steps))
            return losses, out
        last = sum(losses[-3:]) / 3
        print("%s: loss %.4f -> %.4f (last 3 mean)" % (name, losses[0], last), flush=True)
        if not last < losses[0] - 1.0:
            self.fail("%s did not learn: first loss %.4f, last three %s"
                      % (name, losses[0], losses[-3:]))
        return losses, out

    # ---- modes ----

    def llama(self):
        fixture = os.path.join(self.args.repo, "tests", "eval", "hellaswag_fixture.jsonl")
        tb = self.path("tb")
        ckpt = self.path("llama_ckpt")
        _, out = self.trains("llama", ["--arch", "llama", "--lr", "3e-3", "--tensorboard", tb,
                                       "--ckpt-mode", "sync", "--ckpt-dir", ckpt,
                                       "--hellaswag", fixture, "--hellaswag-every", "10",
                                       "--export-hf", self.path("llama_hf")])
        if "model L=2 H=2 KV=1 C=128 F=384" not in out or "mlp=swiglu untied" not in out:
            self.fail("the llama d2 run is not the preset's model:\n%s" % out[:400])
        if len(re.findall(r"hellaswag at step (?:10|20): 3 examples", out)) != 2:
            self.fail("HellaSwag during a llama run was not scored at steps 10 and 20:\n%s" % out)
        # `eval` of the exported folder scores what training scored after its last step.
        last = re.search(r"hellaswag at step 20: ([^\n]*)", out)
        scored = self.run(["eval", "--hellaswag", fixture, "--init-from-hf", self.path("llama_hf"),
                           "--arch", "llama"])
        if not last or scored != "hellaswag: %s\n" % last.group(1):
            self.fail("eval of the llama export printed '%s', training's last score '%s'"
                      % (scored, last and last.group(1)))
        self.run(["eval", "--hellaswag", fixture, "--init-from-hf", self.path("llama_hf")], 2,
                 r"model_type is \"llama\", not \"gpt2\"|llama_hf")
        if not any(f.startswith("events.out.tfevents") for f in os.listdir(tb)):
            self.fail("no TensorBoard event file in %s" % tb)
        with open(self.path("llama.svg"), encoding="utf-8") as f:
            if "gpt_fineweb llama d2 adamw (cpu)" not in f.read():
                self.fail("the chart of the llama run does not name its family")
        report = self.run(["report", self.path("llama.jsonl")])
        if "verdict:" not in report:
            self.fail("`report` of the llama metrics has no verdict:\n%s" % report)
        sample = self.run(["--arch", "llama", "--sample", "6", "--ckpt-dir", ckpt, "--prompt",
                           "The", "--seed", "5"])
        if "sampling from the checkpoint of step 20" not in sample or "\nThe" not in sample:
            self.fail("--sample from the llama checkpoint printed:\n%s" % sample)
        # Every shape flag reaches the model the run builds.
        out = self.run(SMALL + ["--arch", "llama", "--steps", "1", "--kv-heads", "2", "--mlp",
                                "relu2", "--qk-norm", "--tie-embeddings"])
        if "model L=2 H=2 KV=2 C=128 F=512 " not in out or "mlp=relu2 tied qk_norm" not in out:
            self.fail("the shape flags did not reach the model:\n%s" % out[:400])

    def muon(self):
        adamw, _ = self.trains("gpt2_adamw", ["--lr", "3e-3"])
        for arch in ("gpt2", "llama"):
            ckpt = self.path(arch + "_muon_ckpt")
            losses, _ = self.trains(arch + "_muon", ["--arch", arch, "--optimizer", "muon",
                                                     "--lr", "3e-3", "--ckpt-mode", "sync",
                                                     "--ckpt-dir", ckpt])
            manifest = os.path.join(ckpt, "step_00000020", "manifest.json")
            if not os.path.exists(manifest):
                self.fail("%s muon: no checkpoint of step 20" % arch)
                continue
            with open(manifest, encoding="utf-8") as f:
                m = json.load(f)
            names = [t["name"] for t in m["tensors"]]
            if "optim.muon.momentum" not in names:
                self.fail("%s muon: the checkpoint has no Muon momentum: %s" % (arch, names))
            if m["meta"].get("arch") != arch or m["meta"].get("optimizer") != "muon":
                self.fail("%s muon: the checkpoint records %s" % (arch, m["meta"]))
            if m["meta"].get("attention") != "cpu":  # the engine that ran (cuda: cudnn|flash|naive)
                self.fail("%s muon: meta attention is not cpu: %s" % (arch, m["meta"]))
            if arch == "gpt2" and losses[2:] == adamw[2:]:
                self.fail("--optimizer muon trained exactly as adamw")
        other, _ = self.trains("gpt2_muon_lr", ["--optimizer", "muon", "--lr", "3e-3",
                                                "--muon-lr", "0.04"])
        base = read_losses(self.path("gpt2_muon.jsonl"))
        if other[0] != base[0] or other[1:] == base[1:]:
            # the same start; from step 2 on, Muon's rate shows
            self.fail("--muon-lr 0.04 did not change the run: %s vs %s" % (other, base))

    def refusals(self):
        ckpt = self.path("ckpt")
        run2 = SMALL + ["--steps", "2", "--ckpt-mode", "sync", "--ckpt-dir", ckpt]
        self.run(run2 + ["--arch", "llama", "--optimizer", "muon"])
        resume = run2[:-6] + ["--steps", "3", "--ckpt-mode", "sync", "--ckpt-dir", ckpt,
                              "--resume"]
        self.run(resume + ["--optimizer", "muon"], 2,
                 r"^gpt_fineweb: error: --resume: the checkpoint of step 2 in \S*ckpt was "
                 r"written by --arch llama, not --arch gpt2$")
        self.run(resume + ["--arch", "llama"], 2,
                 r"^gpt_fineweb: error: --resume: .* was written by --optimizer muon, not "
                 r"--optimizer adamw$")
        self.run(resume + ["--arch", "llama", "--optimizer", "muon", "--kv-heads", "2"], 2,
                 r"^gpt_fineweb: error: --resume: .* holds model 'L=2 H=2 KV=1 .*', but --arch "
                 r"llama .* makes 'L=2 H=2 KV=2 ")
        self.run(["--sample", "4", "--ckpt-dir", ckpt], 2,
                 r"^gpt_fineweb: error: --sample: .* written by --arch llama, not --arch gpt2$")
        # ... and the same flags resume (nothing refused by mistake).
        out = self.run(resume + ["--arch", "llama", "--optimizer", "muon"])
        if "resumed from checkpoint at step 2" not in out:
            self.fail("the matching resume did not resume:\n%s" % out)
        # A GPT-2 + AdamW checkpoint refuses Muon too (AdamW's moments are not Muon's).
        gckpt = self.path("gckpt")
        self.run(SMALL + ["--steps", "1", "--ckpt-mode", "sync", "--ckpt-dir", gckpt])
        self.run(SMALL + ["--steps", "2", "--ckpt-mode", "sync", "--ckpt-dir", gckpt, "--resume",
                          "--optimizer", "muon"], 2,
                 r"written by --optimizer adamw, not --optimizer muon$")

        self.run(SMALL + ["--steps", "1", "--kv-heads", "2"], 2,
                 r"^gpt_fineweb: error: --kv-heads applies to --arch llama, not --arch gpt2$")
        self.run(SMALL + ["--steps", "1", "--qk-norm"], 2, r"^gpt_fineweb: error: --qk-norm ")
        self.run(SMALL + ["--steps", "1", "--muon-lr", "0.1"], 2,
                 r"^gpt_fineweb: error: --muon-lr applies to --optimizer muon, not --optimizer "
                 r"adamw$")
        self.run(SMALL + ["--steps", "1", "--arch", "llama", "--kv-heads", "3"], 2,
                 r"^gpt_fineweb: error: --kv-heads 3 must divide num_heads 2$")
        self.run(SMALL + ["--steps", "1", "--optimizer", "muon", "--muon-momentum", "1"], 2,
                 r"^gpt_fineweb: error: --muon-momentum must be in \[0,1\): 1$")
        self.run(SMALL + ["--steps", "1", "--optimizer", "muon", "--muon-ns-steps", "0"], 2,
                 r"^gpt_fineweb: error: --muon-ns-steps must be in \[1,100\]: 0$")
        self.run(SMALL[2:] + ["--steps", "1", "--arch", "llama", "--model", "d36"], 2,
                 r"^gpt_fineweb: error: --model d36 is not a preset of --arch llama")
        self.run(SMALL[2:] + ["--steps", "1", "--arch", "gpt2", "--model", "d20"], 2,
                 r"^gpt_fineweb: error: --model d20 is not a preset of --arch gpt2")
        # --arch llama has a CUDA model: without a GPU the run ends at the device check, after
        # its flags were checked (a build without nvcc refuses --device cuda itself). What
        # llama_cuda lacks is refused naming the flag, before the device is looked for.
        no_cuda = (r"--device cuda: this build has no CUDA support \(nvcc was not found when it "
                   r"was configured\)")
        self.run(SMALL + ["--steps", "1", "--device", "cuda", "--arch", "llama"], 2,
                 r"^gpt_fineweb: error: (--device cuda: no CUDA device found|%s)$" % no_cuda)
        self.run(SMALL + ["--steps", "1", "--device", "cuda", "--arch", "llama", "--attention",
                          "naive"], 2,
                 r"^gpt_fineweb: error: (--attention naive: --arch llama's CUDA model runs "
                 r"grouped-query attention with flash or cudnn only|%s)" % no_cuda)
        self.run(SMALL + ["--steps", "1", "--device", "cuda", "--arch", "llama", "--cuda-graph"],
                 2, r"^gpt_fineweb: error: (--cuda-graph: --arch llama's CUDA model has no CUDA "
                 r"graphs yet|%s)" % no_cuda)
        # Muon has its CUDA optimizer (muon_cuda): no refusal by --optimizer any more. It trains
        # where there is a GPU; elsewhere the device check (or the build) is what stops it.
        self.cuda_runs_or_lacks_a_device(SMALL + ["--steps", "1", "--optimizer", "muon"])
        # ... and under --reducer nccl (sharded_muon_cuda; one rank of one without mpirun).
        self.cuda_runs_or_lacks_a_device(SMALL + ["--steps", "1", "--optimizer", "muon",
                                                  "--reducer", "nccl"])
        # Its sharded form under --reducer nccl writes sharded checkpoints, synchronously only.
        self.run(SMALL + ["--steps", "1", "--device", "cuda", "--optimizer", "muon", "--reducer",
                          "nccl", "--ckpt-mode", "async", "--ckpt-dir", self.path("nck")], 2,
                 r"^gpt_fineweb: error: (--ckpt-mode async: --optimizer muon under --reducer nccl "
                 r"shards Muon's momentum|%s)" % no_cuda)
        self.run(SMALL + ["--steps", "1", "--device", "cuda", "--optimizer", "muon", "--reducer",
                          "nccl-zero1"], 2,
                 r"^gpt_fineweb: error: (--reducer nccl-zero1: --optimizer muon has no ZeRO-1 "
                 r"form; its sharded form runs under --reducer mpi \(sharded_muon_cpu\) or "
                 r"--reducer nccl \(sharded_muon_cuda\)|%s)" % no_cuda)
        # CPU and CUDA checkpoints do not interchange (fp32 parameters against bf16 ones with fp32
        # master weights): a CPU Muon checkpoint resumed on CUDA is refused naming --device before
        # the device is looked at (and the reverse the same way, by the same comparison).
        mckpt = self.path("muon_cpu_ckpt")
        self.run(SMALL + ["--steps", "1", "--optimizer", "muon", "--ckpt-mode", "sync",
                          "--ckpt-dir", mckpt])
        self.run(SMALL + ["--steps", "2", "--optimizer", "muon", "--ckpt-mode", "sync",
                          "--ckpt-dir", mckpt, "--resume", "--device", "cuda"], 2,
                 r"^gpt_fineweb: error: (--resume: the checkpoint of step 1 in \S*muon_cpu_ckpt "
                 r"was written by --device cpu, not --device cuda: its model\.\* tensors are "
                 r"fp32 .*optim\.\*master.*do not interchange|%s)$" % no_cuda)
        # llm.c files hold GPT-2; Hugging Face's Llama has no ReLU^2 and no QK-norm. All refused
        # before training: no metrics written.
        metrics = self.path("refused.jsonl")
        self.run(SMALL + ["--steps", "1", "--arch", "llama", "--export", self.path("m.bin"),
                          "--metrics", metrics], 2,
                 r"^gpt_fineweb: error: --export \S*m\.bin: llm\.c model files hold GPT-2 only")
        self.run(SMALL + ["--steps", "1", "--arch", "llama", "--init-from", self.path("m.bin")], 2,
                 r"^gpt_fineweb: error: --init-from \S*m\.bin: llm\.c model files hold GPT-2 only")
        self.run(SMALL + ["--steps", "1", "--arch", "llama", "--mlp", "relu2", "--export-hf",
                          self.path("hf_relu2"), "--metrics", metrics], 2,
                 r"^gpt_fineweb: error: --export-hf \S*hf_relu2: --mlp is relu2: Hugging Face's "
                 r"LlamaForCausalLM computes SwiGLU only")
        self.run(SMALL + ["--steps", "1", "--arch", "llama", "--qk-norm", "--export-hf",
                          self.path("hf_qk"), "--metrics", metrics], 2,
                 r"^gpt_fineweb: error: --export-hf \S*hf_qk: --qk-norm is on: Hugging Face's")
        for written in ("refused.jsonl", "hf_relu2", "hf_qk"):
            if os.path.exists(self.path(written)):
                self.fail("a refused run still wrote %s" % written)
        self.run(SMALL + ["--steps", "1", "--optimizer", "muon", "--reducer", "mpi",
                          "--ckpt-mode", "async", "--ckpt-dir", self.path("ack")], 2,
                 r"^gpt_fineweb: error: --ckpt-mode async: --optimizer muon under --reducer mpi "
                 r"shards Muon's momentum")
        self.run(SMALL + ["--steps", "1", "--optimizer", "muon", "--reducer", "mpi-zero1"], 2,
                 r"^gpt_fineweb: error: --reducer mpi-zero1: --optimizer muon has no ZeRO-1 form")

    def recipe(self):
        _, out = self.trains("speedrun", ["--recipe", "speedrun"], steps=30)
        if not re.search(r"^recipe speedrun: --arch llama --optimizer muon .*--logit-cap 15 ",
                         out, re.M):
            self.fail("--recipe speedrun did not say what it set:\n%s" % out[:600])
        if "--warmup" in out.split("\n", 1)[0]:
            self.fail("--recipe speedrun overrode the explicit --warmup:\n%s" % out[:300])
        if not re.search(r"mlp=relu2 untied qk_norm value_embeds=1 unet logit_cap=15 zero_init "
                         r"windows=16/32", out):
            self.fail("the recipe's model parts did not reach the model:\n%s" % out[:600])
        # An explicit flag wins, also one that turns a part off.
        out = self.run(SMALL + ["--steps", "1", "--recipe", "speedrun", "--logit-cap", "0",
                                "--window-short", "0"])
        if "logit_cap" in out or "windows=" in out or "unet" not in out:
            self.fail("explicit flags did not override the recipe:\n%s" % out[:600])
        self.run(SMALL + ["--steps", "1", "--recipe", "speedrun", "--arch", "gpt2"], 2,
                 r"^gpt_fineweb: error: --recipe speedrun is for --arch llama .*--arch gpt2$")
        self.run(SMALL + ["--steps", "1", "--recipe", "speedrun", "--export-hf",
                          self.path("hf_speedrun")], 2,
                 r"^gpt_fineweb: error: --export-hf \S*hf_speedrun: --mlp is relu2")
        self.run(SMALL + ["--steps", "1", "--arch", "llama", "--value-embeds", "1", "--export-hf",
                          self.path("hf_ve")], 2,
                 r"^gpt_fineweb: error: --export-hf \S*hf_ve: --value-embeds is on")
        self.run(SMALL + ["--steps", "1", "--arch", "llama", "--window-short", "8", "--export-hf",
                          self.path("hf_windows")], 2,
                 r"^gpt_fineweb: error: --export-hf \S*hf_windows: --window-short is on")
        # --device cuda: refused naming the first model part (llama_cuda's are not verified on a
        # GPU yet), or (once they are) trains or lacks a device; never another refusal.
        p = subprocess.run([self.args.exe] + SMALL + ["--steps", "1", "--recipe", "speedrun",
                                                      "--device", "cuda"],
                           capture_output=True, text=True, env=self.env, cwd=self.args.work,
                           timeout=600)
        if p.returncode != 0 and (p.returncode != 2 or not re.search(
                r"^gpt_fineweb: error: (--value-embeds: --arch llama's CUDA model computes the "
                r"recipe's parts, compiled but not yet verified on a GPU|--device cuda: (no CUDA "
                r"device found|this build has no CUDA support))",
                p.stderr.strip())):
            self.fail("--recipe speedrun --device cuda: exit %d: %s" % (p.returncode, p.stderr))

    def cuda_runs_or_lacks_a_device(self, flags):
        """--device cuda with `flags`: trains (exit 0) on a machine with a GPU; exit 2 with "no
        CUDA device found" without one, or "no CUDA support" from a build without nvcc (with
        --reducer nccl: "no NCCL reducer" from a build without NCCL). Any other refusal (a flag,
        a family) fails."""
        flags = flags + ["--device", "cuda"]
        p = subprocess.run([self.args.exe] + flags, capture_output=True, text=True, env=self.env,
                           cwd=self.args.work, timeout=600)
        err = p.stderr.strip()
        if p.returncode == 0:
            return
        if p.returncode != 2 or not re.search(
                r"^gpt_fineweb: error: (--device cuda: (no CUDA device found|this build has no "
                r"CUDA support)|--reducer nccl: this build has no NCCL reducer)", err):
            self.fail("`%s`: exit %d: %s" % (" ".join(flags), p.returncode, err))

    def write_shard(self, name, tokens):
        """An llm.c token shard: 256 int32 header (magic, version, count), uint16 tokens."""
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
            f.write(struct.pack("<%dH" % len(tokens), *tokens))
        return path

    def hf(self):
        sys.path.insert(0, os.path.join(self.args.repo, "tests", "model"))
        import numpy as np
        import hf_llama_check  # the numpy Llama of tests/model (numpy + safetensors)

        rng = np.random.default_rng(7)
        B, T = 4, 16
        tokens = [int(t) for t in rng.integers(0, 50257, size=B * T + 1)]
        shard = self.write_shard("tokens.bin", tokens)
        for variant, extra in (("untied", []), ("tied", ["--tie-embeddings"])):
            folder = self.path("hf_" + variant)
            # Trained on the embedded corpus; the final evaluation (after the last update, with
            # the exported weights) is one window of the shard.
            out = self.run(["--arch", "llama", "--steps", "12", "--lr", "1e-2", "--warmup", "0",
                            "--schedule", "constant", "--batch", str(B),
                            "--seq", str(T), "--threads", "1", "--no-progress", "--eval-every",
                            "0", "--val", shard, "--eval-batches", "1", "--export-hf", folder]
                           + extra)
            m = re.search(r"final val loss ([0-9.]+)", out)
            if not m or not os.path.isdir(folder):
                self.fail("%s: no validation loss or no folder:\n%s" % (variant, out))
                continue
            ours = float(m.group(1))
            with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
                cfg = json.load(f)
            if (cfg.get("architectures") != ["LlamaForCausalLM"]
                    or cfg.get("num_key_value_heads") != 1
                    or cfg.get("tie_word_embeddings") != (variant == "tied")):
                self.fail("%s: config.json %s" % (variant, cfg))
            # numpy's loss from the folder alone, on the same B windows (row b at token b*T).
            rows = np.array([tokens[b * T:(b + 1) * T] for b in range(B)])
            targets = np.array([tokens[b * T + 1:(b + 1) * T + 1] for b in range(B)]).reshape(-1)
            logits = hf_llama_check.numpy_logits(folder, rows)  # (B*T, V)
            logits = logits - logits.max(-1, keepdims=True)
            logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
            theirs = float(-logp[np.arange(B * T), targets].mean())
            print("%s: program %.4f, numpy Llama %.6f" % (variant, ours, theirs), flush=True)
            if not abs(ours - theirs) <= 1e-4 * max(1.0, abs(theirs)) + 5e-5:
                self.fail("%s: the exported folder's loss is %.6f in numpy, %.4f in the program"
                          % (variant, theirs, ours))
            # The program reads its own export back: exporting it again gives the same bytes.
            again = self.path("hf_%s_again" % variant)
            self.run(["--arch", "llama", "--init-from-hf", folder, "--steps", "0",
                      "--eval-every", "0", "--no-progress", "--export-hf", again])
            for f in ("model.safetensors", "config.json", "vocab.json", "merges.txt"):
                if not os.path.exists(os.path.join(again, f)):
                    self.fail("%s: the second export has no %s" % (variant, f))
                    continue
                with open(os.path.join(folder, f), "rb") as a, \
                        open(os.path.join(again, f), "rb") as b:
                    if a.read() != b.read():
                        self.fail("%s: --init-from-hf then --export-hf changed %s" % (variant, f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exe", required=True)
    ap.add_argument("--mode", choices=("llama", "muon", "refusals", "recipe", "hf"),
                    required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--repo", required=True)
    args = ap.parse_args()
    args.exe, args.repo, args.work = (os.path.abspath(p) for p in (args.exe, args.repo, args.work))
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    r = Runner(args)
    getattr(r, args.mode)()
    if r.failures:
        print("gpt_fineweb families %s: %d failure(s)" % (args.mode, len(r.failures)))
        return 1
    print("gpt_fineweb families %s: passed" % args.mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
