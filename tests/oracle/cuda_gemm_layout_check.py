# Checks, without a GPU, the cuBLAS calls of src/kernels/cuda/matmul.cu and attention.cu: emulates
# column-major (strided batched) sgemm on flat arrays, replays each call with its exact arguments,
# and compares with row-major math; then composes attention forward/backward as attention.cu does,
# and as today's cpu kernel does (cpu_kernels.c: row-major cblas_sgemm calls per (b, h), replayed
# here with their exact arguments), and compares both with plain loops of the documented causal
# contract (docs/train.md: att read only at t2 <= t), with random att above the diagonal. It also
# shows that the cpu kernel's old dv (att over the whole T x T) breaks the contract, so the check
# can fail. The C twin that runs in CI on every cpu kernel is tests/kernels/test_kernel_contract.c;
# this script is what covers the cuBLAS argument layouts, which no CPU test can run.
# Run: /usr/bin/python3 tests/oracle/cuda_gemm_layout_check.py   (Debian: python3-numpy)
import numpy as np
rng = np.random.default_rng(1)

def sgemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, offA=0, offB=0, offC=0):
    # column-major: element (r, c) of X with leading dim ld is X[r + c*ld]
    def get(X, off, ld, rows, cols):
        M = np.empty((rows, cols))
        for c in range(cols):
            M[:, c] = X[off + c*ld: off + c*ld + rows]
        return M
    Am = get(A, offA, lda, k if ta == 'T' else m, m if ta == 'T' else k)
    Bm = get(B, offB, ldb, n if tb == 'T' else k, k if tb == 'T' else n)
    opA = Am.T if ta == 'T' else Am
    opB = Bm.T if tb == 'T' else Bm
    Cm = get(C, offC, ldc, m, n)
    R = alpha * opA @ opB + beta * Cm
    for c in range(n):
        C[offC + c*ldc: offC + c*ldc + m] = R[:, c]

def batched(ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch):
    for i in range(batch):
        sgemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, i*sA, i*sB, i*sC)

# matmul
N, Cc, OC = 7, 5, 3
inp = rng.standard_normal((N, Cc)); W = rng.standard_normal((OC, Cc)); dout = rng.standard_normal((N, OC))
out = np.zeros(N*OC)
sgemm('T', 'N', OC, N, Cc, 1.0, W.ravel(), Cc, inp.ravel(), Cc, 0.0, out, OC)
assert np.allclose(out.reshape(N, OC), inp @ W.T)
dinp = np.ones(N*Cc)
sgemm('N', 'N', Cc, N, OC, 1.0, W.ravel(), Cc, dout.ravel(), OC, 1.0, dinp, Cc)
assert np.allclose(dinp.reshape(N, Cc), 1 + dout @ W)
dW = np.ones(OC*Cc)
sgemm('N', 'T', Cc, OC, N, 1.0, inp.ravel(), Cc, dout.ravel(), OC, 1.0, dW, Cc)
assert np.allclose(dW.reshape(OC, Cc), 1 + dout.T @ inp)

# attention per (b,h) with q,k,v (T,hs) row-major, batch of 2
T, hs, batch = 6, 4, 2
q = rng.standard_normal((batch, T, hs)); k = rng.standard_normal((batch, T, hs)); v = rng.standard_normal((batch, T, hs))
scale = 1/np.sqrt(hs)
att = np.zeros(batch*T*T)
batched('T', 'N', T, T, hs, scale, k.ravel(), hs, T*hs, q.ravel(), hs, T*hs, 0.0, att, T, T*T, batch)
pre = np.einsum('bti,bsi->bts', q, k) * scale
assert np.allclose(att.reshape(batch, T, T), pre)
A = rng.random((batch, T, T)); A = np.tril(A)
y = np.zeros(batch*T*hs)
batched('N', 'N', hs, T, T, 1.0, v.ravel(), hs, T*hs, A.ravel(), T, T*T, 0.0, y, hs, T*hs, batch)
assert np.allclose(y.reshape(batch, T, hs), A @ v)
dO = rng.standard_normal((batch, T, hs))
datt = np.zeros(batch*T*T)
batched('T', 'N', T, T, hs, 1.0, v.ravel(), hs, T*hs, dO.ravel(), hs, T*hs, 0.0, datt, T, T*T, batch)
assert np.allclose(datt.reshape(batch, T, T), dO @ v.transpose(0, 2, 1))
dv = np.zeros(batch*T*hs)
batched('N', 'T', hs, T, T, 1.0, dO.ravel(), hs, T*hs, A.ravel(), T, T*T, 0.0, dv, hs, T*hs, batch)
assert np.allclose(dv.reshape(batch, T, hs), A.transpose(0, 2, 1) @ dO)
dpre = rng.standard_normal((batch, T, T))
dq = np.zeros(batch*T*hs)
batched('N', 'N', hs, T, T, 1.0, k.ravel(), hs, T*hs, dpre.ravel(), T, T*T, 0.0, dq, hs, T*hs, batch)
assert np.allclose(dq.reshape(batch, T, hs), dpre @ k)
dk = np.zeros(batch*T*hs)
batched('N', 'T', hs, T, T, 1.0, q.ravel(), hs, T*hs, dpre.ravel(), T, T*T, 0.0, dk, hs, T*hs, batch)
assert np.allclose(dk.reshape(batch, T, hs), dpre.transpose(0, 2, 1) @ q)
print("all cuBLAS call layouts check out")

