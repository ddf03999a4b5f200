// AES-256-GCM decryption on the GPU (the key-release variant of GPU travelling, docs/cuda.md):
// the holder's sealed chunk is copied to the device as ciphertext, the device computes the GCM
// tag over it (GHASH, in parallel chunks), the host compares the tag, and only then does the
// device run the CTR pass that produces plaintext. Nothing here is used for any other purpose:
// all other AES in gputravel is OpenSSL's.
//
// AES: table-based (FIPS-197 §5 with the usual T-table formulation), tables built per thread
// block in shared memory from the S-box. Words are big-endian, as in FIPS-197 and SP 800-38D.
// GCM (SP 800-38D) with a 96-bit IV: J0 = IV || 1, data block i uses counter IV || (i + 2), the
// tag is GHASH_H(A, C) XOR E_K(J0). GHASH over m blocks X_1..X_m is sum X_i H^(m-i+1); a thread
// takes a run of K blocks, evaluates it by Horner's rule, multiplies by H^(blocks after its run)
// from a table of H^(2^j), and the runs are XOR-ed together (addition in GF(2^128) is XOR, so
// the order of the XOR does not matter and the result is exact).
//
// The same __host__ __device__ functions run on the host in gt_cuda_aes_gcm_host_model, which
// the tests compare with OpenSSL where no GPU is present. That model protects nothing.
#include <gputravel/kernels_cuda.h>

#include <string.h>

#define AES_SBOX_VALUES \
    0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76, \
    0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0, \
    0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15, \
    0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75, \
    0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84, \
    0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf, \
    0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8, \
    0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2, \
    0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73, \
    0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb, \
    0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79, \
    0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08, \
    0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a, \
    0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e, \
    0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf, \
    0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16

static const uint8_t h_sbox[256] = {AES_SBOX_VALUES};
__constant__ uint8_t d_sbox[256] = {AES_SBOX_VALUES};

#define NR 14  // AES-256 rounds

typedef struct {
    uint64_t hi, lo;  // a GF(2^128) element / a 16-byte block, big-endian halves
} gblock;

// ---- AES ---------------------------------------------------------------------------------------

__host__ __device__ static inline uint8_t xtime(uint8_t s)
{
    return (uint8_t)((s << 1) ^ ((s & 0x80) ? 0x1b : 0x00));
}

// te[0..255] = Te0, te[256..] = Te1 (Te0 rotated right by 8), then Te2, Te3.
__host__ __device__ static inline void te_fill(uint32_t *te, int x, const uint8_t *sbox)
{
    uint8_t s = sbox[x], s2 = xtime(s), s3 = (uint8_t)(s2 ^ s);
    uint32_t w = ((uint32_t)s2 << 24) | ((uint32_t)s << 16) | ((uint32_t)s << 8) | s3;
    te[x] = w;
    te[256 + x] = (w >> 8) | (w << 24);
    te[512 + x] = (w >> 16) | (w << 16);
    te[768 + x] = (w >> 24) | (w << 8);
}

__host__ __device__ static inline void aes256_encrypt(uint32_t out[4], const uint32_t in[4],
                                                      const uint32_t *rk, const uint32_t *te,
                                                      const uint8_t *sbox)
{
    uint32_t s0 = in[0] ^ rk[0], s1 = in[1] ^ rk[1], s2 = in[2] ^ rk[2], s3 = in[3] ^ rk[3];
    const uint32_t *t0 = te, *t1 = te + 256, *t2 = te + 512, *t3 = te + 768;
    for (int r = 1; r < NR; r++) {
        const uint32_t *k = rk + 4 * r;
        uint32_t u0 = t0[s0 >> 24] ^ t1[(s1 >> 16) & 0xff] ^ t2[(s2 >> 8) & 0xff] ^ t3[s3 & 0xff] ^ k[0];
        uint32_t u1 = t0[s1 >> 24] ^ t1[(s2 >> 16) & 0xff] ^ t2[(s3 >> 8) & 0xff] ^ t3[s0 & 0xff] ^ k[1];
        uint32_t u2 = t0[s2 >> 24] ^ t1[(s3 >> 16) & 0xff] ^ t2[(s0 >> 8) & 0xff] ^ t3[s1 & 0xff] ^ k[2];
        uint32_t u3 = t0[s3 >> 24] ^ t1[(s0 >> 16) & 0xff] ^ t2[(s1 >> 8) & 0xff] ^ t3[s2 & 0xff] ^ k[3];
        s0 = u0;
        s1 = u1;
        s2 = u2;
        s3 = u3;
    }
    const uint32_t *k = rk + 4 * NR;
#define LAST(a, b, c, d)                                                                       \
    (((uint32_t)sbox[(a) >> 24] << 24) ^ ((uint32_t)sbox[((b) >> 16) & 0xff] << 16) ^          \
     ((uint32_t)sbox[((c) >> 8) & 0xff] << 8) ^ (uint32_t)sbox[(d) & 0xff])
    out[0] = LAST(s0, s1, s2, s3) ^ k[0];
    out[1] = LAST(s1, s2, s3, s0) ^ k[1];
    out[2] = LAST(s2, s3, s0, s1) ^ k[2];
    out[3] = LAST(s3, s0, s1, s2) ^ k[3];
#undef LAST
}

static uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

void gt_cuda_aes256_expand_key(uint32_t rk[GT_CUDA_AES256_RK_WORDS], const uint8_t key[32])
{
    // FIPS-197 §5.2 with Nk = 8: RotWord/SubWord/Rcon every 8 words, SubWord alone at i % 8 == 4.
    uint32_t rcon = 0x01000000u;
    for (int i = 0; i < 8; i++) {
        rk[i] = be32(key + 4 * i);
    }
    for (int i = 8; i < GT_CUDA_AES256_RK_WORDS; i++) {
        uint32_t t = rk[i - 1];
        if (i % 8 == 0) {
            t = (t << 8) | (t >> 24);
            t = ((uint32_t)h_sbox[t >> 24] << 24) | ((uint32_t)h_sbox[(t >> 16) & 0xff] << 16) |
                ((uint32_t)h_sbox[(t >> 8) & 0xff] << 8) | h_sbox[t & 0xff];
            t ^= rcon;
            rcon = (uint32_t)xtime((uint8_t)(rcon >> 24)) << 24;
        } else if (i % 8 == 4) {
            t = ((uint32_t)h_sbox[t >> 24] << 24) | ((uint32_t)h_sbox[(t >> 16) & 0xff] << 16) |
                ((uint32_t)h_sbox[(t >> 8) & 0xff] << 8) | h_sbox[t & 0xff];
        }
        rk[i] = rk[i - 8] ^ t;
    }
}

// ---- GF(2^128) (SP 800-38D §6.3, Algorithm 1; bit 0 is the most significant bit of hi) ---------

__host__ __device__ static inline gblock gf_mul(gblock x, gblock y)
{
    gblock z = {0, 0}, v = y;
    for (int i = 0; i < 128; i++) {
        uint64_t bit = i < 64 ? (x.hi >> (63 - i)) & 1 : (x.lo >> (127 - i)) & 1;
        uint64_t mask = (uint64_t)0 - bit;
        z.hi ^= v.hi & mask;
        z.lo ^= v.lo & mask;
        uint64_t lsb = (uint64_t)0 - (v.lo & 1);
        v.lo = (v.lo >> 1) | (v.hi << 63);
        v.hi = (v.hi >> 1) ^ (0xE100000000000000ull & lsb);
    }
    return z;
}

__host__ __device__ static inline gblock words_to_block(const uint32_t w[4])
{
    gblock b = {((uint64_t)w[0] << 32) | w[1], ((uint64_t)w[2] << 32) | w[3]};
    return b;
}

// Up to 16 bytes from p (avail of them; the rest zero), big-endian.
__host__ __device__ static inline gblock load_block(const uint8_t *p, size_t avail)
{
    gblock b = {0, 0};
    for (int i = 0; i < 16; i++) {
        uint64_t byte = (size_t)i < avail ? p[i] : 0;
        if (i < 8) {
            b.hi |= byte << (56 - 8 * i);
        } else {
            b.lo |= byte << (120 - 8 * i);
        }
    }
    return b;
}

// GHASH inputs as one sequence of m = nA + nC + 1 blocks: the AAD blocks and the length block
// come from `pre` (nA blocks, then the length block), the ciphertext blocks from ct.
typedef struct {
    const uint8_t *pre;  // (nA + 1) * 16 bytes
    const uint8_t *ct;
    size_t len;  // ciphertext bytes
    size_t nA, nC, m;
} ghash_input;

__host__ __device__ static inline gblock ghash_block(const ghash_input *in, size_t i)
{
    if (i < in->nA) {
        return load_block(in->pre + 16 * i, 16);
    }
    if (i < in->nA + in->nC) {
        size_t off = (i - in->nA) * 16;
        return load_block(in->ct + off, in->len - off);
    }
    return load_block(in->pre + 16 * in->nA, 16);
}

#define HPOW_MAX 40  // H^(2^j), j < 40: enough for any m < 2^40

