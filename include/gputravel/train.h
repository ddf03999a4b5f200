// gputravel/train.h: GPT-2 on the device API. Model config and parameters (llm.c layout and
// checkpoints), forward/backward sequenced as device ops, AdamW, learning-rate schedules, the data
// loader over token buffers already in device memory, training-state checkpoints for resume, and
// sampling.
//
// Trusts: the device to run ops as specified. Does not trust: checkpoint and state files (read
// through gt_reader, every size checked against the header before a byte is used) or token data
// (every token is checked against the vocabulary on the device before training starts).
// No global mutable state: one process may hold several models, loaders and samplers.
//
// Legend: L = layers, C = channels, NH = heads, V = vocabulary, Vp = V padded to a multiple of
// 128, maxT = positions, B = batch, T = sequence length.
#ifndef GPUTRAVEL_TRAIN_H
#define GPUTRAVEL_TRAIN_H

#include <gputravel/device.h>
#include <gputravel/util.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---- config and parameters ------------------------------------------------------------------

#define GT_GPT2_CKPT_MAGIC 20240326
#define GT_GPT2_CKPT_VERSION 3       // fp32 parameters
#define GT_GPT2_CKPT_VERSION_BF16 5  // bf16 parameters (llm.c's train_gpt2cu default)
#define GT_GPT2_CKPT_HEADER_BYTES 1024
#define GT_GPT2_NUM_TENSORS 16

typedef struct {
    int max_seq_len;        // maxT
    int vocab_size;         // V (real)
    int padded_vocab_size;  // Vp >= V
    int num_layers;         // L
    int num_heads;          // NH
    int channels;           // C (a multiple of NH)
} gt_gpt2_config;

// V rounded up to a multiple of 128 (llm.c's padding).
int gt_gpt2_pad_vocab(int vocab_size);
// Positive shapes within limits (C <= 16384, L <= 1024, Vp <= 2^20, maxT <= 65536), C % NH == 0,
// V <= Vp. GT_E_FORMAT naming the field otherwise.
GT_MUST_USE gt_err gt_gpt2_config_check(const gt_gpt2_config *cfg);
// Element counts of the 16 tensors in llm.c order: wte (Vp,C), wpe (maxT,C), ln1w, ln1b (L,C),
// qkvw (L,3C,C), qkvb (L,3C), attprojw (L,C,C), attprojb (L,C), ln2w, ln2b (L,C), fcw (L,4C,C),
// fcb (L,4C), fcprojw (L,C,4C), fcprojb (L,C), lnfw, lnfb (C). Returns the total.
size_t gt_gpt2_param_sizes(const gt_gpt2_config *cfg, size_t sizes[GT_GPT2_NUM_TENSORS]);

typedef struct gt_gpt2 gt_gpt2;  // opaque; owns its device buffers, borrows the device

// A model with every parameter zero (use gt_gpt2_init_random or gt_gpt2_params_write next).
GT_MUST_USE gt_err gt_gpt2_create(gt_gpt2 **out, gt_device *dev, const gt_gpt2_config *cfg);
// GPT-2 init from seed: weights N(0, 0.02), the two residual projections N(0, 0.02/sqrt(2L)),
// wpe N(0, 0.02), padded wte rows 0, biases 0, layernorm weights 1. Same seed, same bits.
GT_MUST_USE gt_err gt_gpt2_init_random(gt_gpt2 *m, uint64_t seed);
// Parses an llm.c checkpoint header (GT_GPT2_CKPT_HEADER_BYTES, untrusted): magic, version 3
// (fp32) or 5 (bf16) into *version (GT_E_UNSUPPORTED for others), then a config that passes
// gt_gpt2_config_check.
GT_MUST_USE gt_err gt_gpt2_ckpt_header_parse(const uint8_t *hdr, size_t len, gt_gpt2_config *cfg,
                                             int *version);
