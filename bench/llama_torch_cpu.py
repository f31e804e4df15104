#!/usr/bin/env python3
"""bench/llama_torch_cpu.py — PyTorch's CPU training-step throughput for the Llama presets that
bench_llama measures trainkit on: the same architecture (transformers' LlamaForCausalLM with the
preset's L, C, H, KV, SwiGLU width, untied head, GPT-2's vocabulary), float32, a full step
(forward, backward, AdamW), on the same number of threads. Eager, and torch.compile where it
works here. Writes JSON that bench_llama reads ($TRAINKIT_LLAMA_TORCH_JSON):

    python3 bench/llama_torch_cpu.py --threads 2 --out /tmp/llama_torch.json
    TRAINKIT_LLAMA_TORCH_JSON=/tmp/llama_torch.json OMP_NUM_THREADS=2 build/bench/bench_llama

{"d6": {"B": 4, "T": 64, "eager": tok/s, "compile": tok/s or null}, "d12": {...}}
"""
import argparse
import json
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

# Mirrors llama_config::preset (include/trainkit/model/llama/config.hpp).
PRESETS = {"d6": (6, 6, 3, 384, 1024), "d12": (12, 12, 6, 768, 2048)}
CASES = [("d6", 4, 64), ("d12", 4, 256)]


def model_of(name):
    L, H, KV, C, F = PRESETS[name]
    cfg = LlamaConfig(vocab_size=50257, hidden_size=C, intermediate_size=F, num_hidden_layers=L,
                      num_attention_heads=H, num_key_value_heads=KV, max_position_embeddings=1024,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                      attn_implementation="sdpa")
    return LlamaForCausalLM(cfg).float().train()


def tokens_per_second(model, B, T, steps, warmup, compiled):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 50257, (B, T + 1), generator=g)
    fwd = torch.compile(model) if compiled else model

    def step():
        opt.zero_grad(set_to_none=True)
        logits = fwd(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 x[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * B * T / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    out = {}
    for name, B, T in CASES:
        r = {"B": B, "T": T, "threads": a.threads}
        r["eager"] = tokens_per_second(model_of(name), B, T, a.steps, 2, False)
        r["compile"] = None
        if not a.no_compile:
            try:
                r["compile"] = tokens_per_second(model_of(name), B, T, a.steps, 3, True)
            except Exception as e:  # no compiler toolchain, unsupported op, ...
                r["compile_error"] = str(e).splitlines()[0][:200]
        out[name] = r
        print(name, r, flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
