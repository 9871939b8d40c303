#!/usr/bin/env python3
"""Hugging Face in and out of octet-run, checked against transformers.

Two steps around the GPU runs (bench/hf_oracle_gpu.sh runs them all):

  make   a random LlamaForCausalLM (Llama 3 8B layer shapes, 2 layers, full
         vocabulary; --tiny for a CPU-sized one) saved by transformers in
         bf16 as sharded safetensors, one document of random token ids as
         the indexed dataset octet-run reads (--data PREFIX), and
         transformers' loss on that document (reference.json).

  check  reads what octet-run did with them:
         run 1: --init-from MODEL --data DOC --steps 1, a checkpoint after
                the step (HF-named) and --save-hf EXPORT;
         run 2: --init-from EXPORT --data DOC --steps 1;
         and compares
         (a) run 1's step-1 loss with transformers' loss of MODEL: HF
             weights in;
         (b) the step-1 checkpoint: a HF Llama state dict (loaded strictly
             by its HF names), and EXPORT: loads with from_pretrained and
             holds the checkpoint's tensors bit for bit, so that their
             logits are the same: HF weights out;
         (c) run 2's step-1 loss (octet's forward on the weights after one
             step, read back from EXPORT) with transformers' loss of
             EXPORT: what octet trained is what transformers gets.
         octet-run prints no logits, so octet's side of (a) and (c) is its
         loss, which must agree within the golden loss tolerance of the
         bundle's numerics (runtime/exec/Golden.cpp: tolerancesFor), read
         from the source so that it is stated once.

         transformers' side of (a) and (c) computes in fp32 on the weights
         as octet's GEMMs read them (as_octet_reads): rounded to BF16, and
         under delayed FP8 the decoder layers' linear weights in E4M3 at the
         scale a fresh run starts from. It has to be: one step of AdamW at
         the schedule's 3e-5 moves each weight by about 3e-5, under half a
         BF16 step at the init's typical 0.02 (6e-5), so most of the step
         vanishes in the copy octet's forward reads while an fp32 forward
         sees all of it (the plain fp32 loss is reported beside).

Usage:
  python3 bench/hf_oracle.py make --out WORK [--seq-len 4096] [--tiny]
  python3 bench/hf_oracle.py check --work WORK --recipe bf16|fp8 \\
      --run1-log L1 --checkpoint-dir C --export E --run2-log L2 --json OUT
"""

import argparse
import json
import math
import os
import re
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LLAMA3_8B_LAYERS = dict(
    vocab_size=128256, hidden_size=4096, intermediate_size=14336,
    num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0,
    max_position_embeddings=8192, rms_norm_eps=1e-5)
# Small enough for a check of this script on a CPU, with
# bench/specs/hf-oracle/tiny.pbtxt.
TINY = dict(
    vocab_size=256, hidden_size=64, intermediate_size=128,
    num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0,
    max_position_embeddings=256, rms_norm_eps=1e-5)


def golden_loss_tolerance(recipe):
    """The relative loss bound of `octet-run --golden` for these numerics."""
    path = os.path.join(ROOT, "runtime", "exec", "Golden.cpp")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    body = text[text.index("Tolerances tolerancesFor("):]
    fp8, bf16 = re.findall(r"/\*loss=\*/([0-9.eE+-]+)", body)[:2]
    return float(fp8 if recipe == "fp8" else bf16)


def write_indexed_dataset(prefix, tokens):
    """One document of int32 tokens as Megatron's .bin/.idx (MMIDIDX v1)."""
    with open(prefix + ".bin", "wb") as f:
        f.write(struct.pack("<%di" % len(tokens), *tokens))
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))          # version
        f.write(struct.pack("<B", 4))          # dtype: int32
        f.write(struct.pack("<Q", 1))          # sequences
        f.write(struct.pack("<Q", 2))          # document boundaries
        f.write(struct.pack("<i", len(tokens)))
        f.write(struct.pack("<q", 0))          # byte offset of sequence 0
        f.write(struct.pack("<2q", 0, 1))


