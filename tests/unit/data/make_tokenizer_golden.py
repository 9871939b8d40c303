#!/usr/bin/env python3
"""Writes the oracle for octet's tokenizer tests.

Trains two byte-level BPE tokenizers with Hugging Face `tokenizers` on a mixed
corpus generated here from a fixed seed (unicode scripts, digits, whitespace
runs, special tokens), saves their tokenizer.json files, and records the ids
and decodes that `tokenizers` produces, so the C++ tokenizer can be compared
with it token for token.

Outputs in --out:
  corpus.txt                 the training corpus (also the bench input)
  llama3/tokenizer.json      Split(regex) + ByteLevel, ignore_merges, merges
                             written as "a b" strings
  gpt2/tokenizer.json        ByteLevel pre-tokenizer with its own regex,
                             add_prefix_space, merges written as pairs
  <style>/expected.json      {"encodings": [{"text", "add_special", "ids"}],
                              "decodes": [{"ids", "skip_special", "text"}]}
"""

import argparse
import json
import os
import random

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,
                        pre_tokenizers, processors, trainers)

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                  r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                  r"\s+(?!\S)|\s+")

SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>",
                  "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]

ENGLISH = ("the of and to in is was that for it with as his on be at by had "
           "are but from or have an they which one you were her all she there "
           "would their we him been has when who will more no if out so said "
           "what up its about into than them can only other new some could "
           "time these two may then do first any my now such like our over "
           "man me even most made after also did many before must through "
           "compiler tensor gradient kernel quantize scale amax training "
           "Hopper GEMM throughput latency").split()
WORDS_BY_SCRIPT = [
    "naïve café résumé façade Ångström über straße déjà coöperate".split(),
    "привет мир данные обучение модель токен".split(),
    "γειά σου κόσμε λόγος ἀρχή".split(),
    "你好 世界 数据 训练 模型 分词器 中文字符".split(),
    "こんにちは カタカナ ひらがな 日本語".split(),
    "مرحبا بالعالم بيانات".split(),
    "שלום עולם".split(),
    "नमस्ते दुनिया".split(),
    "안녕하세요 세계".split(),
    "🙂 🚀 👩‍💻 🇫🇷 ✨ 🤖 ∑ ∫ √ ≠ ≤ → ⇒ ½ ² ³ ℕ ℝ".split(),
    "e\u0301 a\u0308 n\u0303 o\u0302".split(),  # combining marks
]
WHITESPACE_RUNS = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n",
                   "\r\n", " \n", "\n  ", "        ", "\u00a0", "\u3000",
                   "\u2028", "\u0085", " \t \n", "\n\n\n\n", "\u2003\u2003"]
PUNCTUATION = list(".,;:!?-—()[]{}\"'`/\\@#$%^&*_+=<>|~") + [
    "...", "--", "!=", "==", "->", "::", "«", "»", "“", "”", "’", "¿"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T",
                "'RE", "'VE", "'M", "'LL", "'D", "'x"]
ADDED_TEXT = SPECIAL_TOKENS + ["<mask>", " <mask>", "wo rd", "xwo rd",
                               "wo rdy", "<|eot_id|><|eot_id|>", "<|eot"]


def number(rng):
    kind = rng.randrange(5)
    if kind == 0:
        return str(rng.randrange(10))
    if kind == 1:
        return str(rng.randrange(10 ** rng.randrange(1, 12)))
    if kind == 2:
        return f"{rng.uniform(-1e4, 1e4):.{rng.randrange(1, 6)}f}"
    if kind == 3:
        return f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-" \
               f"{rng.randrange(1, 29):02d}"
    return "0x" + "".join(rng.choice("0123456789abcdef")
                          for _ in range(rng.randrange(1, 9)))


