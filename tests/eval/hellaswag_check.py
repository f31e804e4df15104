#!/usr/bin/env python3
"""tests/eval/hellaswag_check.py — HellaSwag scores recomputed from a Hugging Face folder.

  hellaswag_check.py DIR EXAMPLES SCORES

EXAMPLES (JSON: a list of {"context": [ids], "endings": [[ids] x4], "label": n}) are scored with
the numpy GPT-2 of tests/model/hf_gpt2_check.py over DIR: per ending, the log-softmax loss of
each ending token given everything before it, summed and averaged; the predictions are the
argmins. SCORES (JSON written by test_hellaswag.cpp: per example "sum_loss", "pred",
"pred_norm") must agree. numpy and safetensors are required (CI installs them).
"""
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "model"))
import hf_gpt2_check  # noqa: E402  (exits with the pip hint when numpy is missing)

np = hf_gpt2_check.np


def scores(folder, ex):
    sums = []
    for end in ex["endings"]:
        seq = ex["context"] + end
        logits = hf_gpt2_check.numpy_logits(folder, np.array([seq[:-1]]))
        logp = logits - logits.max(-1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
        n = len(ex["context"])
        sums.append(-sum(logp[n - 1 + k, t] for k, t in enumerate(end)))
    means = [s / len(e) for s, e in zip(sums, ex["endings"])]
    return sums, int(np.argmin(sums)), int(np.argmin(means))


def main(folder, examples_path, scores_path):
    examples = json.load(open(examples_path))
    theirs = json.load(open(scores_path))
    correct = [0, 0]
    for i, (ex, got) in enumerate(zip(examples, theirs, strict=True)):
        sums, pred, pred_norm = scores(folder, ex)
        err = max(abs(a - b) for a, b in zip(sums, got["sum_loss"]))
        if err > 1e-4 * max(1.0, max(abs(s) for s in sums)):
            sys.exit(f"example {i}: summed losses {got['sum_loss']} != numpy's {sums}")
        if (pred, pred_norm) != (got["pred"], got["pred_norm"]):
            sys.exit(f"example {i}: predictions {got['pred']}, {got['pred_norm']} != numpy's "
                     f"{pred}, {pred_norm}")
        correct[0] += pred == ex["label"]
        correct[1] += pred_norm == ex["label"]
    print(f"hellaswag: {len(examples)} examples agree with numpy (acc {correct[0]}, "
          f"acc_norm {correct[1]})")


if __name__ == "__main__":
    main(*sys.argv[1:4])
