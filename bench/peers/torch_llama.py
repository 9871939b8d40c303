#!/usr/bin/env python3
"""PyTorch peer for octet's training benchmark: a Llama decoder written in
plain PyTorch, trained with torch.compile, in BF16 or with FP8 linears.

Modes:
  bf16  every matmul in BF16 (fp32 master weights, cast per use), fp32 norms
        and softmax statistics, AdamW (fused) on fp32 weights.
  fp8   the transformer-block linears (q, k, v, o, gate, up, down) through
        torch._scaled_mm with tensorwise dynamic ("current") scaling: E4M3
        activations and weights in forward with fast accumulation, E5M2
        output gradients in backward without it. Embedding and LM head stay
        BF16, as octet's default precision policy keeps them.
  fp8ao_tensorwise, fp8ao_rowwise
        the same block linears as torch.nn.Linear converted by torchao.float8's
        convert_to_float8_training with its "tensorwise" or "rowwise" recipe
        (dynamic scaling; fp32 weights, the blocks run under BF16 autocast),
        as torchtitan's float8 option does. torchao is imported from
        --torchao-path when given (a carried wheel or folder), else from the
        environment.

Attention goes through F.scaled_dot_product_attention with --sdpa choosing
the backend (cudnn, flash, or by default whatever PyTorch picks); after timing, one
profiled step records the attention kernels that really ran ("sdpa_kernels"
in the JSON), so every row says which backend it used.

Compilation follows torchtitan: each transformer block and the LM head +
loss are compiled (one compiled graph shared by all blocks), the rest runs
eagerly. Attention is F.scaled_dot_product_attention (flash backend, causal,
GQA).

Model FLOPs per token (the figure behind TFLOP/s and MFU):
    6 * N_matmul + 6 * L * H * Dh * S
N_matmul counts the parameters that enter matrix products (every linear of
every block and the LM head; the embedding lookup is no matmul). The second
term is causal attention: QK^T and PV are 2 * 2 * S * H * Dh FLOPs per token
forward if the full S x S square were computed, halved for the causal
triangle, times 3 for forward + backward. (PaLM's 12 * L * H * Dh * S counts
the full square.)

Data parallelism: started by torchrun with WORLD_SIZE > 1, every rank trains
its own micro-batch of --batch sequences (its own data seed) and the ranks
meet in the gradients, as torchtitan does it:
  --dp fsdp2 (default)  torch.distributed.fsdp.fully_shard on the embedding,
        every transformer block, the final norm + LM head (kept unsharded
        after forward, backward needs it at once) and then the root;
        MixedPrecisionPolicy with BF16 parameters (all-gathered in BF16) and
        float32 gradient reduction. The compiled blocks are what is sharded,
        so the FSDP hooks run outside the compiled graphs. In FP8 mode the
        _scaled_mm linears quantize the all-gathered BF16 weight in forward,
        as torchao's float8 training does with FSDP2 when its FP8 all-gather
        is off; their weight gradient comes out in the parameter's dtype
        (BF16) and FSDP2 reduce-scatters it in float32.
  --dp ddp  DistributedDataParallel over the fp32 model (default bucket size,
        gradients as bucket views), the same per-block compilation; dynamo's
        DDP graph splitting is off, so a block's gradients reach DDP when the
        block's compiled backward ends.
The global batch is micro-batch x world size unless --global-batch asks for
more, which is then reached by gradient accumulation (no gradient sync but
on the last micro-batch). NVLink multicast stays off: NCCL_NVLS_ENABLE is set
to 0 where unset, and any other value is refused.
Tokens/s are reported for the job and per GPU; TFLOP/s and MFU per GPU.

With --device cpu (torchrun or not) the ranks meet over gloo: a smoke test
for the tiny model, without --no-compile only where inductor can build for
the CPU.

Writes one JSON object per run (see --out), from rank 0 only.
"""

import argparse
import contextlib
import json
import math
import os
import shlex
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

BF16_PEAK_TFLOPS = 989.0  # H100 SXM dense BF16
FP8_PEAK_TFLOPS = 1979.0  # H100 SXM dense FP8