# Whole attention forward/backward as attention.cu composes it vs the contract's loops.
B, T, NH, hs = 2, 5, 3, 4
C = NH*hs
inp = rng.standard_normal((B, T, 3*C)); dout = rng.standard_normal((B, T, C))
def contract_fwd(inp):
    out = np.zeros((B, T, C)); att = np.zeros((B, NH, T, T)); sc = 1/np.sqrt(hs)
    for b in range(B):
        for t in range(T):
            for h in range(NH):
                qv = inp[b, t, h*hs:(h+1)*hs]
                s = np.array([qv @ inp[b, t2, C+h*hs:C+(h+1)*hs] * sc for t2 in range(t+1)])
                e = np.exp(s - s.max()); a = e / e.sum()
                att[b, h, t, :t+1] = a
                out[b, t, h*hs:(h+1)*hs] = sum(a[t2]*inp[b, t2, 2*C+h*hs:2*C+(h+1)*hs] for t2 in range(t+1))
    return out, att
def contract_bwd(dout, inp, att):
    dinp = np.zeros((B, T, 3*C)); sc = 1/np.sqrt(hs)
    for b in range(B):
        for h in range(NH):
            for t in range(T):
                a = att[b, h, t]; d = dout[b, t, h*hs:(h+1)*hs]; qv = inp[b, t, h*hs:(h+1)*hs]
                datt = np.zeros(T); dot = 0
                for t2 in range(t+1):
                    vv = inp[b, t2, 2*C+h*hs:2*C+(h+1)*hs]
                    datt[t2] = d @ vv; dinp[b, t2, 2*C+h*hs:2*C+(h+1)*hs] += a[t2]*d; dot += a[t2]*datt[t2]
                for t2 in range(t+1):
                    dp = a[t2]*(datt[t2]-dot)*sc
                    dinp[b, t, h*hs:(h+1)*hs] += dp*inp[b, t2, C+h*hs:C+(h+1)*hs]
                    dinp[b, t2, C+h*hs:C+(h+1)*hs] += dp*qv
    return dinp
def permute(inp):  # (B,T,3,NH,hs) -> q,k,v (B,NH,T,hs)
    x = inp.reshape(B, T, 3, NH, hs).transpose(2, 0, 3, 1, 4)
    return [x[i].copy().ravel() for i in range(3)]
def gpu_fwd(inp):
    q, k, v = permute(inp); sc = 1/np.sqrt(hs); bt = B*NH
    att = np.zeros(bt*T*T)
    batched('T', 'N', T, T, hs, sc, k, hs, T*hs, q, hs, T*hs, 0.0, att, T, T*T, bt)
    att = att.reshape(bt*T, T)
    for row in range(bt*T):
        t = row % T; s = att[row, :t+1]; e = np.exp(s - s.max())
        att[row] = np.where(np.arange(T) <= t, np.concatenate([e/e.sum(), np.zeros(T-t-1)]), 0)
    y = np.zeros(bt*T*hs)
    batched('N', 'N', hs, T, T, 1.0, v, hs, T*hs, att.ravel(), T, T*T, 0.0, y, hs, T*hs, bt)
    out = y.reshape(B, NH, T, hs).transpose(0, 2, 1, 3).reshape(B, T, C)
    return out, att.reshape(B, NH, T, T)
