// gputravel/kernels.h: the op table as data, the op builders and the cpu kernels.
//
// An op (gt_op) names one kernel invocation: a kind, up to GT_OP_MAX_REFS buffer references, and
// ints and floats. Its layout is fixed size, so it crosses devd's socket as one message. What
// each position means is written once, in the op's descriptor (gt_op_desc): every ref's name,
// element type, shape (in the names of the op's ints) and access; every int's name and range;
// every float's name. From it:
//   - gt_op_ref_sizes computes how many bytes each ref must provide, so a backend checks every
//     range once, at launch, before any kernel runs (STYLE.md §6);
//   - gt_op_decode turns an op into the op's argument struct (gt_matmul_fwd_args, ...): named
//     pointers and shapes, which is all a kernel sees;
//   - the access field says what an op writes, for the device's labels (docs/design.md §4);
//   - the builders (gt_op_matmul_fwd(out, inp, weight, bias, N, C, OC), ...) take the same names
//     in the same order, outputs first, then inputs, then ints, then floats.
//
// Legend: B = batch, T = time (sequence), C = channels, NH = heads, hs = C/NH, OC = output
// channels, N = rows (B*T) or elements, V = real vocabulary, Vp = padded vocabulary (>= V),
// maxT = positions. Tensors are row-major; f32 unless the descriptor says otherwise.
//
// Adding an op: a kind below (new kinds go last: the numbers are on the wire), its args struct
// and builder here, its descriptor in src/kernels/op_table.c, a cpu kernel and its case in
// src/kernels/cpu_kernels.c, a CUDA launcher in src/kernels/cuda/ and its case in
// src/kernels/cuda/dispatch.c. tests/kernels/test_op_table.c checks every descriptor.
#ifndef GPUTRAVEL_KERNELS_H
#define GPUTRAVEL_KERNELS_H

#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t gt_dbuf;  // opaque device buffer handle; 0 is never a valid buffer

// A reference into a buffer: bytes from `offset` on. Ops name what they read and write by dref.
typedef struct {
    gt_dbuf buf;
    uint64_t offset;  // bytes
} gt_dref;

#define GT_OP_MAX_REFS 12
#define GT_OP_MAX_INTS 8
#define GT_OP_MAX_FLOATS 8

// One kernel invocation. `kind` is a gt_op_kind; unused positions are ignored.
typedef struct {
    uint32_t kind;
    gt_dref refs[GT_OP_MAX_REFS];
    int64_t ints[GT_OP_MAX_INTS];
    float floats[GT_OP_MAX_FLOATS];
} gt_op;

// The numbers travel in devd's LAUNCH message: never renumber, append new kinds last.
typedef enum {
    GT_OP_NONE_ = 0,
    GT_OP_ENCODER_FWD = 1,
    GT_OP_ENCODER_BWD = 2,
    GT_OP_LAYERNORM_FWD = 3,
    GT_OP_LAYERNORM_BWD = 4,
    GT_OP_MATMUL_FWD = 5,
    GT_OP_MATMUL_BWD = 6,
    GT_OP_ATTENTION_FWD = 7,
    GT_OP_ATTENTION_BWD = 8,
    GT_OP_GELU_FWD = 9,
    GT_OP_GELU_BWD = 10,
    GT_OP_RESIDUAL_FWD = 11,
    GT_OP_RESIDUAL_BWD = 12,
    GT_OP_SOFTMAX_XENT = 13,
    GT_OP_SUMSQ = 14,
    GT_OP_ADAMW = 15,
    GT_OP_TOKENS_GATHER = 16,
    GT_OP_TOKENS_CHECK = 17,
    GT_OP_LOSS_MEAN = 18,     // release op: "loss"
    GT_OP_NORM_RELEASE = 19,  // release op: "grad_norm"
    GT_OP_CLIP_GRADS = 20,
    GT_OP_SUM_F64 = 21,       // ZeRO-1: the global sum of squares from the ranks' partials
    GT_OP_COUNT_
} gt_op_kind;

// ---- the descriptor ---------------------------------------------------------------------------

typedef enum { GT_ELEM_F32, GT_ELEM_F64, GT_ELEM_I32, GT_ELEM_U16 } gt_elem;
size_t gt_elem_size(gt_elem elem);  // 4, 8, 4, 2

