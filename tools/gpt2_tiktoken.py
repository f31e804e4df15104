"""Build tiktoken's `gpt2` encoding offline from a local encoder.json + vocab.bpe.

Shared by the fixture, corpus and benchmark scripts in tools/: tiktoken normally downloads the
GPT-2 files; here it reads them from a directory (the same files trainkit's tokenizer loads), so
the reference ids and trainkit's ids come from one vocabulary. The pattern is tiktoken's own
r50k/gpt2 pattern, taken from tiktoken_ext when present so we compare against what users run.
"""

import hashlib
import os

# The SHA-256 of the standard GPT-2 files (as in tiktoken_ext.openai_public and SHA256SUMS).
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"

GPT2_PATTERN = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
EOT = 50256


def default_vocab_dir():
    """$TRAINKIT_GPT2_VOCAB, else the repository's bundled vocab/gpt2."""
    env = os.environ.get("TRAINKIT_GPT2_VOCAB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "vocab", "gpt2"))


def _check_sha256(path, expected):
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != expected:
        raise SystemExit(f"{path}: SHA-256 {digest} is not the known {expected}")


def load_gpt2(vocab_dir):
    """tiktoken.Encoding equal to tiktoken.get_encoding('gpt2'), built from local files."""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    encoder_json = os.path.join(vocab_dir, "encoder.json")
    vocab_bpe = os.path.join(vocab_dir, "vocab.bpe")
    _check_sha256(encoder_json, ENCODER_JSON_SHA256)
    _check_sha256(vocab_bpe, VOCAB_BPE_SHA256)
    # An empty cache dir makes tiktoken read the paths directly instead of caching copies.
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    ranks = data_gym_to_mergeable_bpe_ranks(vocab_bpe_file=vocab_bpe, encoder_json_file=encoder_json)
    pattern = GPT2_PATTERN
    try:
        import tiktoken_ext.openai_public as public

        pattern = public.r50k_pat_str
    except (ImportError, AttributeError):
        pass
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=pattern,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": EOT},
        explicit_n_vocab=50257,
    )