// Reads an llm.c checkpoint (header magic, version 3 fp32 or 5 bf16, exact file size: 1024 +
// 4 or 2 bytes per parameter) onto the device; bf16 parameters become fp32 exactly (bf16 is the
// upper half of an fp32).
GT_MUST_USE gt_err gt_gpt2_load(gt_gpt2 **out, gt_device *dev, const char *path);
// Writes the parameters as an llm.c fp32 checkpoint, atomically.
GT_MUST_USE gt_err gt_gpt2_save(gt_gpt2 *m, const char *path);
// The same as version 5: each parameter rounded to bf16 (to nearest, ties to even; NaN stays
// NaN), as llm.c's GPU trainer reads and writes them.
GT_MUST_USE gt_err gt_gpt2_save_bf16(gt_gpt2 *m, const char *path);
// fp32 <-> bf16 as the checkpoint does.
uint16_t gt_bf16_from_f32(float f);
float gt_bf16_to_f32(uint16_t h);
void gt_gpt2_free(gt_gpt2 *m);  // frees (wipes) its device buffers

const gt_gpt2_config *gt_gpt2_get_config(const gt_gpt2 *m);
size_t gt_gpt2_num_params(const gt_gpt2 *m);
uint64_t gt_gpt2_step(const gt_gpt2 *m);  // AdamW updates applied so far
// Host copies of all parameters / gradients (n = gt_gpt2_num_params floats, llm.c order).
GT_MUST_USE gt_err gt_gpt2_params_read(gt_gpt2 *m, float *out, size_t n);
GT_MUST_USE gt_err gt_gpt2_params_write(gt_gpt2 *m, const float *in, size_t n);
GT_MUST_USE gt_err gt_gpt2_grads_read(gt_gpt2 *m, float *out, size_t n);
// The gradient buffer (all num_params floats, allocated now if no backward has run yet): for a
// collective that sums it on the device (the collective layer's device endpoint), never a host copy.
GT_MUST_USE gt_err gt_gpt2_grads_buf(gt_gpt2 *m, gt_dbuf *out);
// Activation bytes a (B,T) step needs on the device (for memory budgets).
uint64_t gt_gpt2_activation_bytes(const gt_gpt2_config *cfg, int B, int T);

// ---- forward, backward, update --------------------------------------------------------------

// Forward over inputs (i32 (B,T) device buffer). With targets (i32 (B,T); 0 for none) *loss is
// the mean cross-entropy over B*T (NaN without targets), let out by the device's loss_mean
// release op: from labelled data only as the declared outputs allow (device.h), and never the
// per-position losses. Logits stay on the device, readable only when nothing labelled went in.
// T <= maxT and every token < V are checked before anything runs.
GT_MUST_USE gt_err gt_gpt2_forward(gt_gpt2 *m, gt_dbuf inputs, gt_dbuf targets, int B, int T,
                                   float *loss);
// Forward to the per-position losses (f32 (B,T)) at *losses, on the device; nothing is released
// (their mean, or anything else computed from them, leaves only through a release op).
GT_MUST_USE gt_err gt_gpt2_forward_losses(gt_gpt2 *m, gt_dbuf inputs, gt_dbuf targets, int B,
                                          int T, gt_dref *losses);
// Forward, then backward of loss_scale * mean loss, accumulated (+=) into the gradients.
// loss_scale is 1/grad_accum_steps when accumulating. Logits are consumed (dlogits in place).
// loss NULL: the mean loss is not released (a step the agreement releases no loss on).
GT_MUST_USE gt_err gt_gpt2_forward_backward(gt_gpt2 *m, gt_dbuf inputs, gt_dbuf targets, int B,
                                            int T, float loss_scale, float *loss);
GT_MUST_USE gt_err gt_gpt2_zero_grad(gt_gpt2 *m);
// Vp logits of row (b, t) of the last forward into out.
GT_MUST_USE gt_err gt_gpt2_logits_read(gt_gpt2 *m, int b, int t, float *out, size_t n);

typedef struct {
    float beta1, beta2, eps, weight_decay;  // weight decay applies to every parameter (llm.c)
    float grad_clip;  // clip the global gradient norm to this; 0 disables
    // The schedule: false, a step is gt_gpt2_zero_grad + gt_gpt2_forward_backward +
    // gt_gpt2_update; true, it is gt_gpt2_step_in_backward (each tensor's AdamW inside the
    // backward). gt_gpt2_program records the one this names, and each function refuses the other.
    bool update_in_backward;
} gt_adamw;

// One AdamW step (t = step + 1) at learning rate lr. Clipping runs on the device (clip_grads).
// *grad_norm (may be NULL) receives the global gradient norm before clipping through the
// norm_release op: refused (GT_E_POLICY) for gradients of labelled data unless `grad_norm` is a
// declared output. GT_E_ARG when opt->update_in_backward.
GT_MUST_USE gt_err gt_gpt2_update(gt_gpt2 *m, const gt_adamw *opt, float lr, float *grad_norm);