typedef enum {
    GT_ACCESS_READ,     // an input
    GT_ACCESS_WRITE,    // an output, overwritten ("=")
    GT_ACCESS_ACCUM,    // an output that adds to what it held ("+="): it keeps its old contents'
                        // provenance as well as the inputs'
    GT_ACCESS_INPLACE,  // an input the op overwrites with a function of itself and the inputs
} gt_access;

// True when an op may change the ref's bytes (every access but read).
bool gt_access_writes(gt_access access);

typedef struct {
    const char *name;
    gt_elem elem;
    gt_access access;
    bool optional;      // may be buf 0 (an absent bias); the kernel then gets NULL
    const char *shape;  // extents, comma-separated; each a sum of terms `[k]name` or `k` over the
                        // op's int names ("B,T,3C", "offset+N+1"); "" is one element
    size_t field;       // offset of the pointer in the op's args struct
} gt_op_ref_desc;

typedef struct {
    const char *name;
    int64_t min, max;  // accepted values: [min, max)
    bool shape;        // a shape: [1, 2^31)
    size_t field;      // in the args struct: offset, and sizeof (4: int, 8: int64_t)
    size_t width;
} gt_op_int_desc;

typedef struct {
    const char *name;
    size_t field;  // offset of the float in the args struct
} gt_op_float_desc;

// A relation between two ints, checked with the ranges: a <= b, or b a multiple of a.
typedef enum { GT_OP_REL_NONE = 0, GT_OP_REL_LE, GT_OP_REL_DIVIDES } gt_op_rel_kind;
typedef struct {
    gt_op_rel_kind kind;
    const char *a, *b;  // int names
} gt_op_rel;

#define GT_OP_MAX_RELS 2

typedef struct {
    const char *name;
    int nrefs, nints, nfloats;
    gt_op_ref_desc refs[GT_OP_MAX_REFS];
    gt_op_int_desc ints[GT_OP_MAX_INTS];
    gt_op_float_desc floats[GT_OP_MAX_FLOATS];
    gt_op_rel rels[GT_OP_MAX_RELS];
    size_t args_size;  // sizeof the op's args struct
    // A release op: the name of the declared output (the agreement's `outputs`) it lets out of
    // labelled data, NULL for every other op. Its ref 0 is its one output (one f32), and its int
    // `bits` the mantissa bits it keeps, which the device sets from the declaration (device.h).
    const char *release;
} gt_op_descriptor;

// The descriptor of `kind`, or NULL for GT_OP_NONE_ and unknown kinds.
const gt_op_descriptor *gt_op_desc(uint32_t kind);
const char *gt_op_name(uint32_t kind);  // "unknown" for unknown kinds

// Checks the op's kind, ints (ranges and relations) and shapes and fills bytes[i] with what ref i
// must provide (also for an optional ref; positions past the op's refs are 0) and *nrefs with the
// op's ref count. Shapes are in [1, 2^31) and every byte count is at most 2^62, so every offset
// computed later in size_t is exact. Fails with GT_E_ARG, naming the op and the int or shape.
GT_MUST_USE gt_err gt_op_ref_sizes(const gt_op *op, uint64_t bytes[GT_OP_MAX_REFS], int *nrefs);

// True when ref i of this op kind may be buf 0 (an absent bias).
bool gt_op_ref_optional(uint32_t kind, int i);

// ---- the args structs: what the kernels see ---------------------------------------------------
// Pointers in descriptor order, then ints, then floats. Shapes are int (they are < 2^31).

typedef struct {  // out (B,T,C)= wte[inp] + wpe[t]; every token < V (checked before the kernel)
    float *out;
    const int32_t *inp;  // (B,T)
    const float *wte;    // (Vp,C)
    const float *wpe;    // (maxT,C)
    int B, T, C, V, Vp, maxT;
} gt_encoder_fwd_args;

typedef struct {  // dwte (Vp,C)+=, dwpe (maxT,C)+= from dout (B,T,C)
    float *dwte, *dwpe;
    const float *dout;
    const int32_t *inp;  // (B,T)
    int B, T, C, V, Vp, maxT;
} gt_encoder_bwd_args;

