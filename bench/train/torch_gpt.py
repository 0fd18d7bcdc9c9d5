"""The PyTorch peer of tandem-bench-train --model gpt: the same GPT (GPT-2's layout: pre-LayerNorm
blocks, GELU-tanh MLP, tied head, GPT-2 initialisation), the same AdamW groups and the same batch,
timed the same way (median of per-step wall times; a device synchronisation ends each step on a
GPU), printing one JSON line with tokens_per_s. Debian's PyTorch 1.13 has no fused attention, so
by default attention is written out (q k^T, causal mask, softmax, p v) on every torch version;
`--attention sdpa --fused-adamw` is PyTorch 2's fastest eager step on a GPU (flash attention and the
fused AdamW kernel, as tandem runs them), and `--compile` adds torch.compile on top. Tooling only:
tandem itself never needs Python.

    /usr/bin/python3 bench/train/torch_gpt.py --gpt-size small --batch-size 8 --threads 1
    python3 bench/train/torch_gpt.py --gpt-size gpt2-124m --device cuda --amp bf16 --attention sdpa --fused-adamw
"""
import argparse
import json
import math
import os
import sys


def _blas_threads_from_argv(argv):
    """A BLAS that keeps its own thread pool (Debian's OpenBLAS pthreads) sizes it from
    OPENBLAS_NUM_THREADS / OMP_NUM_THREADS when torch is imported, and torch.set_num_threads does not
    reach it: without this, --threads 1 measured PyTorch on both cores of a 2-core VM (5,524 tokens/s
    instead of 3,434). --threads N sets both before the import unless the caller set them."""
    for i, arg in enumerate(argv):
        value = arg.split("=", 1)[1] if arg.startswith("--threads=") else (
            argv[i + 1] if arg == "--threads" and i + 1 < len(argv) else None)
        if value:
            os.environ.setdefault("OPENBLAS_NUM_THREADS", value)
            os.environ.setdefault("OMP_NUM_THREADS", value)


_blas_threads_from_argv(sys.argv[1:])

import torch  # noqa: E402  (after the BLAS thread count is set)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_step  # noqa: E402  (the shared timing loop)

SIZES = {  # n_layer, n_head, n_embd, context, vocab (as nn::GPTConfig::preset)
    "tiny": (2, 2, 32, 16, 256),
    "small": (4, 4, 256, 128, 256),
    "gpt2-124m": (12, 12, 768, 1024, 50304),
}


class Block(nn.Module):
    def __init__(self, c, h, sdpa):
        super().__init__()
        self.n_head, self.sdpa = h, sdpa
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.attn_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).view(b, t, 3, self.n_head, c // self.n_head).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.attn_proj(y.transpose(1, 2).reshape(b, t, c))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        return self.attn_proj((att @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, context, vocab, sdpa=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(context, n_embd)
        self.h = nn.ModuleList(Block(n_embd, n_head, sdpa) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            elif name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, ids):
        pos = torch.arange(ids.size(1), device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # the tied head


def matmul_gflops(dev, n=30):
    """The f32 rate of one product of the small GPT's shape ([1024, 768] x [768, 256], median of n) on
    the CPU: a check that the peer's BLAS is a fair one. OpenBLAS 0.3.21 does not know newer Xeons
    (CPU model 207 read as "Prescott", SSE kernels: 23 GFLOP/s where OPENBLAS_CORETYPE=SkylakeX gives
    ~130) and Debian's default BLAS is the reference one; either shows here."""
    if dev.type != "cpu":
        return None
    import time
    a, b = torch.randn(1024, 768), torch.randn(768, 256)
    times = []
    for _ in range(n + 3):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    times = sorted(times[3:])
    return 2 * 1024 * 768 * 256 / times[len(times) // 2] / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpt-size", default="small", choices=list(SIZES))
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--context", type=int, default=0)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--amp", default="off", choices=["off", "bf16"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--attention", default="written", choices=["written", "sdpa"])
    ap.add_argument("--fused-adamw", action="store_true", help="AdamW(fused=True): one kernel for all tensors")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    n_layer, n_head, n_embd, context, vocab = SIZES[a.gpt_size]
    t = a.context or context
    dev = torch.device(a.device)
    torch.manual_seed(0)
    model = GPT(n_layer, n_head, n_embd, t, vocab, sdpa=a.attention == "sdpa").to(dev)
    run = torch.compile(model) if a.compile else model
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-4, **({"fused": True} if a.fused_adamw else {}))
    ids = torch.randint(0, vocab, (a.batch_size, t + 1), device=dev)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].reshape(-1).contiguous()
    dtype = torch.bfloat16 if a.amp == "bf16" else None

    def forward_loss():
        with torch.autocast(dev.type, dtype=dtype, enabled=dtype is not None):
            return F.cross_entropy(run(x).reshape(-1, vocab).float(), y)

    blas = matmul_gflops(dev)
    med, cpu = torch_step.step_seconds(opt, forward_loss, dev, a.warmup, a.steps)
    print(json.dumps({"impl": "torch " + torch.__version__, "model": "gpt", "gpt_size": a.gpt_size,
                      "batch": a.batch_size, "context": t, "threads": a.threads, "amp": a.amp, "device": str(dev),
                      "attention": a.attention, "fused_adamw": a.fused_adamw, "compile": a.compile,
                      "params": sum(p.numel() for p in model.parameters()),
                      "tokens_per_s": a.batch_size * t / med, "step_ms_median": 1e3 * med,
                      "tokens_per_cpu_s": a.batch_size * t / cpu,
                      "matmul_gflops": blas}))


if __name__ == "__main__":
    main()