// One whole training step with AdamW inside the backward (docs/train.md "AdamW inside the
// backward"): forward (loss as gt_gpt2_forward_backward's), then the backward, and as soon as a
// tensor's gradient is final (each layer's 12 tensors after that layer's backward, lnfw/lnfb
// after the final layernorm's, wte and wpe after the encoder's) one adamw op on its slice of
// params, grads, m and v, and that gradient slice set to zero. Under a memory cap the gradients
// then never need to go out and come back for a separate update. Gives the parameters, moments
// and step of zero_grad + forward_backward + update (opt, lr) bit for bit: the same per-element
// instructions run. opt->update_in_backward must be set. Refused where it is not the same
// maths: GT_E_ARG for grad_clip > 0 (the norm needs the whole gradient first; no norm is
// computed); GT_E_STATE for a ZeRO-1 sharded model, for gradients handed to a collective
// (gt_gpt2_grads_buf: several ranks sum them first), and for gradients of a backward not yet
// applied (micro-batch accumulation). Starts from zero gradients (zeroing them first unless the
// last step left them so) and leaves them zero. A failure part way leaves the model
// half-updated: discard it.
GT_MUST_USE gt_err gt_gpt2_step_in_backward(gt_gpt2 *m, gt_dbuf inputs, gt_dbuf targets, int B,
                                            int T, float loss_scale, const gt_adamw *opt,
                                            float lr, float *loss);

// ---- ZeRO-1: the AdamW state sharded across data-parallel ranks (docs/train.md "ZeRO-1") ------
// From now on gt_gpt2_update updates params [off, +len) only (this rank's shard, after the
// caller's reduce-scatter of the gradients), with m and v of len floats allocated here: 1/N of
// the optimizer memory. part of nparts: this rank of the job. Once, before the first update.
// A sharded model has no state file (gt_train_state_save: GT_E_STATE; 1/N of the moments is not
// the state), and gt_gpt2_state_bufs_get(alloc_moments) is GT_E_STATE.
GT_MUST_USE gt_err gt_gpt2_zero_shard(gt_gpt2 *m, uint64_t off, uint64_t len, uint32_t part,
                                      uint32_t nparts);
// With clipping or a norm: this shard's f64 sum of squares of the gradients into slot `part` of
// *partials (nparts f64, i.e. 2 * nparts floats, a device buffer). The caller all-gathers it
// across the ranks' devices before gt_gpt2_update, which sums the nparts partials in rank order
// on the device (sum_f64): partial sums are not a declared output, so they never leave a device
// but sealed to a peer device.
GT_MUST_USE gt_err gt_gpt2_zero_partial(gt_gpt2 *m, gt_dbuf *partials);
bool gt_gpt2_zero_sharded(const gt_gpt2 *m);  // gt_gpt2_zero_shard was called
// Host copies of this rank's shard of m and v (len = the shard's floats each; unlabelled runs
// only: copy_out's policy): the tests' view, and the hook a per-rank resume would export.
GT_MUST_USE gt_err gt_gpt2_zero_moments_read(gt_gpt2 *m, float *mo, float *vo, size_t len);

// The program of one training step (kernels.h "programs": what an agreement's training.program
// pins) of a model of cfg on (B, T) batches from a loader, with opt: the ops one
// gt_loader_next + gt_gpt2_zero_grad + gt_gpt2_forward_backward + gt_gpt2_update(opt, no norm)
// launch that write something, or with opt->update_in_backward those of gt_loader_next +
// gt_gpt2_step_in_backward(opt), recorded from one such step on a cpu device of its own.
GT_MUST_USE gt_err gt_gpt2_program(const gt_gpt2_config *cfg, int B, int T, const gt_adamw *opt,
                                   gt_buf *program);

// ---- learning-rate schedule -----------------------------------------------------------------

typedef enum { GT_LR_CONSTANT = 0, GT_LR_COSINE } gt_lr_kind;
typedef struct {
    gt_lr_kind kind;
    float lr;          // peak
    int warmup;        // steps of linear warmup: lr * (step+1) / warmup
    int total_steps;   // cosine: decays to lr * final_frac at total_steps
    float final_frac;
} gt_lr_schedule;
GT_MUST_USE gt_err gt_lr_kind_parse(const char *name, gt_lr_kind *kind);
float gt_lr_at(const gt_lr_schedule *s, int step);  // step counts from 0