typedef struct {  // out (N,C)=, mean, rstd (N)=; inp (N,C); weight, bias (C)
    float *out, *mean, *rstd;
    const float *inp, *weight, *bias;
    int N, C;
} gt_layernorm_fwd_args;

typedef struct {  // dinp (N,C)+=, dweight, dbias (C)+=; dout, inp (N,C); weight (C); mean, rstd (N)
    float *dinp, *dweight, *dbias;
    const float *dout, *inp, *weight, *mean, *rstd;
    int N, C;
} gt_layernorm_bwd_args;

typedef struct {  // out (N,OC)= inp (N,C) @ weight (OC,C)^T + bias (OC; NULL for none)
    float *out;
    const float *inp, *weight, *bias;
    int N, C, OC;
    // Only the kernel's tiles [tile_lo, tile_hi) run; 0, 0 (what gt_op_decode leaves): all.
    // Set by gt_ops_cpu_run_part alone, after checking the range: no op on the wire reaches them.
    int tile_lo, tile_hi;
} gt_matmul_fwd_args;

// dinp (N,C) = (+= with dinp_accumulate), dweight (OC,C)+=, dbias (OC)+= (or NULL)
typedef struct {
    float *dinp, *dweight, *dbias;
    const float *dout, *inp, *weight;  // (N,OC), (N,C), (OC,C)
    int N, C, OC, dinp_accumulate;
    int tile_lo, tile_hi;  // as in gt_matmul_fwd_args: dinp's tiles first, then dweight's
} gt_matmul_bwd_args;

typedef struct {  // out (B,T,C)=, att (B,NH,T,T)= (0 above the diagonal); inp (B,T,3C) = q,k,v
    float *out, *att;
    const float *inp;
    int B, T, C, NH;
} gt_attention_fwd_args;

// dinp (B,T,3C)=; dout (B,T,C); inp (B,T,3C); att (B,NH,T,T), causal: only att[t][t2] with
// t2 <= t is read (what att holds above the diagonal never changes the result, on any backend)
typedef struct {
    float *dinp;
    const float *dout, *inp, *att;
    int B, T, C, NH;
} gt_attention_bwd_args;

typedef struct {  // out (N)= gelu(inp) (tanh approximation)
    float *out;
    const float *inp;
    int N;
} gt_gelu_fwd_args;

typedef struct {  // dinp (N)= gelu'(inp) dout; dinp may be the same memory as dout
    float *dinp;
    const float *inp, *dout;
    int N;
} gt_gelu_bwd_args;

typedef struct {  // out (N)= inp1 + inp2
    float *out;
    const float *inp1, *inp2;
    int N;
} gt_residual_fwd_args;

typedef struct {  // dinp1, dinp2 (N)+= dout
    float *dinp1, *dinp2;
    const float *dout;
    int N;
} gt_residual_bwd_args;

// Fused softmax + cross-entropy over the first V of Vp columns: losses (B,T)=. With grad = 1 the
// logits (B,T,Vp) are overwritten in place by dlogits = dloss * (softmax - onehot(target)),
// padded columns 0: the backward of the mean loss when dloss = 1/(B*T). Every target < V.
typedef struct {
    float *losses, *logits;
    const int32_t *targets;  // (B,T)
    int B, T, V, Vp, grad;
    float dloss;
} gt_softmax_xent_args;

// out f64 (1)= sum of squares of x (N), in double, in an order fixed by N: blocks of 16384
// floats (the op's tiles), each summed serially, the block sums added in block order.
typedef struct {
    double *out;
    const float *x;
    int N;
    // Only blocks [tile_lo, tile_hi) run (0, 0: all); from tile_lo > 0 they add to *out, what the
    // earlier parts wrote. As in gt_matmul_fwd_args: set by gt_ops_cpu_run_part alone.
    int tile_lo, tile_hi;
} gt_sumsq_args;

// AdamW as llm.c: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr (m/bc1 / (sqrt(v/bc2) +
// eps) + wd p), with g = grad * grad_scale, bc1 = 1-b1^t, bc2 = 1-b2^t. All four are (N).
typedef struct {
    float *params, *m, *v;
    const float *grads;
    int N;
    float lr, beta1, beta2, eps, weight_decay, bc1, bc2, grad_scale;
} gt_adamw_args;