def read_tokens(prefix):
    with open(prefix + ".bin", "rb") as f:
        data = f.read()
    return list(struct.unpack("<%di" % (len(data) // 4), data))


def device():
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def causal_lm_loss(model, tokens):
    """transformers' mean next-token loss over the document (labels = ids,
    shifted inside), as octet's packed row computes it: every position but
    the last predicts the next token."""
    import torch
    ids = torch.tensor([tokens], device=next(model.parameters()).device)
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids)
    return float(out.loss), out.logits


def load_model(path, dtype):
    import torch
    from transformers import LlamaForCausalLM
    # Loaded as stored, then converted: exact from bf16 to fp32, and the
    # same with transformers 4 (torch_dtype) and 5 (dtype).
    model = LlamaForCausalLM.from_pretrained(path, attn_implementation="sdpa")
    return model.to(dtype).to(device()).eval()


def as_octet_reads(model, recipe):
    """Rounds `model`'s weight matrices in place to what octet's GEMMs read
    under `recipe` (the precision stage of `octet compile --dump-ir`):
    every matrix cast to BF16, and under delayed FP8 ("hybrid") the decoder
    layers' linear weights quantized to E4M3 instead, at the scale state's
    initial value, 1 (`init = "ones"`), which a run that starts from HF
    weights uses in its first step. Norm weights stay fp32, as in octet."""
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() != 2:
                continue
            if recipe == "fp8" and ".layers." in name:
                p.copy_(p.to(torch.float8_e4m3fn).to(p.dtype))
            else:
                p.copy_(p.to(torch.bfloat16).to(p.dtype))
    return model


def reference_losses(path, tokens, recipe):
    """transformers' loss on the HF model at `path`: fp32 as stored, and
    fp32 on the weights as octet reads them; and the first one's logits."""
    import torch
    model = load_model(path, torch.float32)
    plain, logits = causal_lm_loss(model, tokens)
    as_read, _ = causal_lm_loss(as_octet_reads(model, recipe), tokens)
    del model
    return plain, as_read, logits


def cmd_make(args):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    shapes = TINY if args.tiny else LLAMA3_8B_LAYERS
    config = LlamaConfig(num_hidden_layers=args.layers, hidden_act="silu",
                         attention_bias=False, mlp_bias=False,
                         tie_word_embeddings=False, initializer_range=0.02,
                         bos_token_id=None, eos_token_id=None, **shapes)
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    os.makedirs(args.out, exist_ok=True)
    model_dir = os.path.join(args.out, "model")
    # Shards smaller than the embedding, so that the index is exercised.
    model.save_pretrained(model_dir, safe_serialization=True,
                          max_shard_size="1GB" if not args.tiny else "100KB")
    del model
    if not os.path.exists(os.path.join(model_dir,
                                       "model.safetensors.index.json")):
        sys.exit("make: transformers wrote one file; the oracle wants shards")
    generator = torch.Generator().manual_seed(args.seed + 1)
    tokens = torch.randint(0, shapes["vocab_size"], (args.seq_len,),
                           generator=generator).tolist()
    write_indexed_dataset(os.path.join(args.out, "doc"), tokens)
    reference = {"seq_len": args.seq_len, "layers": args.layers,
                 "config": shapes, "seed": args.seed}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        model = load_model(model_dir, dtype)
        reference["loss_" + name], _ = causal_lm_loss(model, tokens)
        del model
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
    print("make: %s (%d layers, vocabulary %d), document of %d tokens; "
          "transformers' loss %.6f (fp32), %.6f (bf16)" % (
              model_dir, args.layers, shapes["vocab_size"], args.seq_len,
              reference["loss_fp32"], reference["loss_bf16"]))


STEP_LINE = re.compile(r"^step\s+(\d+)/\d+\s+loss ([0-9.eE+-]+|nan|inf)")


def step_losses(log):
    losses = {}
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = STEP_LINE.match(line.strip())
            if m:
                losses[int(m.group(1))] = float(m.group(2))
    if not losses:
        sys.exit("check: no step lines in %s (did octet-run fail? see the log)"
                 % log)
    return losses


def safetensors_dir(path):
    """Every tensor of a HF checkpoint directory (single file or shards)."""
    from safetensors.torch import load_file
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for name in files:
        tensors.update(load_file(os.path.join(path, name)))
    return tensors


def model_from_checkpoint(work, step_dir):
    """The reference model's class and config, with the weights of an
    octet-run checkpoint loaded strictly: every HF name must be there, and
    nothing else."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig.from_pretrained(os.path.join(work, "model"))
    model = LlamaForCausalLM(config).to(torch.float32)
    state = {k: v.to(torch.float32) for k, v in safetensors_dir(step_dir).items()}
    result = model.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if "rotary_emb" not in k]
    if missing or result.unexpected_keys:
        raise SystemExit("check: %s is not a HF Llama state dict: missing %s, "
                         "unexpected %s" % (step_dir, missing[:4],
                                            result.unexpected_keys[:4]))
    return model.to(device()).eval()


def compare(name, octet, reference, tolerance):
    rel = abs(octet - reference) / max(abs(reference), 1e-12)
    ok = math.isfinite(octet) and rel <= tolerance
    print("%-46s octet %.6f  transformers %.6f  rel %.2e  (bound %.0e)  %s" % (
        name, octet, reference, rel, tolerance, "ok" if ok else "FAIL"))
    return {"octet": octet, "transformers": reference, "relative_error": rel,
            "bound": tolerance, "pass": ok}


def cmd_check(args):
    import torch
    with open(os.path.join(args.work, "reference.json")) as f:
        reference = json.load(f)
    tokens = read_tokens(os.path.join(args.work, "doc"))
    tol = golden_loss_tolerance(args.recipe)
    run1 = step_losses(args.run1_log)
    run2 = step_losses(args.run2_log)
    results = {"recipe": args.recipe, "tolerance_source":
               "runtime/exec/Golden.cpp tolerancesFor (loss)",
               "seq_len": reference["seq_len"], "layers": reference["layers"],
               "device": device(), "checks": {}}
    checks = results["checks"]
    plain, as_read, _ = reference_losses(
        os.path.join(args.work, "model"), tokens, args.recipe)
    checks["step1_loss_vs_transformers"] = compare(
        "step-1 loss, HF init", run1[1], as_read, tol)
    checks["step1_loss_vs_transformers"]["transformers_plain_fp32"] = plain
    checks["step1_loss_vs_transformers"]["transformers_bf16"] = \
        reference["loss_bf16"]
    print("%-46s transformers %.6f (fp32 on the weights as stored)" % (
        "", plain))

    # The export: the step-1 checkpoint's tensors bit for bit, loaded by
    # from_pretrained.
    step_dir = os.path.join(args.checkpoint_dir, "step-1")
    exported = safetensors_dir(args.export)
    saved = safetensors_dir(step_dir)
    differ = sorted(k for k in set(exported) | set(saved)
                    if k not in exported or k not in saved
                    or exported[k].dtype != saved[k].dtype
                    or not torch.equal(exported[k], saved[k]))
    checks["export_equals_step1_checkpoint"] = {
        "tensors": len(exported), "differ": differ[:8], "pass": not differ}
    print("%-46s %d tensors, %d differ  %s" % (
        "--save-hf export vs the step-1 checkpoint", len(exported),
        len(differ), "ok" if not differ else "FAIL " + ", ".join(differ[:4])))
    del exported, saved
    plain, as_read, logits = reference_losses(args.export, tokens,
                                              args.recipe)
    checks["export_loss_vs_octet_forward"] = compare(
        "octet's loss on the export vs transformers'", run2[1], as_read, tol)
    checks["export_loss_vs_octet_forward"]["transformers_plain_fp32"] = plain
    print("%-46s transformers %.6f (fp32 on the weights as stored)" % (
        "", plain))
    step1 = model_from_checkpoint(args.work, step_dir)
    _, logits1 = causal_lm_loss(step1, tokens)
    del step1
    max_diff = float((logits - logits1).abs().max())
    checks["export_logits_vs_step1_checkpoint"] = {
        "max_abs_difference": max_diff, "pass": max_diff == 0.0}
    print("%-46s max |difference| %.3g  %s" % (
        "logits: export vs step-1 checkpoint", max_diff,
        "ok" if max_diff == 0.0 else "FAIL"))

    results["pass"] = all(c["pass"] for c in checks.values())
    with open(args.json, "w") as f:
        json.dump(results, f, indent=1)
    print("hf oracle (%s): %s" % (args.recipe,
                                  "PASS" if results["pass"] else "FAIL"))
    return 0 if results["pass"] else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make")
    make.add_argument("--out", required=True)
    make.add_argument("--seq-len", type=int, default=4096)
    make.add_argument("--layers", type=int, default=2)
    make.add_argument("--seed", type=int, default=0)
    make.add_argument("--tiny", action="store_true")
    check = sub.add_parser("check")
    check.add_argument("--work", required=True)
    check.add_argument("--recipe", choices=["bf16", "fp8"], required=True)
    check.add_argument("--run1-log", required=True)
    check.add_argument("--checkpoint-dir", required=True)
    check.add_argument("--export", required=True)
    check.add_argument("--run2-log", required=True)
    check.add_argument("--json", required=True)
    args = parser.parse_args()
    if args.command == "make":
        return cmd_make(args) or 0
    return cmd_check(args)


if __name__ == "__main__":
    sys.exit(main())
