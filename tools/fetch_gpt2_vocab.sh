#!/usr/bin/env bash
# fetch_gpt2_vocab.sh — download GPT-2's encoder.json + vocab.bpe once and verify their SHA-256.
#
# trainkit never downloads at run time: `prepare` and the tokenizer read these two files from a
# directory (--vocab DIR or $TRAINKIT_GPT2_VOCAB). This fetches OpenAI's published files (the same
# URLs and hashes tiktoken uses for its `gpt2` encoding) into DIR, writing each under a temporary
# name and keeping it only if its SHA-256 matches, so DIR never holds a truncated vocabulary.
#
# Usage: tools/fetch_gpt2_vocab.sh DIR [BASE_URL]
#   BASE_URL defaults to OpenAI's; a mirror (or file:///path) serving the same files also works.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 DIR [BASE_URL]" >&2
  exit 2
fi
dir=$1
base=${2:-https://openaipublic.blob.core.windows.net/gpt-2/encodings/main}

declare -A sha=(
  [encoder.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [vocab.bpe]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
)

mkdir -p "$dir"
for name in encoder.json vocab.bpe; do
  target="$dir/$name"
  if [[ -f $target ]] && echo "${sha[$name]}  $target" | sha256sum --check --status; then
    echo "$target: present, SHA-256 ok"
    continue
  fi
  tmp="$target.download"
  if command -v curl >/dev/null; then
    curl --fail --location --silent --show-error --output "$tmp" "$base/$name"
  elif command -v wget >/dev/null; then
    wget --quiet --output-document="$tmp" "$base/$name"
  else
    echo "$0: need curl or wget" >&2
    exit 1
  fi
  if ! echo "${sha[$name]}  $tmp" | sha256sum --check --status; then
    echo "$0: $base/$name: SHA-256 $(sha256sum "$tmp" | cut -d' ' -f1) is not the" \
         "known ${sha[$name]}; not installed" >&2
    rm -f "$tmp"
    exit 1
  fi
  mv "$tmp" "$target"
  echo "$target: downloaded, SHA-256 ok"
done
echo "export TRAINKIT_GPT2_VOCAB=$(cd "$dir" && pwd)"
