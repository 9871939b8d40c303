#!/usr/bin/env python3
"""The English corpus chain on a small slice: scripts/make-en-data.sh with a
few kilobytes of prose from each Debian documentation package, a 1024-token
BPE tokenizer, and `octet data preprocess` of both splits. Checks that every
package gave prose, that the records respect their size bound, and that each
dataset sequence holds exactly HF tokenizers' ids for its record plus
<|endoftext|> (so octet's tokenizer and HF's agree on real text, and no
record was lost or reordered).

  en_corpus_smoke.py OCTET OUT_DIR

Exits 77 (ctest: skipped) when the documentation packages or `tokenizers`
are missing, naming scripts/install-deps.sh, which installs them.
"""

import json
import os
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SLICE_BYTES = 20000
RECORD_BYTES = 3000
VOCAB = 1024
DTYPES = {1: "B", 2: "b", 3: "h", 4: "i", 8: "H"}


def read_dataset(prefix):
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    assert idx[:9] == b"MMIDIDX\x00\x00", f"{prefix}.idx: bad magic"
    version, code, count, _docs = struct.unpack_from("<QBQQ", idx, 9)
    assert version == 1, f"{prefix}.idx: version {version}"
    lengths = struct.unpack_from(f"<{count}i", idx, 34)
    offsets = struct.unpack_from(f"<{count}q", idx, 34 + 4 * count)
    with open(prefix + ".bin", "rb") as f:
        data = f.read()
    fmt = DTYPES[code]
    return [list(struct.unpack_from(f"<{n}{fmt}", data, off))
            for n, off in zip(lengths, offsets)]


def skip(reason):
    print(f"skipped: {reason}; scripts/install-deps.sh installs it")
    sys.exit(77)


def main():
    octet, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(ROOT, "scripts/en-doc-packages.txt")) as f:
        packages = [line.strip() for line in f
                    if line.strip() and not line.startswith("#")]
    for package in packages:
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                                capture_output=True, text=True).stdout
        if "install ok installed" not in status:
            skip(f"the Debian package {package} is not installed")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        skip("the Python package tokenizers is missing")

    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, OCTET=octet, VOCAB=str(VOCAB))
    subprocess.run(["bash", os.path.join(ROOT, "scripts/make-en-data.sh"), out,
                    "--", "--max-bytes-per-source", str(SLICE_BYTES),
                    "--record-bytes", str(RECORD_BYTES), "--heldout-every", "5"],
                   env=env, check=True)

    manifest = json.load(open(os.path.join(out, "sources.json")))
    got = [s["package"] for s in manifest["sources"]]
    assert got == packages, f"sources {got}, expected {packages}"
    for s in manifest["sources"]:
        size = s["train_bytes"] + s["heldout_bytes"]
        # The slice ends with the document that reaches its size.
        assert SLICE_BYTES <= size < 20 * SLICE_BYTES, \
            f"{s['package']}: {size} bytes of prose in a {SLICE_BYTES}-byte slice"

    tokenizer = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    assert tokenizer.get_vocab_size() == VOCAB, tokenizer.get_vocab_size()
    eod = tokenizer.token_to_id("<|endoftext|>")
    for split in ("train", "heldout"):
        with open(os.path.join(out, split + ".jsonl"), encoding="utf-8") as f:
            texts = [json.loads(line)["text"] for line in f]
        assert texts, f"{split}.jsonl is empty"
        sequences = read_dataset(os.path.join(out, split))
        assert len(sequences) == len(texts), \
            f"{split}: {len(sequences)} sequences for {len(texts)} records"
        for i, (text, ids) in enumerate(zip(texts, sequences)):
            assert len(text.encode()) <= RECORD_BYTES, f"{split} record {i}"
            want = tokenizer.encode(text, add_special_tokens=False).ids + [eod]
            assert ids == want, f"{split} record {i}: octet's ids differ " \
                f"from HF's at {next(j for j, (a, b) in enumerate(zip(ids + [-1], want + [-1])) if a != b)}"
            assert tokenizer.decode(ids[:-1]) == text, f"{split} record {i}"
        print(f"{split}: {len(texts)} records, {sum(map(len, sequences))} "
              f"tokens match HF tokenizers")


if __name__ == "__main__":
    main()