// A batch from a token buffer: inp[i] = data[offset+i], tgt[i] = data[offset+i+1] (i < N);
// every token copied must be < V.
typedef struct {
    int32_t *inp, *tgt;    // (N)
    const uint16_t *data;  // (offset+N+1)
    int N;
    int64_t offset;
    int V;
} gt_tokens_gather_args;

typedef struct {  // fails unless every token of data (N) is < V
    const uint16_t *data;
    int N, V;
} gt_tokens_check_args;

// Release ops (descriptor `release`): one f32 out, rounded to `bits` mantissa bits (1..23; 23
// keeps the float as computed).
typedef struct {  // out (1)= mean of losses (N): summed in double in index order, as the trainer did
    float *out;
    const float *losses;
    int N, bits;
} gt_loss_mean_args;

typedef struct {  // out (1)= sqrt(sumsq) as float; sumsq f64 (1) from sum_of_squares
    float *out;
    const double *sumsq;
    int bits;
} gt_norm_release_args;

// Gradient clipping on the device, so the norm never has to leave it: norm = (float)sqrt(sumsq);
// when clip > 0 and norm > clip, grads (N) *= clip / norm (in place), else unchanged.
typedef struct {
    float *grads;
    const double *sumsq;
    int N;
    float clip;
} gt_clip_grads_args;

// out f64 (1)= x[0] + x[1] + ... + x[N-1] (N f64), in index order: the ranks' partial sums of
// squares (ZeRO-1), summed alike on every rank's device so that every rank clips alike.
typedef struct {
    double *out;
    const double *x;
    int N;
} gt_sum_f64_args;

typedef union {
    gt_encoder_fwd_args encoder_fwd;
    gt_encoder_bwd_args encoder_bwd;
    gt_layernorm_fwd_args layernorm_fwd;
    gt_layernorm_bwd_args layernorm_bwd;
    gt_matmul_fwd_args matmul_fwd;
    gt_matmul_bwd_args matmul_bwd;
    gt_attention_fwd_args attention_fwd;
    gt_attention_bwd_args attention_bwd;
    gt_gelu_fwd_args gelu_fwd;
    gt_gelu_bwd_args gelu_bwd;
    gt_residual_fwd_args residual_fwd;
    gt_residual_bwd_args residual_bwd;
    gt_softmax_xent_args softmax_xent;
    gt_sumsq_args sumsq;
    gt_adamw_args adamw;
    gt_tokens_gather_args tokens_gather;
    gt_tokens_check_args tokens_check;
    gt_loss_mean_args loss_mean;
    gt_norm_release_args norm_release;
    gt_clip_grads_args clip_grads;
    gt_sum_f64_args sum_f64;
} gt_op_args;

// Turns a dref into a host pointer after checking that `bytes` bytes are available from that
// offset in a buffer the caller may use.
typedef gt_err (*gt_dref_resolve_fn)(void *ctx, gt_dref ref, uint64_t bytes, void **ptr);

// Checks the op (gt_op_ref_sizes), resolves every ref (an optional ref left as buf 0 becomes
// NULL; any other empty ref fails) and fills the op kind's member of *args. Nothing is read
// through the pointers.
GT_MUST_USE gt_err gt_op_decode(const gt_op *op, gt_dref_resolve_fn resolve, void *ctx,
                                gt_op_args *args);

// ---- builders: the same names and order as the args structs -----------------------------------
// Ints are taken as int64_t so that an out-of-range shape is refused at launch, not truncated.

gt_op gt_op_encoder_fwd(gt_dref out, gt_dref inp, gt_dref wte, gt_dref wpe, int64_t B, int64_t T,
                        int64_t C, int64_t V, int64_t Vp, int64_t maxT);
gt_op gt_op_encoder_bwd(gt_dref dwte, gt_dref dwpe, gt_dref dout, gt_dref inp, int64_t B,
                        int64_t T, int64_t C, int64_t V, int64_t Vp, int64_t maxT);
gt_op gt_op_layernorm_fwd(gt_dref out, gt_dref mean, gt_dref rstd, gt_dref inp, gt_dref weight,
                          gt_dref bias, int64_t N, int64_t C);