// ---- data loader ----------------------------------------------------------------------------
// Over token buffers already on the device (u16 tokens, e.g. a shard's payload). Each sample is
// B*T+1 consecutive tokens of one buffer starting at a multiple of B*T; a buffer holds
// floor((n-1)/(B*T)) samples (llm.c's loader). Unshuffled, batches walk the buffers in order and
// wrap; shuffled, every epoch permutes the buffer order and each buffer's samples from the seed.

typedef struct {
    uint64_t epoch;
    uint64_t shard;          // index into this epoch's buffer order
    uint64_t sample;         // index into that buffer's sample order
    // The loader the position belongs to: B*T per sample, shuffling and seed. gt_loader_seek
    // refuses a position of another loader (unless sample_tokens is 0: a plain rewind).
    uint64_t sample_tokens;
    uint64_t seed;
    uint32_t shuffle;
} gt_loader_pos;

typedef struct gt_loader gt_loader;  // opaque; borrows the device and the token buffers

// Checks every token of every buffer is < V (on the device) and that some buffer holds a sample.
// Allocates the (B,T) input and target buffers (NO_READBACK, like the data they come from).
GT_MUST_USE gt_err gt_loader_create(gt_loader **out, gt_device *dev, const gt_dbuf *bufs,
                                    const uint64_t *ntokens, size_t nbufs, int B, int T, int V,
                                    bool shuffle, uint64_t seed);
void gt_loader_free(gt_loader *l);
// Gathers the next batch into the loader's input/target buffers and advances.
GT_MUST_USE gt_err gt_loader_next(gt_loader *l);
gt_dbuf gt_loader_inputs(const gt_loader *l);
gt_dbuf gt_loader_targets(const gt_loader *l);
gt_loader_pos gt_loader_tell(const gt_loader *l);
GT_MUST_USE gt_err gt_loader_seek(gt_loader *l, gt_loader_pos pos);
uint64_t gt_loader_num_samples(const gt_loader *l);  // over all buffers

// Reads an llm.c shard file into a new device buffer (flags as given, e.g. NO_READBACK).
GT_MUST_USE gt_err gt_shard_to_device(gt_device *dev, const char *path, uint32_t flags,
                                      gt_dbuf *buf, uint64_t *ntokens);

// ---- training state (resume) ----------------------------------------------------------------
// PATH.state, written beside an llm.c checkpoint PATH, is self-contained: the parameters again,
// the AdamW step and moments (m, v) and the loader position, in one atomically renamed file.
// It records the SHA-256 of the fp32 parameters it holds ("weights") and of those the
// checkpoint file held before this save ("previous", zero when unknown), so that a resume can
// tell the checkpoint it is given from the one it was saved with. The trainer writes PATH.state
// first and PATH second: a process killed between the two leaves a state one save ahead of PATH,
// recognised by its "previous" hash, and resumed from the state's own parameters.
// Format (little-endian): u32 magic "GTTS", u32 version 2, 6 x i32 config (maxT, V, Vp, L, NH,
// C), u64 step, u64 epoch, u64 shard, u64 sample, u64 sample_tokens, u64 seed, u32 shuffle,
// u64 nparams, u32 has_moments, 32 bytes weights SHA-256, 32 bytes previous SHA-256, then
// nparams f32 parameters, then nparams f32 m and nparams f32 v when has_moments. Version 1 is
// the same without the two hashes (read, never written).

#define GT_TRAIN_STATE_MAGIC 0x53545447u  // "GTTS"
#define GT_TRAIN_STATE_VERSION 2
#define GT_WEIGHTS_SHA_BYTES 32

GT_MUST_USE gt_err gt_train_state_save(gt_gpt2 *m, gt_loader_pos pos, const char *path);
// The same for a checkpoint written with gt_gpt2_save_bf16: the weights hash is that of the
// parameters rounded to bf16 (what the checkpoint holds); the state keeps them exact.
GT_MUST_USE gt_err gt_train_state_save_bf16(gt_gpt2 *m, gt_loader_pos pos, const char *path);
// Loads parameters, step and moments into a model with the same config (the header and size are
// checked first: then nothing is changed on failure); *pos receives the loader position. A read
// error after the header leaves the model half-loaded: discard it.
GT_MUST_USE gt_err gt_train_state_load(gt_gpt2 *m, gt_loader_pos *pos, const char *path);

