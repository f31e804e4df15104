#!/usr/bin/env python3
"""bench/cpu_phases_torch.py — where PyTorch's CPU training step goes, on the shapes that
bench_cpu_phases replays trainkit's: GPT-2 (transformers' GPT2LMHeadModel, tanh GELU, tied head,
Vp = 50304) or Llama (LlamaForCausalLM with llama_config's preset shapes), fp32 eager or bf16
autocast, forward + backward + clip + AdamW, under torch.profiler. Each op's self CPU time is booked
to the same phases as trainkit's table (GEMMs by shape, attention, norms, GELU/SwiGLU, cross-entropy,
optimizer, the rest), per step.

    python3 bench/cpu_phases_torch.py --arch gpt2 --model d12 --batch 4 --seq 256 --threads 2
    python3 bench/cpu_phases_torch.py --arch llama --model d12 --bf16
    python3 bench/cpu_phases_torch.py --arch gpt2 --model d6 --seq 64 --compile --no-profile

--no-profile times the step only (the figure bench/cpu_vs_torch.sh compares); --compile wraps the
model in torch.compile, --bf16 runs forward and loss under torch.autocast("cpu", bfloat16).

Self CPU time sums over threads' work as PyTorch books it (intra-op threads' time is booked to the
op that launched them), so the shares, not the absolute sum, are what to compare.
"""
import argparse
import collections
import time

import torch

GPT2 = {"d2": (2, 2, 128), "d6": (6, 6, 384), "d12": (12, 12, 768)}
# Mirrors llama_config::preset (include/trainkit/model/llama/config.hpp): L, H, KV, C, F.
LLAMA = {"d2": (2, 2, 1, 128, 384), "d6": (6, 6, 3, 384, 1024), "d12": (12, 12, 6, 768, 2048)}


def build(arch, name):
    if arch == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        L, H, C = GPT2[name]
        cfg = GPT2Config(vocab_size=50304, n_positions=1024, n_embd=C, n_layer=L, n_head=H,
                         activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0,
                         attn_pdrop=0.0, attn_implementation="sdpa")
        return GPT2LMHeadModel(cfg).float().train(), 50257
    from transformers import LlamaConfig, LlamaForCausalLM
    L, H, KV, C, F = LLAMA[name]
    cfg = LlamaConfig(vocab_size=50304, hidden_size=C, intermediate_size=F, num_hidden_layers=L,
                      num_attention_heads=H, num_key_value_heads=KV, max_position_embeddings=1024,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                      attn_implementation="sdpa")
    return LlamaForCausalLM(cfg).float().train(), 50257


def phase_of(name, shapes):
    n = name.lower()
    if any(s in n for s in ("addmm", "aten::mm", "aten::bmm", "matmul", "aten::linear")):
        dims = [tuple(s) for s in shapes if s and len(s) >= 2]
        return "gemm " + " · ".join("x".join(str(d) for d in s) for s in dims[:2])
    if "scaled_dot_product" in n or "flash_attention" in n or "softmax" in n and "log" not in n:
        return "attention"
    if "layer_norm" in n or "rms" in n or "pow" in n or "rsqrt" in n or "aten::mean" in n:
        return "norms"
    if "gelu" in n or "tanh" in n or "silu" in n:
        return "gelu / silu"
    if "log_softmax" in n or "nll_loss" in n or "cross_entropy" in n:
        return "softmax cross-entropy"
    if "foreach" in n or "adam" in n:
        return "adamw + clip"
    if "embedding" in n:
        return "embedding"
    if "rotary" in n or "cat" in n or "neg" in n:
        return "rope"
    return "other (" + name + ")"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="gpt2", choices=["gpt2", "llama"])
    ap.add_argument("--model", default="d12")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bf16", action="store_true", help="torch.autocast(cpu, bfloat16)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--no-profile", action="store_true", help="time the step only")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model, V = build(a.arch, a.model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, betas=(0.9, 0.95))
    x = torch.randint(0, V, (a.batch, a.seq + 1))
    fwd = torch.compile(model) if a.compile else model

    def forward_backward():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = fwd(input_ids=x[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                                     x[:, 1:].reshape(-1))
        loss.backward()

    def update():
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    def step():
        forward_backward()
        update()

    for _ in range(3 if a.compile else 2):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    wall_ms = (time.perf_counter() - t0) * 1e3 / a.steps
    mode = ("compile " if a.compile else "eager ") + ("bf16 autocast" if a.bf16 else "fp32")
    if a.no_profile:
        print(f"torch {a.arch} {a.model} B={a.batch} T={a.seq} {mode}: step {wall_ms:.1f} ms "
              f"(tok/s {a.batch * a.seq / (wall_ms * 1e-3):.1f})")
        return
    # The model's forward and backward under the profiler; the clip and the optimizer step by
    # wall clock outside it (PyTorch's CPU AdamW is per-tensor mul_/lerp_/addcmul_/sqrt/div, the
    # same op names as the model's elementwise work), booked as CPU time (wall x threads).
    book = collections.Counter()
    update_ms = 0.0
    for _ in range(a.steps):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    record_shapes=True) as prof:
            forward_backward()
        for e in prof.key_averages(group_by_input_shape=True):
            if e.self_cpu_time_total > 0:
                book[phase_of(e.key, e.input_shapes)] += e.self_cpu_time_total / 1e3 / a.steps
        t1 = time.perf_counter()
        update()
        update_ms += (time.perf_counter() - t1) * 1e3 / a.steps
    book["adamw + clip (wall x threads)"] += update_ms * a.threads
    total = sum(book.values())
    print(f"# cpu_phases_torch {a.arch} {a.model} B={a.batch} T={a.seq} "
          f"{'bf16 autocast' if a.bf16 else 'fp32'} torch {torch.__version__}, "
          f"{a.threads} threads, {a.steps} profiled steps")
    print(f"{'phase':52} {'ms/step':>10} {'share':>7}")
    other = 0.0
    for name, ms in book.most_common():
        if ms / total < 0.005:
            other += ms
            continue
        print(f"{name[:52]:52} {ms:10.1f} {100 * ms / total:6.1f}%")
    print(f"{'(phases under 0.5% each)':52} {other:10.1f} {100 * other / total:6.1f}%")
    print(f"{'profiled self CPU time (sum)':52} {total:10.1f}")
    print(f"{'real step, unprofiled (wall)':52} {wall_ms:10.1f}  (tok/s "
          f"{a.batch * a.seq / (wall_ms * 1e-3):.1f})")


if __name__ == "__main__":
    main()