MODELS = {
    # meta-llama/Llama-3.2-1B
    "llama3.2-1b": dict(vocab=128256, dim=2048, layers=16, heads=32,
                        kv_heads=8, ffn=8192, rope_theta=500000.0,
                        tie_embeddings=True),
    # meta-llama/Meta-Llama-3-8B shapes with 8 of its 32 layers
    "llama3-8b-8l": dict(vocab=128256, dim=4096, layers=8, heads=32,
                         kv_heads=8, ffn=14336, rope_theta=500000.0,
                         tie_embeddings=False),
    # for smoke tests on a CPU
    "tiny": dict(vocab=512, dim=128, layers=2, heads=4, kv_heads=2, ffn=256,
                 rope_theta=10000.0, tie_embeddings=False),
    # the same with the embedding as LM head, as Llama 3.2 1B has it
    "tiny-tied": dict(vocab=512, dim=128, layers=2, heads=4, kv_heads=2,
                      ffn=256, rope_theta=10000.0, tie_embeddings=True),
}

E4M3_MAX = torch.finfo(torch.float8_e4m3fn).max
E5M2_MAX = torch.finfo(torch.float8_e5m2).max


def to_fp8(x, dtype, fmax):
    """Tensorwise current scaling: returns (x * scale in fp8, 1 / scale)."""
    amax = x.abs().amax().float().clamp(min=1e-12)
    scale = fmax / amax
    x8 = (x.float() * scale).clamp(-fmax, fmax).to(dtype)
    return x8, scale.reciprocal()


class Fp8Matmul(torch.autograd.Function):
    """y = x @ w^T with x [M, K] bf16 and w [N, K]."""

    @staticmethod
    def forward(ctx, x, w):
        x8, xs_inv = to_fp8(x, torch.float8_e4m3fn, E4M3_MAX)
        w8, ws_inv = to_fp8(w, torch.float8_e4m3fn, E4M3_MAX)
        # _scaled_mm wants A row-major and B column-major (TN).
        y = torch._scaled_mm(x8, w8.t(), scale_a=xs_inv, scale_b=ws_inv,
                             out_dtype=torch.bfloat16, use_fast_accum=True)
        ctx.save_for_backward(x8, xs_inv, w8, ws_inv)
        # fp32 master weights take an fp32 gradient; under FSDP2 the weight
        # is the all-gathered BF16 copy and its gradient is BF16 (autograd
        # would cast an fp32 one down anyway).
        ctx.grad_dtype = w.dtype
        return y

    @staticmethod
    def backward(ctx, gy):
        x8, xs_inv, w8, ws_inv = ctx.saved_tensors
        g8, gs_inv = to_fp8(gy, torch.float8_e5m2, E5M2_MAX)
        # dgrad: dx [M, K] = gy [M, N] @ w [N, K]; B must be column-major.
        w8_cm = w8.t().contiguous().t()
        dx = torch._scaled_mm(g8, w8_cm, scale_a=gs_inv, scale_b=ws_inv,
                              out_dtype=torch.bfloat16, use_fast_accum=False)
        # wgrad: dw [N, K] = gy^T [N, M] @ x [M, K].
        g8_t = g8.t().contiguous()
        x8_cm = x8.t().contiguous().t()
        dw = torch._scaled_mm(g8_t, x8_cm, scale_a=gs_inv, scale_b=xs_inv,
                              out_dtype=ctx.grad_dtype, use_fast_accum=False)
        return dx, dw


class Linear(nn.Module):
    def __init__(self, fan_in, fan_out, fp8):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(fan_out, fan_in))
        nn.init.normal_(self.weight, std=0.02)
        self.fp8 = fp8

    def forward(self, x):
        if self.fp8:
            shape = x.shape
            y = Fp8Matmul.apply(x.reshape(-1, shape[-1]), self.weight)
            return y.reshape(*shape[:-1], y.shape[-1])
        return F.linear(x, self.weight.to(torch.bfloat16))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight).to(torch.bfloat16)


def rope_tables(seq, head_dim, theta, device):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device).float()
                           / head_dim))
    t = torch.arange(seq, device=device).float()
    freqs = torch.outer(t, inv)
    return freqs.cos(), freqs.sin()


def apply_rope(x, cos, sin):
    # x [B, S, H, Dh], rotate-half convention (HF Llama).
    x1, x2 = x.float().chunk(2, dim=-1)
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    return out.to(torch.bfloat16)


# Set from --sdpa before the model is compiled: True where a named backend
# runs, which then sees as many kv heads as query heads.
EXPAND_KV_HEADS = [False]


