#!/usr/bin/env python3
"""tests/model/hf_gpt2_check.py — checks a trainkit Hugging Face export from the Python side.

  numpy DIR TOKENS LOGITS T
      Reads DIR/config.json and DIR/model.safetensors with safetensors + numpy, runs GPT-2 the way
      transformers' GPT2LMHeadModel does (Conv1D: x @ W + b, gelu_new, LayerNorm eps 1e-5, lm_head
      tied to wte) in float64 on TOKENS (int32, rows of T) and compares with trainkit's LOGITS
      (float32, (rows*T, V)). Independent of trainkit's own layout code.
  transformers DIR TOKENS LOGITS T
      The same comparison with AutoModelForCausalLM.from_pretrained(DIR), plus
      AutoTokenizer.from_pretrained(DIR) encoding "Hello world" as GPT-2 does.
numpy and safetensors are required (CI installs them: .ci/run); transformers + torch are optional:
without them the transformers mode exits 77 and the C++ test skips.
"""
import json
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:
    sys.exit(f"hf_gpt2_check: {e}; run: python3 -m pip install safetensors numpy")

import hf_check_common
from hf_check_common import causal_attention


def layer_norm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def numpy_logits(folder, tokens):
    cfg = json.load(open(f"{folder}/config.json"))
    w = {k.removeprefix("transformer."): v.astype(np.float64)
         for k, v in load_file(f"{folder}/model.safetensors").items()}
    C, H = cfg["n_embd"], cfg["n_head"]
    hs = C // H
    out = []
    for row in tokens:
        T = len(row)
        x = w["wte.weight"][row] + w["wpe.weight"][:T]
        for l in range(cfg["n_layer"]):
            p = f"h.{l}."
            h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
            qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
            q, k, v = (a.reshape(T, H, hs).transpose(1, 0, 2) for a in np.split(qkv, 3, axis=-1))
            y = causal_attention(q, k, v)
            x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
            m = gelu_new(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
            x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"])
        out.append(x @ w["wte.weight"].T)
    return np.concatenate(out)


def transformers_logits(folder, tokens):
    torch, transformers = hf_check_common.import_transformers("hf_gpt2_check")
    auto = transformers.AutoModelForCausalLM
    model = auto.from_pretrained(folder, torch_dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    ids = tok("Hello world")["input_ids"]
    if ids != [15496, 995]:
        sys.exit(f"AutoTokenizer encodes 'Hello world' as {ids}, GPT-2 gives [15496, 995]")
    return hf_check_common.model_logits(torch, model, tokens)


if __name__ == "__main__":
    hf_check_common.main(numpy_logits, transformers_logits, sys.argv[1:6])