// The contribution of blocks [lo, hi) to GHASH: (Horner over the run) * H^(m - hi).
__host__ __device__ static inline gblock ghash_run(const ghash_input *in, size_t lo, size_t hi,
                                                   gblock h, const gblock *hpow)
{
    gblock g = {0, 0};
    for (size_t i = lo; i < hi; i++) {
        gblock x = ghash_block(in, i);
        g.hi ^= x.hi;
        g.lo ^= x.lo;
        g = gf_mul(g, h);
    }
    size_t e = in->m - hi;
    for (int j = 0; e != 0; j++, e >>= 1) {
        if (e & 1) {
            g = gf_mul(g, hpow[j]);
        }
    }
    return g;
}

// Counter block for data block i: IV || BE32(i + 2).
__host__ __device__ static inline void ctr_words(uint32_t w[4], const uint32_t ivw[3], size_t i)
{
    w[0] = ivw[0];
    w[1] = ivw[1];
    w[2] = ivw[2];
    w[3] = (uint32_t)(i + 2);
}

__host__ __device__ static inline void ctr_xor_block(uint8_t *pt, const uint8_t *ct, size_t len,
                                                     size_t i, const uint32_t ivw[3],
                                                     const uint32_t *rk, const uint32_t *te,
                                                     const uint8_t *sbox)
{
    uint32_t c[4], ks[4];
    ctr_words(c, ivw, i);
    aes256_encrypt(ks, c, rk, te, sbox);
    size_t off = i * 16, n = len - off < 16 ? len - off : 16;
    for (size_t j = 0; j < n; j++) {
        uint8_t k = (uint8_t)(ks[j / 4] >> (24 - 8 * (j % 4)));
        pt[off + j] = ct[off + j] ^ k;
    }
}

// The GHASH prefix: AAD zero-padded to whole blocks, then [len(A)]64 || [len(C)]64 in bits.
static void build_prefix(uint8_t *pre, const uint8_t *aad, size_t aad_len, size_t nA, size_t len)
{
    memset(pre, 0, (nA + 1) * 16);
    if (aad_len > 0) {
        memcpy(pre, aad, aad_len);
    }
    uint64_t abits = (uint64_t)aad_len * 8, cbits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++) {
        pre[nA * 16 + i] = (uint8_t)(abits >> (56 - 8 * i));
        pre[nA * 16 + 8 + i] = (uint8_t)(cbits >> (56 - 8 * i));
    }
}

// ---- host model (tests only) -------------------------------------------------------------------

void gt_cuda_aes_gcm_host_model(uint8_t *pt, uint8_t tag[16], const uint8_t *ct, size_t len,
                                const uint8_t *aad, size_t aad_len, const uint8_t iv[12],
                                const uint8_t key[32])
{
    uint32_t te[1024];
    for (int x = 0; x < 256; x++) {
        te_fill(te, x, h_sbox);
    }
    uint32_t rk[GT_CUDA_AES256_RK_WORDS];
    gt_cuda_aes256_expand_key(rk, key);
    uint32_t zero[4] = {0, 0, 0, 0}, hw[4], ivw[3] = {be32(iv), be32(iv + 4), be32(iv + 8)};
    aes256_encrypt(hw, zero, rk, te, h_sbox);
    gblock h = words_to_block(hw), hpow[HPOW_MAX];
    hpow[0] = h;
    for (int j = 1; j < HPOW_MAX; j++) {
        hpow[j] = gf_mul(hpow[j - 1], hpow[j - 1]);
    }
    size_t nA = (aad_len + 15) / 16, nC = (len + 15) / 16;
    uint8_t *pre = (uint8_t *)malloc((nA + 1) * 16);
    if (pre == NULL) {
        memset(tag, 0, 16);
        return;
    }
    build_prefix(pre, aad, aad_len, nA, len);
    ghash_input in = {pre, ct, len, nA, nC, nA + nC + 1};
    // Runs of 3 blocks: short, so that even small inputs exercise the combination by powers.
    gblock s = {0, 0};
    for (size_t lo = 0; lo < in.m; lo += 3) {
        gblock g = ghash_run(&in, lo, lo + 3 < in.m ? lo + 3 : in.m, h, hpow);
        s.hi ^= g.hi;
        s.lo ^= g.lo;
    }
    uint32_t j0[4] = {ivw[0], ivw[1], ivw[2], 1}, ej0[4];
    aes256_encrypt(ej0, j0, rk, te, h_sbox);
    gblock t = words_to_block(ej0);
    t.hi ^= s.hi;
    t.lo ^= s.lo;
    for (int i = 0; i < 8; i++) {
        tag[i] = (uint8_t)(t.hi >> (56 - 8 * i));
        tag[8 + i] = (uint8_t)(t.lo >> (56 - 8 * i));
    }
    for (size_t i = 0; i < nC; i++) {
        ctr_xor_block(pt, ct, len, i, ivw, rk, te, h_sbox);
    }
    free(pre);
    memset(rk, 0, sizeof rk);
}