def plain_linear(fan_in, fan_out):
    """A torch.nn.Linear, the module torchao.float8 converts."""
    lin = nn.Linear(fan_in, fan_out, bias=False)
    nn.init.normal_(lin.weight, std=0.02)
    return lin


BLOCK_LINEARS = ("wq", "wk", "wv", "wo", "w1", "w2", "w3")


class Block(nn.Module):
    def __init__(self, cfg, fp8, torchao=False):
        super().__init__()
        d, h, kv = cfg["dim"], cfg["heads"], cfg["kv_heads"]
        self.h, self.kv, self.dh = h, kv, d // h

        def linear(fan_in, fan_out):
            if torchao:
                return plain_linear(fan_in, fan_out)
            return Linear(fan_in, fan_out, fp8)
        self.attn_norm = RMSNorm(d)
        self.wq = linear(d, h * self.dh)
        self.wk = linear(d, kv * self.dh)
        self.wv = linear(d, kv * self.dh)
        self.wo = linear(h * self.dh, d)
        self.mlp_norm = RMSNorm(d)
        self.w1 = linear(d, cfg["ffn"])
        self.w3 = linear(d, cfg["ffn"])
        self.w2 = linear(cfg["ffn"], d)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        n = self.attn_norm(x)
        q = apply_rope(self.wq(n).view(b, s, self.h, self.dh), cos, sin)
        k = apply_rope(self.wk(n).view(b, s, self.kv, self.dh), cos, sin)
        v = self.wv(n).view(b, s, self.kv, self.dh)
        if EXPAND_KV_HEADS[0] and self.kv != self.h:
            # A backend chosen by --sdpa may not take GQA: the kv heads are
            # repeated for it (their gradient is summed back by autograd).
            k = k.repeat_interleave(self.h // self.kv, dim=2)
            v = v.repeat_interleave(self.h // self.kv, dim=2)
        a = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            is_causal=True, enable_gqa=k.shape[2] != self.h)
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, -1))
        n = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(n)) * self.w3(n))


class Head(nn.Module):
    def __init__(self, cfg, embedding):
        super().__init__()
        self.norm = RMSNorm(cfg["dim"])
        self.tied = embedding if cfg["tie_embeddings"] else None
        if self.tied is None:
            self.weight = nn.Parameter(torch.empty(cfg["vocab"], cfg["dim"]))
            nn.init.normal_(self.weight, std=0.02)

    def forward(self, x, labels):
        w = self.tied.weight if self.tied is not None else self.weight
        logits = F.linear(self.norm(x), w.to(torch.bfloat16))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                               labels.reshape(-1))


class Llama(nn.Module):
    def __init__(self, cfg, fp8, torchao=False):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg["vocab"], cfg["dim"])
        nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(cfg, fp8, torchao)
                                    for _ in range(cfg["layers"]))
        self.head = Head(cfg, self.embed)
        # torchao's Float8Linear takes fp32 weights and BF16 inputs under
        # autocast, as in its own mixed-precision use.
        self.autocast = torchao

    def forward(self, tokens, labels, cos, sin):
        x = self.embed(tokens).to(torch.bfloat16)
        with torch.autocast("cuda", dtype=torch.bfloat16,
                            enabled=self.autocast):
            for blk in self.blocks:
                x = blk(x, cos, sin)
        return self.head(x, labels)


def convert_torchao(model, recipe, path):
    """Swaps the block linears for torchao.float8's Float8Linear."""
    if path and path.endswith(".whl"):
        # A wheel holds compiled extensions, which zipimport cannot load.
        import tempfile
        import zipfile
        folder = tempfile.mkdtemp(prefix="torchao-")
        zipfile.ZipFile(path).extractall(folder)
        path = folder
    if path:
        sys.path.insert(0, path)
    try:
        import torchao
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except ImportError as e:
        raise SystemExit("torch_llama.py: mode fp8ao_%s needs torchao "
                         "(pip install torchao, or --torchao-path to a "
                         "carried wheel or folder): %s" % (recipe, e))
    config = Float8LinearConfig.from_recipe_name(recipe)
    convert_to_float8_training(
        model, config=config,
        module_filter_fn=lambda mod, fqn: fqn.split(".")[-1] in BLOCK_LINEARS)
    converted = sum(type(m).__name__ == "Float8Linear" for m in model.modules())
    if converted != len(BLOCK_LINEARS) * len(model.blocks):
        raise SystemExit("torch_llama.py: torchao converted %d linears, "
                         "expected %d" % (converted,
                                          len(BLOCK_LINEARS) * len(model.blocks)))
    return torchao.__version__


