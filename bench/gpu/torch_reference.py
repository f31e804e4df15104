#!/usr/bin/env python3
"""bench/gpu/torch_reference.py — the same GPT-2 as trainkit, in PyTorch: an independent reference
for trainkit's numbers and its speed.

The network is trainkit's (and llm.c's): learned position embeddings, pre-LayerNorm blocks
(eps 1e-5), tanh GELU, tied token embedding / LM head, the vocabulary padded (50257 -> 50304) with
the loss over the first V columns only, parameters in llm.c's order so an llm.c model file loads
directly. Two uses:

* Benchmark (the default; run by bench/gpu_check.sh right after bench_gpu_training, with the shapes
  it used): bf16 autocast, torch.compile per block, F.scaled_dot_product_attention restricted to
  the flash kernel, fused AdamW, B x T micro-batches with `--accum` of them per optimizer step.
  Prints first-step and median step time, tokens/s and MFU = (6N + 12LCT) x tokens/s / peak
  (989 TFLOP/s, H100/H200 SXM dense bf16, as trainkit's device table), and one machine-readable
  line `result impl=torch model=... B=... T=... attention=sdpa-flash tok_s=... mfu=...
  median_ms=... first_ms=...`.
* Reference on the CPU (`--device cpu`, fp32, no compile): tests/fixtures/golden/make_golden.py
  builds the golden fixtures with this model, and bench/gpu/test_torch_reference.py checks it
  (loss at init, loss falling, the result line).

`--arch llama` runs the Llama family instead (model/llama/config.hpp's presets d2-d24): token
embedding without positions, pre-RMSNorm blocks (eps inside the root, computed in fp32 as
transformers' LlamaRMSNorm), a fused q|k|v projection with grouped-query attention (query head h
reads k, v head h / (H / KV): k and v repeated per group for SDPA's flash kernel), rotate-half RoPE
from a float32 table of angles t * theta^(-2i/hs) (rotation in fp32, as trainkit's kernel),
SwiGLU of width 8C/3 rounded up to 64, no biases, an untied head; AdamW decays the embedding, the
matrices and the head (trainkit's default decay_roles), not the RMSNorm gains. Its result line
starts `llama-result`, as bench_gpu_training --arch llama's. test_torch_reference.py holds it to
transformers' logits in tests/fixtures/llama on the CPU. Never run on a GPU yet.

    python3 bench/gpu/torch_reference.py --model d12 --batch 32 --seq 1024 --accum 1
    python3 bench/gpu/torch_reference.py --model d2 --device cpu --steps 20 --batch 2 --seq 64
    python3 bench/gpu/torch_reference.py --arch llama --model d12 --batch 32 --seq 1024
"""

import argparse
import math
import statistics
import struct
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

# L, H, C of trainkit's presets (model/gpt2/config.hpp).
PRESETS = {
    "d2": (2, 2, 128),
    "d6": (6, 6, 384),
    "d12": (12, 12, 768),
    "d24": (24, 16, 1024),
    "d36": (36, 20, 1280),
    "d48": (48, 25, 1600),
}
LLMC_MAGIC = 20240326
LN_EPS = 1e-5
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}


class Config:
    def __init__(self, layers, heads, channels, vocab=50257, padded_vocab=50304, max_seq=1024):
        self.L, self.H, self.C = layers, heads, channels
        self.V, self.Vp, self.maxT = vocab, padded_vocab, max_seq

    @staticmethod
    def preset(name):
        if name not in PRESETS:
            raise SystemExit(f"unknown preset {name!r} (valid: {', '.join(PRESETS)})")
        return Config(*PRESETS[name])

    def num_parameters(self):
        L, C = self.L, self.C
        per_layer = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C
        return self.Vp * C + self.maxT * C + L * per_layer + 2 * C

    def flops_per_token(self, T):
        n = self.num_parameters() - self.maxT * self.C  # N excludes the position embedding
        return 6.0 * n + 12.0 * self.L * self.C * T


def layout(cfg):
    """(name, shape) of every tensor in llm.c's order (trainkit's gpt2_parameter_layout)."""
    L, C, Vp, T = cfg.L, cfg.C, cfg.Vp, cfg.maxT
    return [
        ("wte", (Vp, C)), ("wpe", (T, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
        ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)),
        ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)),
        ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)), ("lnfw", (C,)),
        ("lnfb", (C,)),
    ]


# Tensors AdamW decays (trainkit's tensor_info::weight_decay, as llm.c).
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


