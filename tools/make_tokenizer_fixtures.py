"""Generate tests/tokenizer/fixtures/gpt2_golden.json: reference ids from tiktoken.

Each case holds a text, tiktoken's `gpt2` ids for it (encode_ordinary, or encode with
<|endoftext|> allowed when "special" is true) and the pre-tokenization pieces the GPT-2 pattern
cuts it into (Python `regex` with tiktoken's pattern). The C++ tests read this file and never need
Python; regenerate it only when the cases change:

    pip install tiktoken regex
    python3 tools/make_tokenizer_fixtures.py [--vocab DIR]
"""

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_tiktoken import GPT2_PATTERN, default_vocab_dir, load_gpt2  # noqa: E402

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def random_unicode(rng, n):
    """Text drawn from scripts, spaces, digits, marks and emoji, to stress the classes."""
    ranges = [
        (0x20, 0x7E), (0x20, 0x7E), (0x20, 0x7E), (0x09, 0x0D), (0xA0, 0xFF), (0x100, 0x17F),
        (0x300, 0x36F), (0x391, 0x3C9), (0x410, 0x44F), (0x5D0, 0x5EA), (0x620, 0x64A),
        (0x660, 0x669), (0x900, 0x97F), (0x2000, 0x200A), (0x2028, 0x2029), (0x2150, 0x218B),
        (0x3000, 0x3003), (0x3041, 0x3096), (0x4E00, 0x4FFF), (0xAC00, 0xACFF), (0xFF10, 0xFF5A),
        (0x1D400, 0x1D4FF), (0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x20000, 0x200FF),
    ]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def cases():
    rng = random.Random(20240520)
    long_word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(3000))
    yield "empty", ""
    yield "hello", "Hello, world!"
    yield "contractions", "I'm sure you're right: we'll see, they've gone, he'd say it's fine."
    yield "contractions_upper", "I'M SURE YOU'RE RIGHT, WE'LL SEE; IT'S THEY'VE HE'D DON'T"
    yield "contractions_odd", "''s 'll' 're're 'x 'S 'Ll rock'n'roll y'all ' s 'd'm't"
    yield "numbers", "1 12 123 1234 12345 3.14159 1,000,000 -42 +7 1e10 0x1F 2nd 10th"
    yield "numbers_unicode", "٠١٢٣ ½ ¾ Ⅻ ⅷ ① ² ³ १२३ ７８９"
    yield "spaces", "a  b   c    d     e"
    yield "leading_trailing_spaces", "   leading and trailing   "
    yield "only_spaces", "     "
    yield "one_space", " "
    yield "newlines", "line1\n\nline2\n\n\n  indented\r\nwindows\rmac\n"
    yield "only_newlines", "\n\n\n"
    yield "newline_then_word", "\nword\n word \n\n word"
    yield "tabs", "\tcode\t\tx = 1\t\n\t\t\ty\t"
    yield "mixed_whitespace", " \n\t a \t\n b\u00a0c \u00a0 d\u3000e\u2028f\u0085g\u2003h\x0b\x0ci"
    yield "accents", "café naïve résumé Ångström façade coöperate Øresund Łódź"
    yield "decomposed", "cafe\u0301 nai\u0308ve A\u030angstro\u0308m"
    yield "cjk", "你好，世界。日本語のテキストです。한국어 텍스트 漢字かなカナ"
    yield "emoji", "😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇩🇪 ❤️ ✨test✨ 🤖🤖🤖"
    yield "combining", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǫ̗͍̊ t̶e̷x̸t̴ q̃ ̈a"
    yield "punctuation", "!!!??? ... --- ==> <=> (a[b]{c}) \"quoted\" 'single' `back` @#$%^&*~"
    yield "endoftext_ordinary", "a<|endoftext|>b <|endoftext|>"
    yield "long_word", long_word
    yield "long_repeat", "a" * 5000
    yield "long_spaces", " " * 1000 + "x" + "\n" * 500
    yield "long_digits", "".join(str(rng.randint(0, 9)) for _ in range(2000))
    yield "long_punct", "".join(rng.choice("!@#$%^&*()-_=+[]{};:,.<>/?|") for _ in range(2000))
    yield "code", 'def f(x):\n    return {"a": x ** 2}  # square\n\nif __name__ == "__main__":\n'
    yield "url", "https://example.com/path?q=1&r=%20#frag user@example.org"
    yield "greek_cyrillic", "Ελληνικά κείμενο. Русский текст, ещё."
    yield "rtl", "עברית ועוד. العربية والمزيد؟"
    yield "devanagari", "हिन्दी पाठ और संख्या १२३"
    yield "math_alnum", "𝐀𝐁𝐂 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛"
    yield "private_use_and_rare", "\ue000\U000f0000 \u0378 \U0010fffd"
    yield "control_chars", "a\x00b\x01c\x1fd\x7fe\u200bf\u200dg\ufeffh"
    yield "prose", (
        "The quick brown fox jumps over the lazy dog. It wasn't the dog's fault; the fox "
        "had been practising since 1999, and by 2024 it could clear 3.5 metres!\n\n"
        "    Indented paragraph with  double  spaces.\n"
    )
    for i in range(8):
        yield f"random_{i}", random_unicode(rng, 400)
    for i in range(4):
        yield f"special_{i}", ("<|endoftext|>", f"doc {i}<|endoftext|>next", "<|endoftext|><|endoftext|>x", "a <|endoftext|> b")[i]


def invalid_cases():
    yield "lone_continuation", b"abc \x80 def"
    yield "truncated_2", b"caf\xc3"
    yield "truncated_4", b"emoji \xf0\x9f\x98 end"
    yield "overlong", b"slash \xc0\xaf \xe0\x80\xaf"
    yield "surrogate", b"x\xed\xa0\x80y"
    yield "above_max", b"\xf4\x90\x80\x80 and \xf5"
    yield "unicode_table_3_8", b"\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64"
    yield "latin1_text", "Gr\u00fc\u00dfe aus K\u00f6ln".encode("latin-1")


def first_bad_offset(raw):
    try:
        raw.decode("utf-8")
        return None
    except UnicodeDecodeError as e:
        return e.start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", default=default_vocab_dir())
    ap.add_argument("--out", default=os.path.join(REPO, "tests/tokenizer/fixtures/gpt2_golden.json"))
    args = ap.parse_args()
    import regex

    enc = load_gpt2(args.vocab)
    out = []
    for name, text in cases():
        special = name.startswith("special_")
        if special:
            ids = enc.encode(text, allowed_special={"<|endoftext|>"})
        else:
            ids = enc.encode_ordinary(text)
        assert enc.decode_bytes(ids) == text.encode("utf-8"), name
        pieces = regex.findall(GPT2_PATTERN, text)
        assert "".join(pieces) == text, name
        case = {"name": name, "text": text, "ids": ids, "special": special}
        if not special:
            case["pieces"] = pieces
        out.append(case)
    # Ill-formed UTF-8: ids of the text Python's errors="replace" decoding gives (the option
    # invalid_utf8::replace promises the same), bytes stored as a list since JSON has no bytes.
    invalid = []
    for name, raw in invalid_cases():
        repaired = raw.decode("utf-8", errors="replace")
        invalid.append({"name": name, "bytes": list(raw), "replaced_ids": enc.encode_ordinary(repaired),
                        "first_bad_offset": first_bad_offset(raw)})
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/make_tokenizer_fixtures.py", "encoding": "tiktoken gpt2",
                   "cases": out, "invalid_utf8": invalid}, f, ensure_ascii=True, indent=None)
        f.write("\n")
    print(f"{args.out}: {len(out)} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