// ---- device ------------------------------------------------------------------------------------

#define AES_THREADS 256
#define GHASH_RUN 64  // blocks per thread

// Shared tables for one thread block: Te0..Te3, the S-box, the round keys.
typedef struct {
    uint32_t te[1024];
    uint8_t sbox[256];
    uint32_t rk[GT_CUDA_AES256_RK_WORDS];
} aes_shared;

__device__ static void aes_shared_load(aes_shared *sh, const uint32_t *dkey)
{
    for (int x = threadIdx.x; x < 256; x += blockDim.x) {
        sh->sbox[x] = d_sbox[x];
        te_fill(sh->te, x, d_sbox);
    }
    for (int x = threadIdx.x; x < GT_CUDA_AES256_RK_WORDS; x += blockDim.x) {
        sh->rk[x] = dkey[x];
    }
    __syncthreads();
}

// Scratch layout of the tag computation (device): H powers, E_K(J0), the XOR accumulator, the
// prefix blocks.
typedef struct {
    gblock hpow[HPOW_MAX];
    gblock ej0;
    unsigned long long acc[2];
} ghash_state;

// One thread: H = E_K(0), H^(2^j), E_K(J0).
__global__ void ghash_setup_kernel(ghash_state *st, const uint32_t *dkey, uint32_t iv0,
                                   uint32_t iv1, uint32_t iv2)
{
    __shared__ aes_shared sh;
    aes_shared_load(&sh, dkey);
    if (threadIdx.x != 0) {
        return;
    }
    uint32_t zero[4] = {0, 0, 0, 0}, hw[4];
    aes256_encrypt(hw, zero, sh.rk, sh.te, sh.sbox);
    st->hpow[0] = words_to_block(hw);
    for (int j = 1; j < HPOW_MAX; j++) {
        st->hpow[j] = gf_mul(st->hpow[j - 1], st->hpow[j - 1]);
    }
    uint32_t j0[4] = {iv0, iv1, iv2, 1}, e[4];
    aes256_encrypt(e, j0, sh.rk, sh.te, sh.sbox);
    st->ej0 = words_to_block(e);
    st->acc[0] = 0;
    st->acc[1] = 0;
}

__global__ void ghash_kernel(ghash_state *st, ghash_input in)
{
    __shared__ gblock hp[HPOW_MAX];
    __shared__ unsigned long long red[2][AES_THREADS / 32];
    for (int j = threadIdx.x; j < HPOW_MAX; j += blockDim.x) {
        hp[j] = st->hpow[j];
    }
    __syncthreads();
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t lo = t * GHASH_RUN;
    gblock g = {0, 0};
    if (lo < in.m) {
        size_t hi = lo + GHASH_RUN < in.m ? lo + GHASH_RUN : in.m;
        g = ghash_run(&in, lo, hi, hp[0], hp);
    }
    unsigned long long a = g.hi, b = g.lo;
    for (int o = 16; o > 0; o >>= 1) {
        a ^= __shfl_xor_sync(0xffffffffu, a, o);
        b ^= __shfl_xor_sync(0xffffffffu, b, o);
    }
    if (threadIdx.x % 32 == 0) {
        red[0][threadIdx.x / 32] = a;
        red[1][threadIdx.x / 32] = b;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < AES_THREADS / 32; w++) {
            a ^= red[0][w];
            b ^= red[1][w];
        }
        atomicXor(&st->acc[0], a);
        atomicXor(&st->acc[1], b);
    }
}

__global__ void ctr_kernel(uint8_t *pt, const uint8_t *ct, size_t len, const uint32_t *dkey,
                           uint32_t iv0, uint32_t iv1, uint32_t iv2)
{
    __shared__ aes_shared sh;
    aes_shared_load(&sh, dkey);
    uint32_t ivw[3] = {iv0, iv1, iv2};
    size_t nblocks = (len + 15) / 16;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nblocks;
         i += (size_t)gridDim.x * blockDim.x) {
        ctr_xor_block(pt, ct, len, i, ivw, sh.rk, sh.te, sh.sbox);
    }
}

#define CK(call)                                  \
    do {                                          \
        cudaError_t e_ = (call);                  \
        if (e_ != cudaSuccess) {                  \
            err = cudaGetErrorString(e_);         \
            goto out;                             \
        }                                         \
    } while (0)

