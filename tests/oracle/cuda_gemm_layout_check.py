# Checks, without a GPU, the cuBLAS calls of src/kernels/cuda/matmul.cu and attention.cu: emulates
# column-major (strided batched) sgemm on flat arrays, replays each call with its exact arguments,
# and compares with row-major math; then composes attention forward/backward as attention.cu does
# and compares
# with a port of the cpu kernel loops. Run: python3 tests/oracle/cuda_gemm_layout_check.py
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

# Whole attention forward/backward as attention.cu composes it vs the cpu kernel's loops.
B, T, NH, hs = 2, 5, 3, 4
C = NH*hs
inp = rng.standard_normal((B, T, 3*C)); dout = rng.standard_normal((B, T, C))
def cpu_fwd(inp):
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
def cpu_bwd(dout, inp, att):
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
o1, a1 = cpu_fwd(inp); o2, a2 = gpu_fwd(inp)
assert np.allclose(o1, o2) and np.allclose(a1, a2)
rand_att = rng.random((B, NH, T, T))  # above the diagonal too
assert np.allclose(cpu_bwd(dout, inp, rand_att), gpu_bwd(dout, inp, rand_att))
print("attention composition matches the cpu kernel (random att above the diagonal too)")
