// The op cases every cross-backend kernel test runs, and their inputs: one list and one input
// generator, shared by tests/kernels/test_cuda_ops.c (cuda vs cpu, on a GPU) and
// tests/kernels/test_kernel_contract.c (cpu vs a plain-loop reference of each op's documented
// contract, everywhere), so that the two can never drift apart.
//
// Inputs are random (a fixed xorshift stream consumed case after case in list order), including
// attention's att above the diagonal: a backend that read what the contract says it must not
// would differ.
#ifndef GT_TESTLIB_KERNEL_CASES_H
#define GT_TESTLIB_KERNEL_CASES_H

#include <gputravel/kernels.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// What a ref holds: f32 in [-1, 1), f32 in [0.01, 1.01) (variances, att), i32 or u16 tokens in
// [0, V), one f64 (written only).
typedef enum { GT_KC_F32, GT_KC_F32_POS, GT_KC_I32_TOK, GT_KC_U16_TOK, GT_KC_F64 } gt_kc_kind;

typedef struct {
    gt_op op;  // refs[i].buf: 1 = present (the runner fills in buffers), 0 = absent (optional)
    gt_kc_kind kinds[GT_OP_MAX_REFS];
    int64_t V;      // token bound for the token kinds
    uint64_t pad;   // every ref but an f64 starts this many bytes into its buffer (4: unaligned)
    int alias;      // >= 0: ref `alias` is ref `alias_of` (same buffer, same offset)
    int alias_of;
    int config;     // which shape set: 0, 1 (every op), 2 (encoder backward, V = 3: repeats)
} gt_kcase;

// Every case, in order (*out malloc'd, *n cases). The seed to start gt_kcase_inputs with.
void gt_kcases(gt_kcase **out, size_t *n);
#define GT_KCASE_SEED 0x1234567u

// A case's input bytes: one host buffer per present ref (buf[i] of len[i] = off[i] + bytes[i],
// the ref's data at buf[i] + off[i]; buf[i] NULL for an absent or aliased ref). The bytes of
// every ref, inputs and outputs alike, are drawn from *rng, so outputs start as noise too.
typedef struct {
    int nrefs;
    uint64_t bytes[GT_OP_MAX_REFS];
    uint64_t off[GT_OP_MAX_REFS];
    uint64_t len[GT_OP_MAX_REFS];
    uint8_t *buf[GT_OP_MAX_REFS];
} gt_kcase_inputs;

// Fills in (fails the test on a malformed case).
void gt_kcase_inputs_make(const gt_kcase *c, uint64_t *rng, gt_kcase_inputs *in);
void gt_kcase_inputs_free(gt_kcase_inputs *in);

// "attention_backward (config 1, pad 4)" into out.
void gt_kcase_name(const gt_kcase *c, char *out, size_t cap);

// Compares ref i of a case between two runs (a, b: its bytes[i] bytes): integers exactly, the
// f64 within 1e-9 relative, f32 element by element within
//   |a - b| <= abs_tol * max|a over the ref| + rel_tol * |a|.
// Fails the test naming the case, ref and element; returns the largest |a - b| (f32 refs).
double gt_kcase_compare(const gt_kcase *c, int i, const uint8_t *a, const uint8_t *b,
                        uint64_t bytes, double abs_tol, double rel_tol, const char *a_name,
                        const char *b_name);

#endif
