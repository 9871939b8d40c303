#!/usr/bin/env python3
"""Writes the SFT example's data: chats.jsonl and tokenizer.json.

chats.jsonl: 400 short conversations in the {"messages": [...]} form, made
from a fixed seed (same file on every run): arithmetic, word reversal,
counting letters, and spelling out numbers, some with a system prompt,
some with two turns. Each task has a rule a tiny model can pick up in a few
hundred CPU steps, so the loss visibly falls.

tokenizer.json: a byte-level BPE with no merges (token = byte, ids 0..255)
and the Llama 3 chat special tokens at ids 256..260, so vocab_size 272 in
the spec covers it. Needs only the Python standard library.

Run: python3 examples/sft/make_data.py [--out examples/sft]
"""

import argparse
import json
import os
import random

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
            "<|end_header_id|>", "<|eot_id|>"]
ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven",
        "eight", "nine"]
WORDS = ["apple", "river", "stone", "cloud", "tiger", "paper", "light",
         "green", "house", "music", "water", "plant", "bread", "chair",
         "night", "smile", "train", "ocean", "spark", "field"]


def byte_level_char(b):
    """GPT-2's reversible byte -> printable character map."""
    printable = (0x21 <= b <= 0x7E) or (0xA1 <= b <= 0xAC) or (0xAE <= b <= 0xFF)
    if printable:
        return chr(b)
    shifted = sum(1 for c in range(b) if not (
        (0x21 <= c <= 0x7E) or (0xA1 <= c <= 0xAC) or (0xAE <= c <= 0xFF)))
    return chr(256 + shifted)


def tokenizer_json():
    vocab = {byte_level_char(b): b for b in range(256)}
    added = [{"id": 256 + i, "content": s, "single_word": False,
              "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, s in enumerate(SPECIALS)]
    regex = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
             "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
             "\\s+(?!\\S)|\\s+")
    return {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False,
             "trim_offsets": True, "use_regex": False}]},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": SPECIALS[0], "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {SPECIALS[0]: {"id": SPECIALS[0], "ids": [256],
                                             "tokens": [SPECIALS[0]]}}},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "ignore_merges": True, "vocab": vocab, "merges": []},
    }


def spell(n):
    return " ".join(ONES[int(d)] for d in str(n))


def task(rng):
    kind = rng.randrange(4)
    if kind == 0:
        a, b = rng.randrange(50), rng.randrange(50)
        return "What is %d + %d?" % (a, b), "%d + %d = %d." % (a, b, a + b)
    if kind == 1:
        w = rng.choice(WORDS)
        return "Reverse the word %s." % w, "%s" % w[::-1]
    if kind == 2:
        w, c = rng.choice(WORDS), None
        c = rng.choice(sorted(set(w)))
        return ("How many times does '%s' appear in %s?" % (c, w),
                "%d" % w.count(c))
    n = rng.randrange(1000)
    return "Spell out %d." % n, spell(n)


def conversations(count, seed):
    rng = random.Random(seed)
    for _ in range(count):
        messages = []
        if rng.random() < 0.3:
            messages.append({"role": "system",
                             "content": "You answer in one short line."})
        for _ in range(1 + (rng.random() < 0.25)):
            q, a = task(rng)
            messages += [{"role": "user", "content": q},
                         {"role": "assistant", "content": a}]
        yield {"messages": messages}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.dirname(
        os.path.abspath(__file__)))
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args()
    with open(os.path.join(args.out, "chats.jsonl"), "w") as out:
        for c in conversations(args.count, args.seed):
            out.write(json.dumps(c) + "\n")
    with open(os.path.join(args.out, "tokenizer.json"), "w") as out:
        json.dump(tokenizer_json(), out, ensure_ascii=False)
        out.write("\n")
    print("wrote chats.jsonl (%d conversations) and tokenizer.json to %s"
          % (args.count, args.out))


if __name__ == "__main__":
    main()
