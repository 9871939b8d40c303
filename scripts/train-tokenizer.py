#!/usr/bin/env python3
"""Trains a byte-level BPE tokenizer on a {"text": ...} jsonl corpus with
Hugging Face `tokenizers` and writes its tokenizer.json, the form
`octet data preprocess` reads.

The tokenizer is GPT-2's scheme: the ByteLevel pre-tokenizer with its regex
(so any byte sequence encodes, and no token crosses a word boundary), the
256 byte symbols as the initial alphabet, and one special token,
<|endoftext|>, that `octet data preprocess --append-eod` ends every record
with. The vocabulary size counts the special token and the alphabet; keep
it a multiple of 128 so that the embedding and LM-head dimensions suit
every FP8 recipe (blockwise scales 128-wide tiles).

Deterministic for a given input and `tokenizers` version (the install step
pins it in scripts/requirements-test.txt): the trainer breaks ties between
equally frequent pairs by the pair itself.

  scripts/train-tokenizer.py --input TRAIN.jsonl --out tokenizer.json
                             [--vocab-size 32768] [--min-frequency 2]
"""

import argparse
import json
import sys

EOD = "<|endoftext|>"


def texts(path):
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                yield json.loads(line)["text"]
            except (ValueError, KeyError) as e:
                sys.exit(f"train-tokenizer: {path}:{number}: not a "
                         f'{{"text": ...}} line ({e})')


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--vocab-size", type=int, default=32768)
    p.add_argument("--min-frequency", type=int, default=2)
    a = p.parse_args()
    if a.vocab_size < 512 or a.vocab_size % 128:
        sys.exit("train-tokenizer: --vocab-size must be a multiple of 128, "
                 "at least 512")
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, \
            processors, trainers
    except ImportError:
        sys.exit("train-tokenizer: the Python package `tokenizers` is "
                 "missing: run scripts/install-deps.sh")

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=a.vocab_size, min_frequency=a.min_frequency,
        special_tokens=[EOD], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts(a.input), trainer=trainer)
    size = tokenizer.get_vocab_size()
    tokenizer.save(a.out)
    print(f"train-tokenizer: wrote {a.out}: {size} tokens "
          f"({EOD} = {tokenizer.token_to_id(EOD)})")
    if size != a.vocab_size:
        print(f"train-tokenizer: note: the corpus gave {size} tokens, fewer "
              f"than --vocab-size {a.vocab_size}; a model's vocab_size "
              f"must be at least {size}")


if __name__ == "__main__":
    main()