def gpu_bwd(dout, inp, att):
    q, k, v = permute(inp); sc = 1/np.sqrt(hs); bt = B*NH
    dO = dout.reshape(B, T, NH, hs).transpose(0, 2, 1, 3).copy().ravel()
    datt = np.zeros(bt*T*T)
    batched('T', 'N', T, T, hs, 1.0, v, hs, T*hs, dO, hs, T*hs, 0.0, datt, T, T*T, bt)
    datt = datt.reshape(bt*T, T); a = att.reshape(bt*T, T)
    for row in range(bt*T):
        t = row % T; m = np.arange(T) <= t
        dot = (a[row]*datt[row])[m].sum()
        datt[row] = np.where(m, a[row]*(datt[row]-dot)*sc, 0)
    dq = np.zeros(bt*T*hs); dk = np.zeros(bt*T*hs); dv = np.zeros(bt*T*hs)
    batched('N', 'N', hs, T, T, 1.0, k, hs, T*hs, datt.ravel(), T, T*T, 0.0, dq, hs, T*hs, bt)
    batched('N', 'T', hs, T, T, 1.0, q, hs, T*hs, datt.ravel(), T, T*T, 0.0, dk, hs, T*hs, bt)
    masked = np.array([np.where(np.arange(T) <= (r % T), a[r], 0) for r in range(bt*T)])
    batched('N', 'T', hs, T, T, 1.0, dO, hs, T*hs, masked.ravel(), T, T*T, 0.0, dv, hs, T*hs, bt)
    parts = [x.reshape(B, NH, T, hs).transpose(0, 2, 1, 3).reshape(B, T, C) for x in (dq, dk, dv)]
    return np.concatenate(parts, axis=2)
def sgemm_rm(ta, tb, m, n, k, alpha, A, offA, lda, B_, offB, ldb, beta, Cm, offC, ldc):
    # cblas_sgemm(CblasRowMajor, ...): element (r, c) of X with leading dim ld is X[r*ld + c]
    def get(X, off, ld, rows, cols):
        return np.array([X[off + r*ld: off + r*ld + cols] for r in range(rows)])
    Am = get(A, offA, lda, k if ta == 'T' else m, m if ta == 'T' else k)
    Bm = get(B_, offB, ldb, n if tb == 'T' else k, k if tb == 'T' else n)
    R = alpha * (Am.T if ta == 'T' else Am) @ (Bm.T if tb == 'T' else Bm)
    for r in range(m):
        Cm[offC + r*ldc: offC + r*ldc + n] = R[r] + (beta * Cm[offC + r*ldc: offC + r*ldc + n] if beta else 0)
def cpu_sgemm_bwd(dout, inp, att, old_dv=False):
    # attention_backward of cpu_kernels.c, call by call (old_dv: the dv of before issue 19)
    C3 = 3*C; sc = 1/np.sqrt(hs)
    x = inp.ravel(); dy_all = dout.ravel(); dinp = np.zeros(B*T*C3); a_all = att.ravel()
    for bh in range(B*NH):
        b, h = bh // NH, bh % NH
        q = b*T*C3 + h*hs; kk = q + C; vv = q + 2*C; dq = q; dk = kk; dv = vv
        a0 = bh*T*T; dy = b*T*C + h*hs
        d = np.zeros(T*T)
        if old_dv:
            sgemm_rm('T', 'N', T, hs, T, 1.0, a_all, a0, T, dy_all, dy, C, 0.0, dinp, dv, C3)
        else:
            for t in range(T):  # the masked copy of att in the scratch
                d[t*T: t*T + T] = np.where(np.arange(T) <= t, a_all[a0 + t*T: a0 + t*T + T], 0)
            sgemm_rm('T', 'N', T, hs, T, 1.0, d, 0, T, dy_all, dy, C, 0.0, dinp, dv, C3)
        sgemm_rm('N', 'T', T, T, hs, 1.0, dy_all, dy, C, x, vv, C3, 0.0, d, 0, T)
        for t in range(T):
            ar = a_all[a0 + t*T: a0 + t*T + T]; dr = d[t*T: t*T + T]
            dot = (ar[:t+1] * dr[:t+1]).sum()
            d[t*T: t*T + T] = np.where(np.arange(T) <= t, ar * (dr - dot), 0)
        sgemm_rm('N', 'N', T, hs, T, sc, d, 0, T, x, kk, C3, 0.0, dinp, dq, C3)
        sgemm_rm('T', 'N', T, hs, T, sc, d, 0, T, x, q, C3, 0.0, dinp, dk, C3)
    return dinp.reshape(B, T, C3)
o1, a1 = contract_fwd(inp); o2, a2 = gpu_fwd(inp)
assert np.allclose(o1, o2) and np.allclose(a1, a2)
rand_att = rng.random((B, NH, T, T))  # above the diagonal too
want = contract_bwd(dout, inp, rand_att)
assert np.allclose(want, gpu_bwd(dout, inp, rand_att))
assert np.allclose(want, cpu_sgemm_bwd(dout, inp, rand_att))
assert not np.allclose(want, cpu_sgemm_bwd(dout, inp, rand_att, old_dv=True))
# with the forward's att (zeros above the diagonal) the old and new cpu dv agree: training saw
# no difference
assert np.allclose(cpu_sgemm_bwd(dout, inp, a1), cpu_sgemm_bwd(dout, inp, a1, old_dv=True))
print("attention composition (cuda calls, cpu sgemm calls) matches the causal contract "
      "(random att above the diagonal too); the old cpu dv does not")