def piece(rng):
    r = rng.random()
    if r < 0.45:
        word = rng.choice(ENGLISH)
        if rng.random() < 0.15:
            word = word.capitalize()
        if rng.random() < 0.03:
            word = word.upper()
        return word
    if r < 0.60:
        return rng.choice(rng.choice(WORDS_BY_SCRIPT))
    if r < 0.70:
        return number(rng)
    if r < 0.80:
        return rng.choice(PUNCTUATION)
    if r < 0.85:
        return rng.choice(ENGLISH) + rng.choice(CONTRACTIONS)
    if r < 0.88:
        return rng.choice(ADDED_TEXT)
    if r < 0.92:
        return rng.choice(ENGLISH) + rng.choice(PUNCTUATION) + number(rng)
    return rng.choice(WHITESPACE_RUNS)


def document(rng):
    parts = []
    for _ in range(rng.randrange(1, 400)):
        parts.append(piece(rng))
        sep = rng.random()
        if sep < 0.75:
            parts.append(" ")
        elif sep < 0.85:
            parts.append(rng.choice(WHITESPACE_RUNS))
    text = "".join(parts)
    if rng.random() < 0.1:
        text = rng.choice(WHITESPACE_RUNS) + text  # leading whitespace
    if rng.random() < 0.1:
        text += rng.choice(WHITESPACE_RUNS)  # trailing whitespace
    return text


def make_documents(min_bytes, seed):
    rng = random.Random(seed)
    docs, size = [], 0
    while size < min_bytes:
        doc = document(rng)
        docs.append(doc)
        size += len(doc.encode("utf-8"))
    # Edge cases that a random corpus can miss.
    docs += ["", " ", "\n", "a", "'s", "<mask>", " <mask> ", "wo rd",
             "<|eot_id|>", "x<|eot_id|>y", "12345678901", "     a",
             "\u0085\u0085", "a\u00a0\u00a0b", "\r\n\r\n", "🙂🙂🙂",
             "tab\there", "ending with spaces   ", "x" * 300]
    return docs


def added_tokens():
    return [AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False),
            AddedToken("wo rd", single_word=True, normalized=True)]


def train(style, docs, vocab_size):
    if style == "llama3":
        tok = Tokenizer(models.BPE(ignore_merges=True))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="<|begin_of_text|> $A",
                special_tokens=[("<|begin_of_text|>", 0)]),
        ])
    else:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=False,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer)
    tok.add_tokens(added_tokens())
    return tok


def expected(tok, docs, rng):
    encodings = []
    for i, text in enumerate(docs):
        add_special = i % 7 == 3
        ids = tok.encode(text, add_special_tokens=add_special).ids
        encodings.append({"text": text, "add_special": add_special,
                          "ids": ids})
    # Arbitrary id slices exercise partial UTF-8 (replacement characters)
    # and skipping of special tokens.
    decodes = []
    vocab = tok.get_vocab_size(with_added_tokens=True)
    for i in range(400):
        if i % 2 == 0:
            ids = [rng.randrange(vocab) for _ in range(rng.randrange(1, 12))]
        else:
            src = rng.choice(encodings)["ids"] or [0]
            a = rng.randrange(len(src))
            ids = src[a:a + rng.randrange(1, 8)]
        skip = i % 3 == 0
        decodes.append({"ids": ids, "skip_special": skip,
                        "text": tok.decode(ids, skip_special_tokens=skip)})
    return {"encodings": encodings, "decodes": decodes}


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--min-bytes", type=int, default=1 << 20)
    parser.add_argument("--vocab-size", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args()

    docs = make_documents(args.min_bytes, args.seed)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "corpus.txt"), "w",
              encoding="utf-8") as f:
        f.write("\n".join(docs))

    for style in ("llama3", "gpt2"):
        tok = train(style, docs, args.vocab_size)
        config = json.loads(tok.to_str())
        if style == "llama3":
            # The older "a b" form of merges; byte-level tokens never hold a
            # space, so it is lossless here.
            merges = config["model"]["merges"]
            assert all(" " not in a and " " not in b for a, b in merges)
            config["model"]["merges"] = [f"{a} {b}" for a, b in merges]
        write_json(os.path.join(args.out, style, "tokenizer.json"), config)
        reloaded = Tokenizer.from_file(
            os.path.join(args.out, style, "tokenizer.json"))
        write_json(os.path.join(args.out, style, "expected.json"),
                   expected(reloaded, docs, random.Random(args.seed + 1)))


if __name__ == "__main__":
    main()
