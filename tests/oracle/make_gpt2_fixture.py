#!/usr/bin/python3
"""PyTorch oracle for the C GPT-2 trainer (tests/train/test_gpt2_oracle.c).

Builds GPT-2 exactly as llm.c lays it out (16 tensors, tied lm-head, tanh GELU, layernorm eps 1e-5,
loss = mean cross-entropy over the first V of Vp logit columns), computes in float64 from float32
weights, and writes, for one small config:

  gpt2_tiny_model.bin    llm.c checkpoint (magic 20240326, version 3, fp32)
  gpt2_tiny_fixture.bin  256 x int32 header, then int32 x (B,T), int32 y (B,T), f32 logits
                         (B,T,Vp), f32 loss, f32 grads (nparams, llm.c order), f32 losses (steps)

Header: [0] magic 0x524f5447 ("GTOR"), [1] version 1, [2] B, [3] T, [4] nparams, [5] steps,
[6] Vp, [7] V; floats (as int32 bits) [8] lr, [9] beta1, [10] beta2, [11] eps, [12] weight_decay.
The `steps` losses are those of AdamW steps on the same batch (llm.c's test_gpt2.c scheme): loss
i is the forward loss before update i+1, with llm.c's update rule
  m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd p)
Run: /usr/bin/python3 tests/oracle/make_gpt2_fixture.py [OUTDIR]   (default: this folder)
"""
import math
import os
import struct
import sys

import torch

L, C, NH, V, MAXT = 2, 64, 4, 250, 32
VP = (V + 127) // 128 * 128
B, T = 4, 16
STEPS = 10
LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.999, 1e-8, 0.01
SEED = 1337


def shapes():
    return [
        ("wte", (VP, C)), ("wpe", (MAXT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
        ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)),
        ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)),
        ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)), ("lnfw", (C,)),
        ("lnfb", (C,)),
    ]


def init_params(gen):
    """GPT-2 init, with small random layernorm/bias values so their gradients are exercised."""
    p = {}
    for name, shape in shapes():
        if name in ("ln1w", "ln2w", "lnfw"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif name.endswith("b"):
            t = 0.02 * torch.randn(shape, generator=gen)
        elif name in ("attprojw", "fcprojw"):
            t = 0.02 / math.sqrt(2 * L) * torch.randn(shape, generator=gen)
        else:
            t = 0.02 * torch.randn(shape, generator=gen)
        p[name] = t.float()
    p["wte"][V:] = 0.0  # padded vocabulary rows
    return p


def forward(p, x, y):
    """Returns logits (B,T,Vp) and the mean loss over the real vocabulary."""
    Bx, Tx = x.shape
    hs = C // NH
    h = p["wte"][x] + p["wpe"][:Tx]
    mask = torch.ones(Tx, Tx, dtype=torch.bool).tril()
    for l in range(L):
        a = torch.nn.functional.layer_norm(h, (C,), p["ln1w"][l], p["ln1b"][l], eps=1e-5)
        qkv = a @ p["qkvw"][l].T + p["qkvb"][l]
        q, k, v = qkv.split(C, dim=-1)
        q = q.view(Bx, Tx, NH, hs).transpose(1, 2)
        k = k.view(Bx, Tx, NH, hs).transpose(1, 2)
        v = v.view(Bx, Tx, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        yy = (att @ v).transpose(1, 2).reshape(Bx, Tx, C)
        h = h + yy @ p["attprojw"][l].T + p["attprojb"][l]
        a = torch.nn.functional.layer_norm(h, (C,), p["ln2w"][l], p["ln2b"][l], eps=1e-5)
        f = torch.nn.functional.gelu(a @ p["fcw"][l].T + p["fcb"][l], approximate="tanh")
        h = h + f @ p["fcprojw"][l].T + p["fcprojb"][l]
    h = torch.nn.functional.layer_norm(h, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    logits = h @ p["wte"].T
    loss = torch.nn.functional.cross_entropy(logits[..., :V].reshape(-1, V), y.reshape(-1))
    return logits, loss


def f32_bits(v):
    return struct.unpack("<i", struct.pack("<f", v))[0]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    gen = torch.Generator().manual_seed(SEED)
    p32 = init_params(gen)
    tokens = torch.randint(0, V, (B * T + 1,), generator=gen)
    x = tokens[:-1].view(B, T)
    y = tokens[1:].view(B, T)

    hdr = [20240326, 3, MAXT, V, L, NH, C, VP] + [0] * 248
    with open(os.path.join(out, "gpt2_tiny_model.bin"), "wb") as f:
        f.write(struct.pack("<256i", *hdr))
        for name, _ in shapes():
            f.write(p32[name].contiguous().numpy().astype("<f4").tobytes())

    # float64 reference from the float32 weights
    p = {k: v.double().requires_grad_(True) for k, v in p32.items()}
    logits, loss = forward(p, x, y)
    loss.backward()
    grads = [p[name].grad.detach().clone() for name, _ in shapes()]
    nparams = sum(g.numel() for g in grads)

    # AdamW steps on the same batch, llm.c's formula, in float64
    losses = []
    m = {k: torch.zeros_like(v) for k, v in p.items()}
    vv = {k: torch.zeros_like(v) for k, v in p.items()}
    q = {k: v.detach().clone() for k, v in p.items()}
    for step in range(STEPS):
        for t in q.values():
            t.requires_grad_(True)
            t.grad = None
        _, l = forward(q, x, y)
        losses.append(l.item())
        l.backward()
        t_ = step + 1
        with torch.no_grad():
            for k in q:
                g = q[k].grad
                m[k] = BETA1 * m[k] + (1 - BETA1) * g
                vv[k] = BETA2 * vv[k] + (1 - BETA2) * g * g
                mh = m[k] / (1 - BETA1 ** t_)
                vh = vv[k] / (1 - BETA2 ** t_)
                q[k] = q[k] - LR * (mh / (vh.sqrt() + EPS) + WD * q[k])

    fh = [0x524F5447, 1, B, T, nparams, STEPS, VP, V,
          f32_bits(LR), f32_bits(BETA1), f32_bits(BETA2), f32_bits(EPS), f32_bits(WD)]
    fh += [0] * (256 - len(fh))
    with open(os.path.join(out, "gpt2_tiny_fixture.bin"), "wb") as f:
        f.write(struct.pack("<256i", *fh))
        f.write(x.numpy().astype("<i4").tobytes())
        f.write(y.numpy().astype("<i4").tobytes())
        f.write(logits.detach().float().numpy().astype("<f4").tobytes())
        f.write(struct.pack("<f", loss.item()))
        for g in grads:
            f.write(g.float().numpy().astype("<f4").tobytes())
        f.write(struct.pack("<%df" % STEPS, *losses))
    print("nparams %d loss %.6f losses %s" % (nparams, loss.item(),
                                               " ".join("%.6f" % v for v in losses)))


if __name__ == "__main__":
    main()