SDPA_BACKENDS = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION",
                 "efficient": "EFFICIENT_ATTENTION"}


def sdpa_context(name):
    if name == "auto":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel([getattr(SDPBackend, SDPA_BACKENDS[name])])


def step_kernels(step, top=40):
    """One step under the profiler: the names of its attention kernels, and
    its `top` kernels by device time (name, calls, ms), for comparing where
    the step goes with octet-profile's table."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    events = prof.key_averages()
    words = ("flash", "fmha", "cudnn", "attention", "sdpa", "efficient")
    names = {e.key for e in events
             if any(w in e.key.lower() for w in words)}
    timed = sorted(((e.key, e.count, e.device_time_total / 1e3)
                    for e in events if e.device_time_total > 0),
                   key=lambda k: -k[2])
    kernels = [dict(name=n[:160], calls=c, ms=round(ms, 3))
               for n, c, ms in timed[:top]]
    return sorted(n[:160] for n in names), kernels


def matmul_params(cfg):
    d, h, kv, f = cfg["dim"], cfg["heads"], cfg["kv_heads"], cfg["ffn"]
    dh = d // h
    per_layer = d * h * dh + 2 * d * kv * dh + h * dh * d + 3 * d * f
    return cfg["layers"] * per_layer + cfg["vocab"] * d


def flops_per_token(cfg, seq):
    dh = cfg["dim"] // cfg["heads"]
    return (6 * matmul_params(cfg)
            + 6 * cfg["layers"] * cfg["heads"] * dh * seq)


class Ranks:
    """torchrun's view of this process: rank, world size, local rank."""

    def __init__(self):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local = int(os.environ.get("LOCAL_RANK", "0"))
        self.distributed = self.world > 1

    def device(self, kind):
        if kind == "cuda":
            return torch.device("cuda", self.local)
        return torch.device(kind)


def keep_nvls_off():
    """NVLink multicast (NVLS) stays off on the GPU host."""
    value = os.environ.get("NCCL_NVLS_ENABLE")
    if value is None:
        os.environ["NCCL_NVLS_ENABLE"] = "0"
    elif value.strip() != "0":
        raise SystemExit(
            "torch_llama.py: NCCL_NVLS_ENABLE=%s, but NVLink multicast must "
            "stay off on the GPU host; unset it or set NCCL_NVLS_ENABLE=0"
            % value)


def start_process_group(ranks, dev):
    if dev.type == "cuda":
        keep_nvls_off()
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)
    else:
        dist.init_process_group("gloo")
    if dist.get_world_size() != ranks.world or dist.get_rank() != ranks.rank:
        raise SystemExit("torch_llama.py: the process group (rank %d of %d) "
                         "disagrees with RANK/WORLD_SIZE (%d of %d)"
                         % (dist.get_rank(), dist.get_world_size(),
                            ranks.rank, ranks.world))


def compile_per_block(model):
    """torch.compile each block and the head + loss, the way torchtitan does:
    the compiled wrappers replace the modules, so data-parallel wrappers
    applied afterwards keep their hooks outside the compiled graphs. The
    blocks share one compiled graph."""
    for i, blk in enumerate(model.blocks):
        model.blocks[i] = torch.compile(blk)
    model.head = torch.compile(model.head)


def shard_fsdp2(model, cfg):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    # Inputs are not cast: the rope tables stay fp32 as on one GPU, and the
    # activations are BF16 already.
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                              reduce_dtype=torch.float32,
                              cast_forward_inputs=False)
    tied = cfg["tie_embeddings"]
    if not tied:
        # A tied embedding is the head's weight too: it stays with the root,
        # whose parameters FSDP2 keeps unsharded from forward to backward.
        fully_shard(model.embed, mp_policy=mp)
    for blk in model.blocks:
        fully_shard(blk, mp_policy=mp)
    if not tied:
        fully_shard(model.head, mp_policy=mp, reshard_after_forward=False)
    fully_shard(model, mp_policy=mp)
    return model


def wrap_ddp(model, dev):
    from torch.nn.parallel import DistributedDataParallel
    # Inside DDP's forward dynamo would cut every compiled block at bucket
    # boundaries; one graph per block keeps the block's fusions, and the
    # block's gradients still reach DDP while earlier blocks run backward.
    torch._dynamo.config.optimize_ddp = False
    return DistributedDataParallel(
        model, device_ids=[dev.index] if dev.type == "cuda" else None,
        gradient_as_bucket_view=True)


