#!/usr/bin/env python3
"""bench/gpu/test_torch_reference.py — checks torch_reference.py's GPT-2 on the CPU (needs torch:
pip install torch; about 30 s on one core).

* Its fp32 logits and loss on the golden model file and batch (tests/fixtures/golden) match the
  float64 ones the fixtures hold (1e-5 of the largest logit; the loss within 1e-4); trainkit's CPU GPT-2 is pinned to that same value at 1e-5
  by tests/model/test_gpt2_golden.cpp, so the script and trainkit agree within 1e-4 at init.
* A tiny model trained with the script's optimizer set-up (AdamW groups, trainkit's clipping) on
  one fixed batch: the loss falls well below its start.
* The benchmark entry point runs on the CPU and prints its machine-readable result line, which
  bench/gpu_check.sh parses.

    python3 bench/gpu/test_torch_reference.py
"""

import contextlib
import io
import json
import os
import re
import sys
import unittest

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import torch_reference as ref  # noqa: E402

golden = os.path.join(here, "..", "..", "tests", "fixtures", "golden")


class TorchReference(unittest.TestCase):
    def test_loss_at_init_matches_the_golden_fixture(self):
        cfg, flat = ref.read_llmc(os.path.join(golden, "model.bin"), torch.float32)
        with open(os.path.join(golden, "golden.json")) as f:
            meta = json.load(f)
        B, T = meta["batch"]["B"], meta["batch"]["T"]
        inputs = torch.tensor(meta["batch"]["inputs"]).view(B, T)
        targets = torch.tensor(meta["batch"]["targets"]).view(B, T)
        model = ref.GPT2(cfg)
        model.load_flat(flat)
        with torch.no_grad():
            logits, loss = model(inputs, targets)
        self.assertLess(abs(loss.item() - meta["loss"]), 1e-4 * abs(meta["loss"]))
        # The loss averages small slips away; the logits do not (a LayerNorm eps of 1e-4 fails).
        where = meta["arrays"]["logits"]
        with open(os.path.join(golden, "golden.bin"), "rb") as f:
            f.seek(4 * where["offset"])
            want = torch.frombuffer(bytearray(f.read(4 * where["count"])), dtype=torch.float32)
        got = logits.reshape(-1)
        err = ((got - want).abs().max() / want.abs().max()).item()
        self.assertLess(err, 1e-5)

    def test_loss_falls_on_a_fixed_batch(self):
        torch.manual_seed(3)
        cfg = ref.Config(layers=2, heads=2, channels=32, vocab=200, padded_vocab=256, max_seq=32)
        model = ref.GPT2(cfg)
        model.init_gpt2(3)
        opt = torch.optim.AdamW(ref.param_groups(model, 0.1), lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
        tokens = torch.randint(0, cfg.V, (4, 17), generator=torch.Generator().manual_seed(4))
        losses = []
        for _ in range(40):
            opt.zero_grad(set_to_none=True)
            _, loss = model(tokens[:, :-1], tokens[:, 1:])
            loss.backward()
            ref.clip_like_trainkit(model, 1.0)
            opt.step()
            losses.append(loss.item())
        # ln(200) = 5.3 at init; memorising 64 tokens takes it far below.
        self.assertAlmostEqual(losses[0], 5.3, delta=0.2)
        self.assertLess(losses[-1], 0.5 * losses[0])

    def test_benchmark_prints_its_result_line_on_the_cpu(self):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            ref.main(["--model", "d2", "--device", "cpu", "--batch", "2", "--seq", "32",
                      "--steps", "2", "--warmup", "1"])
        line = [x for x in buf.getvalue().splitlines() if x.startswith("result impl=torch")]
        self.assertEqual(len(line), 1)
        m = re.search(r" model=d2 B=2 T=32 accum=1 tok_s=(\d+) mfu=([0-9.]+) ", line[0])
        self.assertIsNotNone(m, line[0])
        self.assertGreater(int(m.group(1)), 0)


if __name__ == "__main__":
    unittest.main()