gt_op gt_op_layernorm_bwd(gt_dref dinp, gt_dref dweight, gt_dref dbias, gt_dref dout, gt_dref inp,
                          gt_dref weight, gt_dref mean, gt_dref rstd, int64_t N, int64_t C);
gt_op gt_op_matmul_fwd(gt_dref out, gt_dref inp, gt_dref weight, gt_dref bias, int64_t N,
                       int64_t C, int64_t OC);
gt_op gt_op_matmul_bwd(gt_dref dinp, gt_dref dweight, gt_dref dbias, gt_dref dout, gt_dref inp,
                       gt_dref weight, int64_t N, int64_t C, int64_t OC, int64_t dinp_accumulate);
gt_op gt_op_attention_fwd(gt_dref out, gt_dref att, gt_dref inp, int64_t B, int64_t T, int64_t C,
                          int64_t NH);
gt_op gt_op_attention_bwd(gt_dref dinp, gt_dref dout, gt_dref inp, gt_dref att, int64_t B,
                          int64_t T, int64_t C, int64_t NH);
gt_op gt_op_gelu_fwd(gt_dref out, gt_dref inp, int64_t N);
gt_op gt_op_gelu_bwd(gt_dref dinp, gt_dref inp, gt_dref dout, int64_t N);
gt_op gt_op_residual_fwd(gt_dref out, gt_dref inp1, gt_dref inp2, int64_t N);
gt_op gt_op_residual_bwd(gt_dref dinp1, gt_dref dinp2, gt_dref dout, int64_t N);
gt_op gt_op_softmax_xent(gt_dref losses, gt_dref logits, gt_dref targets, int64_t B, int64_t T,
                         int64_t V, int64_t Vp, int64_t grad, float dloss);
gt_op gt_op_sumsq(gt_dref out, gt_dref x, int64_t N);
gt_op gt_op_adamw(gt_dref params, gt_dref m, gt_dref v, gt_dref grads, int64_t N, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float bc1, float bc2,
                  float grad_scale);
gt_op gt_op_tokens_gather(gt_dref inp, gt_dref tgt, gt_dref data, int64_t N, int64_t offset,
                          int64_t V);
gt_op gt_op_tokens_check(gt_dref data, int64_t N, int64_t V);
gt_op gt_op_loss_mean(gt_dref out, gt_dref losses, int64_t N);      // bits: 23 (set by device)
gt_op gt_op_norm_release(gt_dref out, gt_dref sumsq);               // bits: 23 (set by device)
gt_op gt_op_clip_grads(gt_dref grads, gt_dref sumsq, int64_t N, float clip);
gt_op gt_op_sum_f64(gt_dref out, gt_dref x, int64_t N);

// Rounds f to `bits` mantissa bits (1..23), to nearest, ties to even; NaN and infinities as
// they are. What release ops apply to what they let out.
float gt_round_mantissa(float f, int bits);

// ---- programs: the op sequence of one training step, as an agreement pins it (issue 13) --------
// An op's signature is its kind and its shape ints (descriptor order): what a pinned program
// fixes. Refs, flags, offsets and floats stay free. Only ops that write something belong to a
// program (a check such as tokens_check writes nothing), and no release op: those the declared
// budget bounds, and a trainer releasing the loss every k steps runs them only then. Byte form: "GTPROG01", then per op
// u32 kind | u32 n | n x u64 shape, little-endian; its SHA-256 is the agreement's
// training.program.
#define GT_OP_PROGRAM_MAGIC "GTPROG01"
#define GT_OP_PROGRAM_MAX_OPS 4096

typedef struct {
    uint32_t kind;
    uint32_t nshape;
    int64_t shape[GT_OP_MAX_INTS];
} gt_op_sig;

typedef struct {
    gt_op_sig *ops;
    uint32_t count;
} gt_op_program;

bool gt_op_writes_any(uint32_t kind);  // false for unknown kinds
bool gt_op_in_programs(uint32_t kind);  // writes something and is no release op
void gt_op_signature(const gt_op *op, gt_op_sig *sig);
bool gt_op_sig_equal(const gt_op_sig *a, const gt_op_sig *b);
void gt_op_sig_describe(const gt_op_sig *sig, char *out, size_t cap);  // "gelu_forward(N=64)"
// Appends op to a program being written (the magic first, when w is empty).
GT_MUST_USE gt_err gt_op_program_append(gt_writer *w, const gt_op *op);
// Parses untrusted program bytes (1..GT_OP_PROGRAM_MAX_OPS ops, known kinds that write, shapes
// in [1, 2^31)); free with gt_op_program_free.
GT_MUST_USE gt_err gt_op_program_parse(gt_span bytes, gt_op_program *out);
void gt_op_program_free(gt_op_program *p);