def nccl_version():
    try:
        return ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:  # a CPU-only build has no NCCL
        return None


def run(args, ranks):
    cfg = MODELS[args.model]
    dev = ranks.device(args.device)
    if ranks.distributed:
        start_process_group(ranks, dev)
    elif dev.type == "cuda":
        torch.cuda.set_device(dev)
    dp = args.dp if ranks.distributed else "none"
    micro = args.batch * ranks.world
    global_batch = args.global_batch or micro
    if global_batch % micro:
        raise SystemExit("torch_llama.py: --global-batch %d is not a multiple "
                         "of --batch %d x %d ranks"
                         % (global_batch, args.batch, ranks.world))
    accum = global_batch // micro
    # Every rank builds the same initial weights; only the data differs.
    # They are drawn on the device: on the host normal_ took 16 s for 0.28 G
    # values on two cores, and the 8B-shaped model has 2.8 G.
    torch.manual_seed(0)
    EXPAND_KV_HEADS[0] = args.sdpa != "auto"
    torchao_recipe = (args.mode.split("_")[-1]
                      if args.mode.startswith("fp8ao_") else None)
    with dev:
        model = Llama(cfg, fp8=(args.mode == "fp8"),
                      torchao=torchao_recipe is not None)
    torchao_version = (convert_torchao(model, torchao_recipe, args.torchao_path)
                       if torchao_recipe else None)
    total_params = sum(p.numel() for p in model.parameters())
    if args.compile:
        compile_per_block(model)
    if dp == "fsdp2":
        model = shard_fsdp2(model, cfg)
    elif dp == "ddp":
        model = wrap_ddp(model, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95),
                            weight_decay=0.1, fused=(dev.type == "cuda"))
    cos, sin = rope_tables(args.seq, cfg["dim"] // cfg["heads"],
                           cfg["rope_theta"], dev)
    gen = torch.Generator(device="cpu").manual_seed(1 + ranks.rank)

    def batch():
        t = torch.randint(0, cfg["vocab"], (args.batch, args.seq + 1),
                          generator=gen)
        t = t.to(dev, non_blocking=True)
        return t[:, :-1], t[:, 1:]

    def gradient_sync(last):
        """Gradients meet on the last micro-batch of a step only."""
        if dp == "fsdp2":
            model.set_requires_gradient_sync(last)
        elif dp == "ddp" and not last:
            return model.no_sync()
        return contextlib.nullcontext()

    def step():
        total = 0.0
        for i in range(accum):
            tokens, labels = batch()
            with gradient_sync(i == accum - 1), sdpa_context(args.sdpa):
                loss = model(tokens, labels, cos, sin)
                (loss / accum if accum > 1 else loss).backward()
            total = total + loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return total / accum

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    t0 = time.perf_counter()
    losses = []
    for _ in range(args.warmup):
        losses.append(step())
    sync()
    if ranks.distributed:
        dist.barrier()
    warm_s = time.perf_counter() - t0
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - t)
        losses.append(loss)
    losses = torch.stack([torch.as_tensor(x, dtype=torch.float32,
                                          device=dev) for x in losses])
    step_s = torch.tensor(times, dtype=torch.float64, device=dev)
    mem = torch.zeros(2, dtype=torch.float64, device=dev)
    if dev.type == "cuda":
        mem[0] = torch.cuda.max_memory_allocated(dev) / 2**30
        mem[1] = torch.cuda.max_memory_reserved(dev) / 2**30
    if ranks.distributed:
        # The job's loss is the mean over ranks; a step lasts as long as its
        # slowest rank; memory is the most any rank held.
        dist.all_reduce(losses, op=dist.ReduceOp.SUM)
        losses /= ranks.world
        dist.all_reduce(step_s, op=dist.ReduceOp.MAX)
        dist.all_reduce(mem, op=dist.ReduceOp.MAX)
    losses = losses.tolist()
    times = step_s.tolist()
    sdpa_kernels, top_kernels = (step_kernels(step) if dev.type == "cuda"
                                 else ([], []))
    ordered = sorted(times)
    median = ordered[len(ordered) // 2]
    tokens = global_batch * args.seq
    tps = tokens / median
    tps_gpu = tps / ranks.world
    fpt = flops_per_token(cfg, args.seq)
    tflops = tps_gpu * fpt / 1e12
    res = dict(
        peer="torch.compile" if args.compile else "torch eager",
        mode=args.mode, torchao=torchao_version, sdpa=args.sdpa,
        sdpa_kernels=sdpa_kernels, top_kernels=top_kernels,
        model=args.model, seq=args.seq, batch=args.batch,
        world_size=ranks.world, dp=dp, micro_batch_per_rank=args.batch,
        global_batch=global_batch, grad_accum_steps=accum,
        tokens_per_step=tokens, params=total_params,
        matmul_params=matmul_params(cfg), torch=torch.__version__,
        nccl=nccl_version() if dev.type == "cuda" else None,
        backend=(dist.get_backend() if ranks.distributed else None),
        nccl_nvls_enable=os.environ.get("NCCL_NVLS_ENABLE"),
        device=(torch.cuda.get_device_name(dev) if dev.type == "cuda"
                else "cpu"),
        command=shlex.join([sys.executable] + sys.argv),
        torchrun=dict((k, os.environ[k]) for k in (
            "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
            "MASTER_ADDR", "MASTER_PORT") if k in os.environ),
        warmup_steps=args.warmup, timed_steps=args.steps,
        warmup_s=round(warm_s, 2),
        step_s_median=median, step_s_min=ordered[0], step_s_max=ordered[-1],
        step_s_mean=sum(times) / len(times),
        step_s=[round(x, 5) for x in times],
        step_time_note="slowest rank per step" if ranks.distributed
        else "one process",
        tokens_per_s=tps,
        tokens_per_s_per_gpu=tps_gpu,
        flops_per_token=fpt,
        flop_formula="6*N_matmul + 6*L*H*Dh*S (causal attention)",
        model_tflops=tflops,
        tflops_per_gpu=tflops,
        mfu_bf16_peak=tflops / BF16_PEAK_TFLOPS,
        mfu_fp8_peak=tflops / FP8_PEAK_TFLOPS,
        peaks_tflops=dict(bf16=BF16_PEAK_TFLOPS, fp8=FP8_PEAK_TFLOPS),
        losses=[round(x, 4) for x in losses],
    )
    if dev.type == "cuda":
        # max over ranks
        res["peak_mem_allocated_gib"] = mem[0].item()
        res["peak_mem_reserved_gib"] = mem[1].item()
    if not all(math.isfinite(x) for x in losses):
        res["error"] = "non-finite loss"
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), required=True)
    p.add_argument("--mode", required=True,
                   choices=["bf16", "fp8", "fp8ao_tensorwise",
                            "fp8ao_rowwise"])
    p.add_argument("--sdpa", choices=["auto"] + sorted(SDPA_BACKENDS),
                   default="auto",
                   help="scaled_dot_product_attention's backend (auto: "
                        "PyTorch's choice, GQA in the kernel; a named one "
                        "gets the kv heads repeated)")
    p.add_argument("--torchao-path",
                   help="a torchao wheel or folder to import it from")
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--batch", type=int, default=1,
                   help="micro-batch of sequences per rank")
    p.add_argument("--global-batch", type=int,
                   help="sequences per step over all ranks (default: "
                        "--batch x world size); more is gradient "
                        "accumulation")
    p.add_argument("--dp", choices=["fsdp2", "ddp"], default="fsdp2",
                   help="data parallelism under torchrun with WORLD_SIZE > 1")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--no-compile", dest="compile", action="store_false")
    p.add_argument("--out", help="write the JSON result here (rank 0)")
    args = p.parse_args()
    ranks = Ranks()
    try:
        res = run(args, ranks)
    except torch.OutOfMemoryError as e:
        # The other ranks wait in a collective until torchrun ends them.
        res = dict(mode=args.mode, model=args.model, seq=args.seq,
                   batch=args.batch, world_size=ranks.world,
                   dp=args.dp if ranks.distributed else "none",
                   rank=ranks.rank,
                   error="out of memory: " + str(e)[:300])
    else:
        if ranks.distributed:
            dist.destroy_process_group()
    if ranks.rank == 0:
        text = json.dumps(res, indent=1)
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
    elif "error" in res:
        print("rank %d: %s" % (ranks.rank, res["error"]), file=sys.stderr)
    return 1 if "error" in res else 0


if __name__ == "__main__":
    sys.exit(main())
