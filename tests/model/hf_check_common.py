"""tests/model/hf_check_common.py — what every family's Hugging Face check script shares
(hf_gpt2_check.py, hf_llama_check.py): causal softmax attention in float64 numpy, the optional
transformers import (exit 77 without it, so the C++ test skips), transformers' logits of a folder,
and the command line: MODE DIR TOKENS LOGITS T, comparing trainkit's LOGITS (float32, (rows*T, V))
with the reference's over TOKENS (int32, rows of T). A family's script supplies only its numpy
forward pass and what it checks of the loaded model.
"""
import sys

import numpy as np


def causal_attention(q, k, v):
    """q, k, v (heads, T, hs), keys and values already one per query head: softmax(q k^T / sqrt(hs))
    masked to the past, times v, as (T, heads * hs)."""
    heads, T, hs = q.shape
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    att = q @ k.transpose(0, 2, 1) / np.sqrt(hs)
    att[:, mask] = -np.inf
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    return (att @ v).transpose(1, 0, 2).reshape(T, heads * hs)


def import_transformers(script):
    """(torch, transformers), or exit 77 (the C++ test skips) where either is not importable."""
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"{script}: {e}")
        sys.exit(77)
    return torch, transformers


def model_logits(torch, model, tokens):
    """A loaded transformers model's logits over TOKENS as float64 (rows*T, V)."""
    with torch.no_grad():
        logits = model(torch.tensor(tokens, dtype=torch.long)).logits
    return logits.reshape(-1, logits.shape[-1]).double().numpy()


def main(numpy_logits, transformers_logits, argv):
    """MODE DIR TOKENS LOGITS T: exits non-zero when trainkit's logits differ from MODE's."""
    mode, folder, tokens_path, logits_path, T = argv[:5]
    tokens = np.fromfile(tokens_path, dtype="<i4").reshape(-1, int(T))
    ours = np.fromfile(logits_path, dtype="<f4")
    theirs = (numpy_logits if mode == "numpy" else transformers_logits)(folder, tokens)
    ours = ours.reshape(theirs.shape)
    err = np.abs(ours - theirs).max()
    scale = np.abs(theirs).max()
    print(f"{mode}: max |trainkit - reference| = {err:.3g} (logits up to {scale:.3g})")
    if not err <= 1e-4 * max(1.0, scale):
        sys.exit(f"{mode}: logits differ by {err}")