// ---- the cpu executor -------------------------------------------------------------------------
// Shared by the cpu backend and devd (which runs it on its own protected memory): no backend
// state lives here. Decodes the op (gt_op_decode), checks tokens against V, runs the kernel.
GT_MUST_USE gt_err gt_ops_cpu_run(const gt_op *op, gt_dref_resolve_fn resolve, void *ctx);

// ---- parts: one op run as several launches (docs/paging.md "Matmuls in parts", "Reductions
// in parts") ------------------------------------------------------------------------------------
// A matmul's outputs are cut into tiles whose bounds depend only on the shapes, each tile one
// single-threaded sgemm (and, for dbias, one loop) that no other tile reads or writes. A part is
// a range of one group's tiles: matmul_forward has one group (out's column tiles),
// matmul_backward two (dinp's tiles, then dweight's and dbias' rows of output channels). Running
// every tile of every group once makes exactly the calls of the whole op, so the same bytes.
// sum_of_squares has one group, "x": its blocks of 16384 floats. Its parts must run in tile
// order, each once, the one from tile 0 first: a part from tile 0 starts the total at 0.0, a
// later one adds its blocks to what out holds (the earlier parts' total). Run so, they make the
// whole op's adds in its order, so the same bytes; run out of order, out is not the op's result
// (nothing here can tell: the order is the caller's contract, and the pager keeps it).
// The pager runs a matmul or a sum_of_squares whose refs exceed the memory cap this way, each
// part with only the pages it touches resident.
typedef struct {
    int group;   // [0, gt_op_part_groups)
    int lo, hi;  // tiles [lo, hi) of the group
} gt_op_part;

int gt_op_part_groups(const gt_op *op);  // 0: the op has no parts (not a matmul nor sumsq)
const char *gt_op_part_group_name(const gt_op *op, int group);  // "out", "dinp", "dweight", "x"
// The tiles of a group (the op's shapes checked first: gt_op_ref_sizes).
GT_MUST_USE gt_err gt_op_part_tiles(const gt_op *op, int group, int *tiles);
// What the part touches of each ref: bytes [lo[i], hi[i]) from the ref's start (lo == hi: none).
// A strided slice (columns of a row-major matrix) counts from its first byte to its last.
// GT_E_ARG for a bad op or a part that is not a non-empty range of one group's tiles.
GT_MUST_USE gt_err gt_op_part_extents(const gt_op *op, const gt_op_part *part,
                                      uint64_t lo[GT_OP_MAX_REFS], uint64_t hi[GT_OP_MAX_REFS]);
// gt_ops_cpu_run running only the part's tiles (part NULL: the whole op). Every ref is resolved
// and checked for the whole op first, as gt_ops_cpu_run does; then the part is checked.
GT_MUST_USE gt_err gt_ops_cpu_run_part(const gt_op *op, const gt_op_part *part,
                                       gt_dref_resolve_fn resolve, void *ctx);

// Process-wide settings of the cpu kernels; call before any launch, from the thread that
// launches. Threads: OpenMP threads (0 keeps OpenMP's default), OpenBLAS held at one thread (the
// kernels split matmuls across OpenMP threads themselves).
void gt_ops_cpu_set_threads(int threads);

// The instruction-set path of the cpu kernels' own loops (exp, softmax, GELU, layernorm, AdamW,
// attention's row loops; matmuls are OpenBLAS's, which picks its own kernels: OPENBLAS_CORETYPE).
// By default the best the CPU has, detected at run time: AVX-512 needs avx512f, AVX2 needs avx2
// and fma. AVX2 and AVX-512 give the same bits; scalar differs from them in the last bits of
// what passes through exp (it calls libm's expf).
typedef enum {
    GT_CPU_ISA_SCALAR = 0,
    GT_CPU_ISA_AVX2 = 1,
    GT_CPU_ISA_AVX512 = 2,
    GT_CPU_ISA_COUNT_
} gt_cpu_isa;