// What a state file's header says, for inspect (the header only; sizes checked against it).
typedef struct {
    uint32_t version;
    gt_gpt2_config cfg;
    uint64_t step, nparams;
    gt_loader_pos pos;
    bool has_moments, size_ok;
    uint8_t weights_sha[GT_WEIGHTS_SHA_BYTES], prev_sha[GT_WEIGHTS_SHA_BYTES];  // version 2
} gt_train_state_summary;
GT_MUST_USE gt_err gt_train_state_describe(const char *path, gt_train_state_summary *out);
// The same from the header's bytes (len: what there is of the first 160) and the file's size.
GT_MUST_USE gt_err gt_train_state_describe_header(const uint8_t *hdr, size_t len,
                                                  uint64_t file_size, gt_train_state_summary *out);

// Resuming a model loaded with gt_gpt2_load(CKPT) from CKPT.state: what the two files say.
typedef enum {
    GT_RESUME_MATCHED = 0,  // CKPT holds the weights the state was saved with (the state's
                            // exact fp32 parameters are used: the same, or for a bf16 CKPT
                            // their unrounded values)
    GT_RESUME_STATE_AHEAD,  // CKPT is the save before the state's (killed between the writes):
                            // parameters, moments and step are the state's
    GT_RESUME_OPTIMIZER_RESET,  // CKPT's weights differ and GT_RESUME_RESET_OPTIMIZER: CKPT's
                                // weights, AdamW moments zero, step and loader position kept
    GT_RESUME_LEGACY,       // a version 1 state records no hash: parameters are the state's
} gt_resume_outcome;
typedef enum { GT_RESUME_STRICT = 0, GT_RESUME_RESET_OPTIMIZER } gt_resume_mode;
typedef struct {
    gt_resume_outcome outcome;
    uint8_t ckpt_sha[GT_WEIGHTS_SHA_BYTES];   // the weights gt_gpt2_load read
    uint8_t state_sha[GT_WEIGHTS_SHA_BYTES];  // the weights the state was saved with
    uint64_t step;
} gt_resume_info;
// GT_RESUME_STRICT refuses (GT_E_STATE, both hashes in the message, the model unchanged) when
// CKPT's weights are neither the state's nor the save before it. m must come from gt_gpt2_load.
GT_MUST_USE gt_err gt_train_resume(gt_gpt2 *m, gt_loader_pos *pos, const char *state_path,
                                   gt_resume_mode mode, gt_resume_info *info);

// ---- the model's state on the device, for device-sealed export (travel.h gt_export_model) ----
// In an agreement run the weights and moments carry holder labels: they leave only sealed by the
// device (travel's gt_travel_export_*), never through gt_gpt2_save / gt_train_state_save.
typedef struct {
    gt_dbuf params, m, v;   // m, v: 0 until the first update (or alloc_moments)
    uint64_t params_bytes;  // bytes of each
} gt_gpt2_state_bufs;
// The buffers (allocating zeroed moments first when alloc_moments and there are none yet).
GT_MUST_USE gt_err gt_gpt2_state_bufs_get(gt_gpt2 *m, bool alloc_moments, gt_gpt2_state_bufs *out);
// The AdamW step, after a resume state was imported into the buffers.
void gt_gpt2_step_set(gt_gpt2 *m, uint64_t step);

// ---- sampling ---------------------------------------------------------------------------------

typedef struct {
    float temperature;  // 0: greedy
    int top_k;          // 0: whole vocabulary
    uint64_t rng;       // state; advanced by every draw
} gt_sampler;

// Continues tokens[0..n_prompt) to n_total tokens (tokens has room for n_total). Contexts longer
// than maxT use the last maxT tokens. Every prompt token must be < V.
GT_MUST_USE gt_err gt_gpt2_generate(gt_gpt2 *m, gt_sampler *s, int32_t *tokens, int n_prompt,
                                    int n_total);
// Draws one token from Vp logits (only the first V count) with s's temperature and top-k.
int gt_sampler_pick(gt_sampler *s, const float *logits, int V);

// Deterministic random numbers (xorshift64*): one stream per state, no globals.
uint32_t gt_rng_u32(uint64_t *state);
float gt_rng_f32(uint64_t *state);  // [0, 1)

#endif