class Block(nn.Module):
    def __init__(self, cfg, flash):
        super().__init__()
        C = cfg.C
        self.H, self.flash = cfg.H, flash
        self.ln1w, self.ln1b = nn.Parameter(torch.ones(C)), nn.Parameter(torch.zeros(C))
        self.qkvw, self.qkvb = nn.Parameter(torch.zeros(3 * C, C)), nn.Parameter(torch.zeros(3 * C))
        self.attprojw, self.attprojb = nn.Parameter(torch.zeros(C, C)), nn.Parameter(torch.zeros(C))
        self.ln2w, self.ln2b = nn.Parameter(torch.ones(C)), nn.Parameter(torch.zeros(C))
        self.fcw, self.fcb = nn.Parameter(torch.zeros(4 * C, C)), nn.Parameter(torch.zeros(4 * C))
        self.fcprojw = nn.Parameter(torch.zeros(C, 4 * C))
        self.fcprojb = nn.Parameter(torch.zeros(C))

    def attention(self, h):
        B, T, C = h.shape
        hs = C // self.H
        qkv = F.linear(h, self.qkvw, self.qkvb)  # (B, T, 3C): q, k, v, each (H, hs)
        q, k, v = (t.view(B, T, self.H, hs).transpose(1, 2) for t in qkv.split(C, dim=2))
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # the plain formula: the CPU reference
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
            mask = torch.ones(T, T, dtype=torch.bool, device=h.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        return F.linear(y.transpose(1, 2).reshape(B, T, C), self.attprojw, self.attprojb)

    def forward(self, x):
        C = x.shape[-1]
        x = x + self.attention(F.layer_norm(x, (C,), self.ln1w, self.ln1b, LN_EPS))
        h = F.layer_norm(x, (C,), self.ln2w, self.ln2b, LN_EPS)
        return x + F.linear(gelu_tanh(F.linear(h, self.fcw, self.fcb)), self.fcprojw, self.fcprojb)


def load_flat(model, tensor_layout, flat):
    """Copies one flat vector into `model`'s parameters, tensor by tensor in `tensor_layout`'s
    order (each tensor: model.tensors()[name], one parameter per layer)."""
    i = 0
    with torch.no_grad():
        for name, _ in tensor_layout:
            for p in model.tensors()[name]:
                p.copy_(flat[i : i + p.numel()].view_as(p))
                i += p.numel()
    assert i == flat.numel(), (i, flat.numel())


class GPT2(nn.Module):
    def __init__(self, cfg, flash=False):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Parameter(torch.zeros(cfg.Vp, cfg.C))
        self.wpe = nn.Parameter(torch.zeros(cfg.maxT, cfg.C))
        self.blocks = nn.ModuleList(Block(cfg, flash) for _ in range(cfg.L))
        self.lnfw, self.lnfb = nn.Parameter(torch.ones(cfg.C)), nn.Parameter(torch.zeros(cfg.C))

    def tensors(self):
        """name -> list of the parameters that make up that llm.c tensor (one per layer)."""
        out = {"wte": [self.wte], "wpe": [self.wpe]}
        for name, _ in layout(self.cfg)[2:14]:
            out[name] = [getattr(b, name) for b in self.blocks]
        out["lnfw"], out["lnfb"] = [self.lnfw], [self.lnfb]
        return out

    def flat(self, grads=False):
        """Every parameter (or its gradient) as one flat vector in llm.c order."""
        parts = []
        for name, _ in layout(self.cfg):
            for p in self.tensors()[name]:
                t = p.grad if grads else p
                parts.append((t if t is not None else torch.zeros_like(p)).detach().reshape(-1))
        return torch.cat(parts)

    def load_flat(self, flat):
        load_flat(self, layout(self.cfg), flat)

    def init_gpt2(self, seed):
        """GPT-2's initialisation (normal 0.02, residual projections scaled by 1/sqrt(2L), zero
        biases, unit LayerNorm gains, zero padded vocabulary rows), for benchmarks."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, ps in self.tensors().items():
                for p in ps:
                    if name in DECAYED:
                        std = 0.02 / math.sqrt(2 * self.cfg.L) if "proj" in name else 0.02
                        p.copy_(torch.randn(p.shape, generator=g) * std)
            self.wte[self.cfg.V :].zero_()

    def forward(self, idx, targets=None):
        B, T = idx.shape
        x = self.wte[idx] + self.wpe[:T]
        for b in self.blocks:
            x = b(x)
        x = F.layer_norm(x, (self.cfg.C,), self.lnfw, self.lnfb, LN_EPS)
        logits = x @ self.wte.t()  # (B, T, Vp)
        loss = None
        if targets is not None:  # the softmax ranges over the V real tokens only
            loss = F.cross_entropy(logits[..., : self.cfg.V].float().reshape(-1, self.cfg.V),
                                   targets.reshape(-1))
        return logits, loss


# ---- the Llama family (--arch llama) ----------------------------------------------------------

# L, H, KV, C of trainkit's Llama presets (model/llama/config.hpp).
LLAMA_PRESETS = {
    "d2": (2, 2, 1, 128),
    "d6": (6, 6, 3, 384),
    "d12": (12, 12, 6, 768),
    "d20": (20, 10, 5, 1280),
    "d24": (24, 12, 6, 1536),
}
# Roles trainkit's AdamW decays by default (optim/adamw_config.hpp: embedding, matrix, head).
LLAMA_DECAYED = {"wte", "qkvw", "attprojw", "fcw", "fcprojw", "lm_head"}


class LlamaConfig:
    def __init__(self, layers, heads, kv_heads, channels, hidden=None, vocab=50257,
                 padded_vocab=50304, max_seq=1024, theta=10000.0, eps=1e-5):
        self.L, self.H, self.KV, self.C = layers, heads, kv_heads, channels
        self.hs = channels // heads
        self.D = (heads + 2 * kv_heads) * self.hs  # rows of the fused q|k|v projection
        self.F = hidden if hidden else (8 * channels // 3 + 63) // 64 * 64  # SwiGLU's width
        self.V, self.Vp, self.maxT = vocab, padded_vocab, max_seq
        self.theta, self.eps = theta, eps

    @staticmethod
    def preset(name):
        if name not in LLAMA_PRESETS:
            raise SystemExit(f"unknown Llama preset {name!r} (valid: {', '.join(LLAMA_PRESETS)})")
        return LlamaConfig(*LLAMA_PRESETS[name])

    def num_parameters(self):
        L, C, D, F_ = self.L, self.C, self.D, self.F
        per_layer = C + D * C + C * C + C + 2 * F_ * C + C * F_
        return 2 * self.Vp * C + L * per_layer + C  # wte and the untied lm_head

    def flops_per_token(self, T):
        n = self.num_parameters() - self.Vp * self.C  # N leaves out the input embedding
        return 6.0 * n + 12.0 * self.L * self.C * T


def llama_layout(cfg):
    """(name, shape) of every tensor in trainkit's llama_parameter_layout order (untied)."""
    L, C, Vp = cfg.L, cfg.C, cfg.Vp
    return [
        ("wte", (Vp, C)), ("ln1w", (L, C)), ("qkvw", (L, cfg.D, C)), ("attprojw", (L, C, C)),
        ("ln2w", (L, C)), ("fcw", (L, 2 * cfg.F, C)), ("fcprojw", (L, C, cfg.F)),
        ("lnfw", (C,)), ("lm_head", (Vp, C)),
    ]


def rms_norm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w, the statistics in fp32 (transformers' LlamaRMSNorm)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rope_table(cfg):
    """cos, sin (maxT, hs/2) in float32 (trainkit's detail/rope_table.hpp)."""
    i = torch.arange(0, cfg.hs, 2, dtype=torch.float32)
    inv_freq = 1.0 / (cfg.theta ** (i / cfg.hs))
    angles = torch.arange(cfg.maxT, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def rope(x, cos, sin):
    """Rotate-half RoPE of x (B, heads, T, hs): pairs (i, i + hs/2), rotated in fp32 (the float64
    reference stays in float64)."""
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    x1, x2 = x.to(wide).chunk(2, dim=-1)
    c, s = cos.to(wide), sin.to(wide)
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


class LlamaBlock(nn.Module):
    def __init__(self, cfg, flash):
        super().__init__()
        C, D, F_ = cfg.C, cfg.D, cfg.F
        self.cfg, self.flash = cfg, flash
        self.ln1w = nn.Parameter(torch.ones(C))
        self.qkvw = nn.Parameter(torch.zeros(D, C))
        self.attprojw = nn.Parameter(torch.zeros(C, C))
        self.ln2w = nn.Parameter(torch.ones(C))
        self.fcw = nn.Parameter(torch.zeros(2 * F_, C))  # gate | up
        self.fcprojw = nn.Parameter(torch.zeros(C, F_))

    def attention(self, h, cos, sin):
        B, T, C = h.shape
        H, KV, hs = self.cfg.H, self.cfg.KV, self.cfg.hs
        qkv = F.linear(h, self.qkvw)  # (B, T, (H + 2KV) hs): q heads, k heads, v heads
        q, k, v = qkv.split([H * hs, KV * hs, KV * hs], dim=2)
        q = rope(q.view(B, T, H, hs).transpose(1, 2), cos, sin)
        k = rope(k.view(B, T, KV, hs).transpose(1, 2), cos, sin)
        v = v.view(B, T, KV, hs).transpose(1, 2)
        # Query head h reads k, v head h // (H / KV): each k, v head repeated for its group.
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # the plain formula: the CPU reference
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
            mask = torch.ones(T, T, dtype=torch.bool, device=h.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        return F.linear(y.transpose(1, 2).reshape(B, T, C), self.attprojw)

    def forward(self, x, cos, sin):
        x = x + self.attention(rms_norm(x, self.ln1w, self.cfg.eps), cos, sin)
        gate, up = F.linear(rms_norm(x, self.ln2w, self.cfg.eps), self.fcw).split(self.cfg.F, -1)
        return x + F.linear(F.silu(gate) * up, self.fcprojw)


class Llama(nn.Module):
    def __init__(self, cfg, flash=False):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Parameter(torch.zeros(cfg.Vp, cfg.C))
        self.blocks = nn.ModuleList(LlamaBlock(cfg, flash) for _ in range(cfg.L))
        self.lnfw = nn.Parameter(torch.ones(cfg.C))
        self.lm_head = nn.Parameter(torch.zeros(cfg.Vp, cfg.C))
        cos, sin = rope_table(cfg)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def tensors(self):
        """name -> the parameters that make up that trainkit tensor (one per layer)."""
        out = {"wte": [self.wte]}
        for name, _ in llama_layout(self.cfg)[1:7]:
            out[name] = [getattr(b, name) for b in self.blocks]
        out["lnfw"], out["lm_head"] = [self.lnfw], [self.lm_head]
        return out

    def load_flat(self, flat):
        """Parameters from one flat vector in trainkit's layout order."""
        load_flat(self, llama_layout(self.cfg), flat)

    def init_llama(self, seed):
        """trainkit's Llama initialisation in kind (llama/init.hpp): normal 0.02, the
        residual projections 0.02 / sqrt(2L), unit RMSNorm gains, zero padded vocabulary rows."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, ps in self.tensors().items():
                for p in ps:
                    if name in LLAMA_DECAYED:
                        std = 0.02 / math.sqrt(2 * self.cfg.L) if "proj" in name else 0.02
                        p.copy_(torch.randn(p.shape, generator=g) * std)
            self.wte[self.cfg.V :].zero_()
            self.lm_head[self.cfg.V :].zero_()

    def forward(self, idx, targets=None):
        B, T = idx.shape
        x = self.wte[idx]
        cos, sin = self.cos[:T], self.sin[:T]
        for b in self.blocks:
            x = b(x, cos, sin)
        logits = rms_norm(x, self.lnfw, self.cfg.eps) @ self.lm_head.t()  # (B, T, Vp)
        loss = None
        if targets is not None:  # the softmax ranges over the V real tokens only
            loss = F.cross_entropy(logits[..., : self.cfg.V].float().reshape(-1, self.cfg.V),
                                   targets.reshape(-1))
        return logits, loss


def read_llmc(path, dtype=torch.float32):
    """(Config, flat parameters) of an llm.c model file, version 3 (fp32)."""
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        if header[0] != LLMC_MAGIC or header[1] != 3:
            raise SystemExit(f"{path}: not an fp32 llm.c model file (magic {header[0]}, version {header[1]})")
        maxT, V, L, H, C, Vp = header[2:8]
        cfg = Config(L, H, C, V, Vp, maxT)
        flat = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    if flat.numel() != cfg.num_parameters():
        raise SystemExit(f"{path}: {flat.numel()} parameters, header shape needs {cfg.num_parameters()}")
    return cfg, flat.to(dtype)


def write_llmc(path, cfg, flat):
    header = [0] * 256
    header[:8] = [LLMC_MAGIC, 3, cfg.maxT, cfg.V, cfg.L, cfg.H, cfg.C, cfg.Vp]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(flat.to(torch.float32).contiguous().numpy().tobytes())


def param_groups(model, weight_decay):
    t = model.tensors()
    decayed = LLAMA_DECAYED if isinstance(model, Llama) else DECAYED
    decay = [p for n in decayed for p in t[n]]
    rest = [p for n, ps in t.items() if n not in decayed for p in ps]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def clip_like_trainkit(model, max_norm):
    """Global-norm clipping as trainkit's optim/grad_clip.hpp: scale max_norm / norm when the
    norm exceeds it (no epsilon). Returns the norm before clipping."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
    if max_norm > 0 and math.isfinite(norm.item()) and norm.item() > max_norm:
        for g in grads:
            g.mul_(max_norm / norm.item())
    return norm.item()


def peak_tflops(device):
    if device.type != "cuda":
        return 0.0
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), 0.0)


def benchmark(args):
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("torch_reference: no CUDA device visible to PyTorch")
    torch.manual_seed(args.seed)
    llama = args.arch == "llama"
    cfg = LlamaConfig.preset(args.model) if llama else Config.preset(args.model)
    if args.seq > cfg.maxT:
        raise SystemExit(f"--seq {args.seq} exceeds max_seq_len {cfg.maxT}")
    if llama:
        model = Llama(cfg, flash=cuda)
        model.init_llama(args.seed)
    else:
        model = GPT2(cfg, flash=cuda)
        model.init_gpt2(args.seed)
    model.to(device)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        for b in model.blocks:  # per block: one compiled graph reused by every layer
            b.compile()
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            fused=cuda)
    gen = torch.Generator().manual_seed(args.seed + 1)
    batches = [torch.randint(0, cfg.V, (args.batch, args.seq + 1), generator=gen).to(device)
               for _ in range(2)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for a in range(args.accum):
            tok = batches[(i * args.accum + a) % 2]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
                _, loss = model(tok[:, :-1], tok[:, 1:])
            (loss / args.accum).backward()
            total += loss.detach()
        clip_like_trainkit(model, 1.0)
        opt.step()
        return total / args.accum

    if args.flash_check and cuda:  # fail loudly rather than time a slower attention kernel
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    else:
        import contextlib
        ctx = contextlib.nullcontext()
    times, losses = [], []
    with ctx:
        for i in range(args.warmup + args.steps):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            losses.append(float(step(i)))
            if cuda:
                torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
            print(f"step {i}: loss {losses[-1]:.4f} {times[-1]:.1f} ms", flush=True)
    first = times[0]
    median = statistics.median(times[args.warmup :]) if args.steps else first
    tokens = args.batch * args.seq * args.accum
    tok_s = tokens / (median / 1e3)
    peak = peak_tflops(device)
    mfu = cfg.flops_per_token(args.seq) * tok_s / (peak * 1e12) if peak else 0.0
    mem = torch.cuda.max_memory_allocated(device) / 2**30 if cuda else 0.0
    print(f"torch {torch.__version__} {torch.cuda.get_device_name(device) if cuda else 'cpu'}: "
          f"{args.model} B={args.batch} T={args.seq} accum={args.accum}: median {median:.1f} ms/step "
          f"(first {first:.1f} ms), {tok_s:.0f} tok/s, MFU {100 * mfu:.1f}% of {peak:.0f} TFLOP/s, "
          f"peak memory {mem:.1f} GiB, loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    tag = "llama-result" if llama else "result"
    # The attention that ran: SDPA held to its flash backend on CUDA (else SDPA's own choice).
    attention = "sdpa-flash" if args.flash_check and cuda else ("sdpa" if cuda else "cpu")
    print(f"{tag} impl=torch model={args.model} B={args.batch} T={args.seq} accum={args.accum} "
          f"attention={attention} tok_s={tok_s:.0f} mfu={mfu:.4f} median_ms={median:.2f} "
          f"first_ms={first:.2f} loss_first={losses[0]:.4f} loss_last={losses[-1]:.4f}")
    return losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", default="gpt2", choices=["gpt2", "llama"])
    p.add_argument("--model", default="d12", choices=sorted(set(PRESETS) | set(LLAMA_PRESETS)))
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compile)")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-flash-check", dest="flash_check", action="store_false",
                   help="allow SDPA to pick a non-flash kernel")
    args = p.parse_args(argv)
    if min(args.batch, args.seq, args.accum) < 1 or args.steps < 0 or args.warmup < 1:
        raise SystemExit("--batch, --seq, --accum and --warmup must be >= 1, --steps >= 0")
    if args.model not in (LLAMA_PRESETS if args.arch == "llama" else PRESETS):
        raise SystemExit(f"--model {args.model} is not a preset of --arch {args.arch}")
    benchmark(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