const char *gt_cuda_aes_gcm_tag(gt_cuda_ctx *cx, uint8_t tag_out[16], const uint8_t *ct,
                                size_t len, const uint8_t *aad, size_t aad_len,
                                const uint8_t iv[12], const uint32_t rk[GT_CUDA_AES256_RK_WORDS],
                                uint32_t *dkey)
{
    const char *err = NULL;
    size_t nA = (aad_len + 15) / 16, nC = (len + 15) / 16, m = nA + nC + 1;
    size_t pre_bytes = (nA + 1) * 16, st_off = (pre_bytes + 255) & ~(size_t)255;
    size_t threads = (m + GHASH_RUN - 1) / GHASH_RUN;
    size_t blocks = (threads + AES_THREADS - 1) / AES_THREADS;
    ghash_state *st = NULL;
    ghash_state host_st;
    uint8_t *pre = (uint8_t *)malloc(pre_bytes);
    memset(tag_out, 0, 16);
    memset(&host_st, 0, sizeof host_st);
    if (pre == NULL) {
        return "out of host memory";
    }
    build_prefix(pre, aad, aad_len, nA, len);
    err = gt_cuda_scratch(cx, st_off + sizeof(ghash_state));
    if (err != NULL) {
        free(pre);
        return err;
    }
    st = (ghash_state *)((uint8_t *)cx->scratch + st_off);
    {
        uint32_t iv0 = be32(iv), iv1 = be32(iv + 4), iv2 = be32(iv + 8);
        ghash_input in = {(const uint8_t *)cx->scratch, ct, len, nA, nC, m};
        CK(cudaMemcpyAsync(dkey, rk, GT_CUDA_AES256_RK_WORDS * 4, cudaMemcpyHostToDevice,
                           cx->stream));
        CK(cudaMemcpyAsync(cx->scratch, pre, pre_bytes, cudaMemcpyHostToDevice, cx->stream));
        ghash_setup_kernel<<<1, AES_THREADS, 0, cx->stream>>>(st, dkey, iv0, iv1, iv2);
        CK(cudaGetLastError());
        ghash_kernel<<<(unsigned int)blocks, AES_THREADS, 0, cx->stream>>>(st, in);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(&host_st.ej0, &st->ej0, sizeof host_st.ej0 + sizeof host_st.acc,
                           cudaMemcpyDeviceToHost, cx->stream));
        CK(cudaStreamSynchronize(cx->stream));
        gblock t = host_st.ej0;
        t.hi ^= host_st.acc[0];
        t.lo ^= host_st.acc[1];
        for (int i = 0; i < 8; i++) {
            tag_out[i] = (uint8_t)(t.hi >> (56 - 8 * i));
            tag_out[8 + i] = (uint8_t)(t.lo >> (56 - 8 * i));
        }
    }
out:
    // H, its powers and E_K(J0) are key material: wipe them and the round keys.
    (void)cudaMemsetAsync(cx->scratch, 0, st_off + sizeof(ghash_state), cx->stream);
    (void)cudaMemsetAsync(dkey, 0, GT_CUDA_AES256_RK_WORDS * 4, cx->stream);
    (void)cudaStreamSynchronize(cx->stream);
    memset(&host_st, 0, sizeof host_st);
    free(pre);
    return err;
}

const char *gt_cuda_aes_gcm_ctr(gt_cuda_ctx *cx, uint8_t *pt, const uint8_t *ct, size_t len,
                                const uint8_t iv[12], const uint32_t rk[GT_CUDA_AES256_RK_WORDS],
                                uint32_t *dkey)
{
    const char *err = NULL;
    size_t nblocks = (len + 15) / 16;
    size_t grid = (nblocks + AES_THREADS - 1) / AES_THREADS;
    if (grid > ((size_t)1 << 20)) {
        grid = (size_t)1 << 20;
    }
    if (len == 0) {
        return NULL;
    }
    CK(cudaMemcpyAsync(dkey, rk, GT_CUDA_AES256_RK_WORDS * 4, cudaMemcpyHostToDevice,
                       cx->stream));
    ctr_kernel<<<(unsigned int)grid, AES_THREADS, 0, cx->stream>>>(pt, ct, len, dkey, be32(iv),
                                                                   be32(iv + 4), be32(iv + 8));
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(cx->stream));
out:
    (void)cudaMemsetAsync(dkey, 0, GT_CUDA_AES256_RK_WORDS * 4, cx->stream);
    (void)cudaStreamSynchronize(cx->stream);
    return err;
}