const char *gt_cpu_isa_name(gt_cpu_isa isa);  // "scalar", "avx2", "avx512"
// "scalar", "avx2", "avx512" (GPUTRAVEL_CPU_ISA's values); anything else GT_E_ARG.
GT_MUST_USE gt_err gt_cpu_isa_parse(const char *name, gt_cpu_isa *out);
bool gt_cpu_isa_supported(gt_cpu_isa isa);  // by this CPU
gt_cpu_isa gt_cpu_isa_best(void);           // the best path this CPU supports
// Chooses the path; GT_E_UNSUPPORTED (naming the missing feature) if this CPU lacks it, and
// then the path stays as it was.
GT_MUST_USE gt_err gt_ops_cpu_set_isa(gt_cpu_isa isa);
gt_cpu_isa gt_ops_cpu_isa(void);  // the path the kernels take now
// What a program does with GPUTRAVEL_CPU_ISA's value (the caller reads the environment; the
// library never does): NULL or "" keeps the best path, a name is parsed and set.
GT_MUST_USE gt_err gt_ops_cpu_select_isa(const char *name);
// One line for a program's startup log: the path, whether it was forced, what the CPU has, and
// OpenBLAS's core (OPENBLAS_CORETYPE changes it), e.g. "cpu kernels: avx2 (forced; cpu has
// avx512), OpenBLAS 0.3.21 core Haswell".
void gt_ops_cpu_describe(char *out, size_t cap);
// OpenBLAS picks its kernels (its "core") from CPUID as it loads, and a CPU newer than it knows
// gets a generic one: Debian 12's 0.3.21 runs an Emerald Rapids Xeon (family 6, model 207) on
// "Prescott", whose sgemm made 72 GFLOP/s there against SkylakeX's 281 (bench_matmul, 2 threads).
// gt_blas_core_upgrade names the core this CPU should run instead ("SkylakeX" where it has
// AVX-512 F/CD/BW/DQ/VL, else "Haswell" where it has AVX2 + FMA), or NULL when OpenBLAS's pick
// uses vectors as wide as the CPU has. Only OPENBLAS_CORETYPE, in the environment before the
// process starts, changes the core: a program that gets a name re-executes itself with it set
// (gputravel's main, bench_common.h), before it computes anything.
const char *gt_blas_core_upgrade(void);
const char *gt_blas_core_name(void);  // OpenBLAS's core in this process
// What a program sets for its next run to get that core: when gt_blas_core_upgrade names one and
// the caller found no OPENBLAS_CORETYPE in the environment (coretype_env NULL: a value, even "",
// is the user's or a parent process's choice and is kept), OPENBLAS_CORETYPE = that core and
// GPUTRAVEL_BLAS_FALLBACK = the core OpenBLAS picked (for the startup line), into vars; returns
// how many (0 or 2). The processes the program starts inherit the same core (the same bits).
size_t gt_blas_core_env(const char *coretype_env, gt_env_var vars[2]);
// For a program's main, before anything computes: gt_blas_core_env's variables, and a re-exec
// with them (gt_proc_reexec), so at most once. Returns GT_OK when nothing was to be done, or the
// re-exec's error (the program may go on, on the slower core). gputravel's main restarts once for
// this and its own variables together.
GT_MUST_USE gt_err gt_blas_core_reexec(const char *coretype_env, char **argv);

// The old switch: false is gt_ops_cpu_set_isa(GT_CPU_ISA_SCALAR), true the best path.
void gt_ops_cpu_set_simd(bool on);

// Where a step's time goes (bench_train's per-op breakdown): wall time and calls of
// gt_ops_cpu_run per op kind, process-wide, off by default (two clock reads per op when on).
typedef struct {
    uint64_t calls[GT_OP_COUNT_];
    uint64_t nanoseconds[GT_OP_COUNT_];
} gt_ops_cpu_profile;
void gt_ops_cpu_profile_enable(bool on);
// Copies the counts since the last take (or the enable) into out and starts them again at zero.
void gt_ops_cpu_profile_take(gt_ops_cpu_profile *out);

#endif
