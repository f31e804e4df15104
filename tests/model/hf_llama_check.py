#!/usr/bin/env python3
"""tests/model/hf_llama_check.py — checks a trainkit LlamaForCausalLM export from the Python side.

  numpy DIR TOKENS LOGITS T
      Reads DIR/config.json and DIR/model.safetensors with safetensors + numpy and runs Llama the
      way transformers' LlamaForCausalLM does (RMSNorm with eps inside the root, q/k/v projections,
      rotate-half RoPE with theta from the config, grouped-query attention with each key/value head
      serving num_attention_heads / num_key_value_heads consecutive query heads, SwiGLU, final
      norm, lm_head or the tied embedding) in float64 on TOKENS (int32, rows of T), and compares
      with trainkit's LOGITS (float32, (rows*T, V)). Independent of trainkit's layout code.
  transformers DIR TOKENS LOGITS T
      The same comparison with AutoModelForCausalLM.from_pretrained(DIR).
numpy and safetensors are required (CI installs them); transformers + torch are optional: without
them the transformers mode exits 77 and the C++ test skips.
"""
import json
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:
    sys.exit(f"hf_llama_check: {e}; run: python3 -m pip install safetensors numpy")

import hf_check_common
from hf_check_common import causal_attention


def rms_norm(x, w, eps):
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w


def rope(x, theta):
    """x (heads, T, hs): rotate-half, pairs (i, i + hs/2), angle t * theta^(-2i/hs)."""
    _, T, hs = x.shape
    inv_freq = theta ** (-np.arange(0, hs, 2, dtype=np.float64) / hs)
    ang = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
    rot = np.concatenate([-x[..., hs // 2:], x[..., :hs // 2]], -1)
    return x * cos + rot * sin


def numpy_logits(folder, tokens):
    cfg = json.load(open(f"{folder}/config.json"))
    w = {k: v.astype(np.float64) for k, v in load_file(f"{folder}/model.safetensors").items()}
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hs, eps = C // H, cfg["rms_norm_eps"]
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    out = []
    for row in tokens:
        T = len(row)
        x = w["model.embed_tokens.weight"][row]
        for l in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{l}."
            h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
            q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, hs).transpose(1, 0, 2)
            k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KV, hs).transpose(1, 0, 2)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hs).transpose(1, 0, 2)
            q, k = rope(q, theta), rope(k, theta)
            k, v = np.repeat(k, H // KV, axis=0), np.repeat(v, H // KV, axis=0)
            y = causal_attention(q, k, v)
            x = x + y @ w[p + "self_attn.o_proj.weight"].T
            h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
            g = h @ w[p + "mlp.gate_proj.weight"].T
            u = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (g / (1.0 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
        x = rms_norm(x, w["model.norm.weight"], eps)
        out.append(x @ head.T)
    return np.concatenate(out)


def transformers_logits(folder, tokens):
    torch, transformers = hf_check_common.import_transformers("hf_llama_check")
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    if type(model).__name__ != "LlamaForCausalLM":
        sys.exit(f"loaded a {type(model).__name__}, not a LlamaForCausalLM")
    return hf_check_common.model_logits(torch, model, tokens)


if __name__ == "__main__":
    hf_check_common.main(numpy_logits, transformers_logits, sys.argv[1:6])
