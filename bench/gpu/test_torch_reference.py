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
* --arch llama: in float64 on the Llama golden fixtures (tests/fixtures/llama, transformers'
  LlamaForCausalLM with GQA, RoPE theta 5000, SwiGLU, untied head) its logits within 1e-5 of the
  largest, the loss within 1e-5 and every parameter's gradient within 1e-5 relative per tensor;
  a tiny Llama's loss falls; its `llama-result` line prints.
* torch_attention.py (SDPA beside trainkit's attention in gpu_check): its --check on the CPU.

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
import torch_attention  # noqa: E402
import torch_reference as ref  # noqa: E402

golden = os.path.join(here, "..", "..", "tests", "fixtures", "golden")
llama_golden = os.path.join(here, "..", "..", "tests", "fixtures", "llama")


def load_llama_golden():
    """(meta, array) of the Llama fixtures: array(name) is a float32 tensor of golden.bin."""
    with open(os.path.join(llama_golden, "golden.json")) as f:
        meta = json.load(f)
    with open(os.path.join(llama_golden, "golden.bin"), "rb") as f:
        raw = f.read()

    def array(name):
        e = meta["arrays"][name]
        chunk = raw[4 * e["offset"] : 4 * (e["offset"] + e["count"])]
        return torch.frombuffer(bytearray(chunk), dtype=torch.float32)

    return meta, array


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
        # attention= names what ran (gpu_check's rows show it): on the CPU, "cpu"
        m = re.search(r" model=d2 B=2 T=32 accum=1 attention=cpu tok_s=(\d+) mfu=([0-9.]+) ",
                      line[0])
        self.assertIsNotNone(m, line[0])
        self.assertGreater(int(m.group(1)), 0)


class TorchReferenceLlama(unittest.TestCase):
    def test_logits_loss_and_gradients_match_the_transformers_fixture(self):
        meta, array = load_llama_golden()
        c = meta["config"]
        self.assertFalse(c["tied_embeddings"], "the script's Llama has an untied head")
        cfg = ref.LlamaConfig(c["num_layers"], c["num_heads"], c["num_kv_heads"], c["channels"],
                              hidden=c["hidden_size"], vocab=c["vocab_size"],
                              padded_vocab=c["padded_vocab_size"], max_seq=c["max_seq_len"],
                              theta=c["rope_theta"], eps=c["norm_eps"])
        self.assertEqual(cfg.num_parameters(), meta["arrays"]["params"]["count"])
        model = ref.Llama(cfg).double()
        model.load_flat(array("params").double())
        B, T = meta["batch"]["B"], meta["batch"]["T"]
        inputs = torch.tensor(meta["batch"]["inputs"]).view(B, T)
        targets = torch.tensor(meta["batch"]["targets"]).view(B, T)
        logits, loss = model(inputs, targets)
        self.assertLess(abs(loss.item() - meta["loss"]), 1e-5 * abs(meta["loss"]))
        want = array("logits").double()
        got = logits[..., : cfg.V].reshape(-1)
        self.assertLess(((got - want).abs().max() / want.abs().max()).item(), 1e-5)
        loss.backward()
        grads, i = array("grads").double(), 0
        for name, shape in ref.llama_layout(cfg):
            g = torch.cat([p.grad.reshape(-1) for p in model.tensors()[name]])
            w = grads[i : i + g.numel()]
            i += g.numel()
            self.assertLess(((g - w).norm() / w.norm().clamp_min(1e-30)).item(), 1e-5, name)
        self.assertEqual(i, grads.numel())

    def test_loss_falls_on_a_fixed_batch(self):
        torch.manual_seed(3)
        cfg = ref.LlamaConfig(layers=2, heads=4, kv_heads=2, channels=32, hidden=64, vocab=200,
                              padded_vocab=256, max_seq=32)
        model = ref.Llama(cfg)
        model.init_llama(3)
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
        self.assertAlmostEqual(losses[0], 5.3, delta=0.2)  # ln(200)
        self.assertLess(losses[-1], 0.5 * losses[0])

    def test_benchmark_prints_its_llama_result_line_on_the_cpu(self):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            ref.main(["--arch", "llama", "--model", "d2", "--device", "cpu", "--batch", "2",
                      "--seq", "32", "--steps", "2", "--warmup", "1"])
        line = [x for x in buf.getvalue().splitlines() if x.startswith("llama-result impl=torch")]
        self.assertEqual(len(line), 1)
        self.assertIsNotNone(
            re.search(r" model=d2 B=2 T=32 accum=1 attention=cpu tok_s=\d+ ", line[0]), line[0])


class TorchAttention(unittest.TestCase):
    """torch_attention.py, gpu_check's SDPA half of the attention row: its CPU self-check (SDPA
    against softmax(QK^T)V in float64, the causal FLOP count, every field of its line)."""

    def test_check_on_the_cpu(self):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            self.assertEqual(torch_attention.main(["--device", "cpu", "--check"]), 0)
        self.assertRegex(buf.getvalue(), r"(?m)^attn-result engine=sdpa-math case=tiny .*"
                                         r"fwd_tflops=[0-9.]+ bwd_tflops=[0-9.]+$")


if __name__ == "__main__":
    unittest.main()
