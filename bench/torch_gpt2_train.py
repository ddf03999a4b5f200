#!/usr/bin/python3
"""The PyTorch peer of bench_train (issue 18 goal 2): the same GPT-2 step, tuned as a user who
wants CPU speed would run it, on the same llm.c checkpoint and the same unshuffled tokens.

  torch_gpt2_train.py --checkpoint model.bin --tokens tokens.u16 --B 4 --T 256 --steps 5
                      [--warmup 1] [--threads 2] [--lr 1e-4]

Prints "capability C openblas_core K" (ATen's CPU capability, OpenBLAS's core), one line per
step, "step I loss L ms M", then "median_ms M". The model is llm.c's layout
(16 tensors, tied lm-head, tanh GELU, layernorm eps 1e-5, loss over the first V of Vp logits);
batch i is tokens [i*B*T, (i+1)*B*T] as llm.c's unshuffled loader reads them; AdamW with
weight decay 0 (torch.optim.AdamW, foreach). Run with OMP_WAIT_POLICY=PASSIVE and malloc trimming
off (bench/train_vs_torch.sh sets both) - the settings that made PyTorch fastest here.
"""
import argparse
import ctypes
import math
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F

NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
         "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]


def load_checkpoint(path):
    with open(path, "rb") as f:
        hdr = struct.unpack("<256i", f.read(1024))
        if hdr[0] != 20240326 or hdr[1] != 3:
            raise SystemExit("%s: not an fp32 llm.c checkpoint (magic %d version %d)"
                             % (path, hdr[0], hdr[1]))
        maxT, V, L, NH, C, Vp = hdr[2:8]
        shapes = [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C),
                  (L, C), (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C),
                  (C,), (C,)]
        params = {}
        for name, shape in zip(NAMES, shapes):
            n = int(np.prod(shape))
            a = np.frombuffer(f.read(4 * n), dtype="<f4").reshape(shape)
            params[name] = torch.tensor(a).requires_grad_(True)
    return dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp), params


def forward(cfg, p, layers, x, y):
    B, T = x.shape
    C, NH, L, V = cfg["C"], cfg["NH"], cfg["L"], cfg["V"]
    hs = C // NH
    h = F.embedding(x, p["wte"]) + p["wpe"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        a = F.layer_norm(h, (C,), layers[l]["ln1w"], layers[l]["ln1b"], eps=1e-5)
        q, k, v = F.linear(a, layers[l]["qkvw"], layers[l]["qkvb"]).split(C, dim=-1)
        q = q.view(B, T, NH, hs).transpose(1, 2)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        yy = (att @ v).transpose(1, 2).reshape(B, T, C)
        h = h + F.linear(yy, layers[l]["attprojw"], layers[l]["attprojb"])
        a = F.layer_norm(h, (C,), layers[l]["ln2w"], layers[l]["ln2b"], eps=1e-5)
        f = F.gelu(F.linear(a, layers[l]["fcw"], layers[l]["fcb"]), approximate="tanh")
        h = h + F.linear(f, layers[l]["fcprojw"], layers[l]["fcprojb"])
    h = F.layer_norm(h, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    logits = h @ p["wte"].T
    return F.cross_entropy(logits[..., :V].reshape(-1, V), y.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--tokens", required=True, help="uint16 little-endian token stream")
    ap.add_argument("--B", type=int, required=True)
    ap.add_argument("--T", type=int, required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    # What ran, so the caller can check that ATEN_CPU_CAPABILITY / OPENBLAS_CORETYPE took effect.
    cap = [l.split(":", 1)[1].strip() for l in torch.__config__.show().splitlines()
           if "CPU capability usage" in l]
    try:
        blas = ctypes.CDLL("libopenblas.so.0")
        blas.openblas_get_corename.restype = ctypes.c_char_p
        core = blas.openblas_get_corename().decode()
    except OSError:
        core = "none"
    print("capability %s openblas_core %s" % (cap[0] if cap else "unknown", core), flush=True)
    cfg, p = load_checkpoint(a.checkpoint)
    tokens = torch.tensor(np.fromfile(a.tokens, dtype="<u2").astype(np.int64))
    bt = a.B * a.T
    if tokens.numel() < bt * (a.steps + a.warmup) + 1:
        raise SystemExit("%s: %d tokens, %d steps of B*T=%d need %d"
                         % (a.tokens, tokens.numel(), a.steps + a.warmup, bt,
                            bt * (a.steps + a.warmup) + 1))
    # Each layer's parameters are leaves of their own: indexing one stacked [L, ...] tensor per
    # layer would make autograd build a zero-filled gradient of the whole stack for every layer
    # (select's backward), L times the traffic a tuned model has. wte/wpe and the final layernorm
    # stay as they are.
    per_layer = [k for k in p if p[k].dim() > 0 and p[k].shape[0] == cfg["L"] and k not in
                 ("wte", "wpe", "lnfw", "lnfb")]
    layers = [{k: p[k][l].detach().clone().requires_grad_(True) for k in per_layer}
              for l in range(cfg["L"])]
    params = [p[k] for k in p if k not in per_layer] + [t for d in layers for t in d.values()]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0, foreach=True)
    times = []
    for s in range(a.warmup + a.steps):
        x = tokens[s * bt:(s + 1) * bt].view(a.B, a.T)
        y = tokens[s * bt + 1:(s + 1) * bt + 1].view(a.B, a.T)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = forward(cfg, p, layers, x, y)
        loss.backward()
        opt.step()
        ms = (time.perf_counter() - t0) * 1e3
        print("step %d loss %.6f ms %.1f" % (s, loss.item(), ms), flush=True)
        if s >= a.warmup:
            times.append(ms)
    times.sort()
    print("median_ms %.1f" % times[len(times) // 2])


if __name__ == "__main__":
    main()
