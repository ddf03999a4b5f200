// GPT-2 as a sequence of device ops: parameters in one buffer laid out by one size table (llm.c
// order), gradients and AdamW moments in buffers of the same layout, activations in one buffer
// laid out for the (B,T) of the current step.
//
// Legend: L = layers, C = channels, NH = heads, V/Vp = real/padded vocab, maxT = positions,
// B = batch, T = time, BT = B*T.
#include "train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Tensor indices, llm.c order.
enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW,
       FCPROJB, LNFW, LNFB };
// The tensors with one slice per layer, in llm.c order.
static const int layer_tensors[] = {LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB,
                                    LN2W, LN2B, FCW,  FCB,  FCPROJW,  FCPROJB};

int gt_gpt2_pad_vocab(int vocab_size) { return (vocab_size + 127) / 128 * 128; }

gt_err gt_gpt2_config_check(const gt_gpt2_config *c)
{
    GT_ENSURE(c->max_seq_len >= 1 && c->max_seq_len <= 65536, GT_E_FORMAT,
              "gpt2 config: max_seq_len %d (1..65536)", c->max_seq_len);
    GT_ENSURE(c->vocab_size >= 1 && c->vocab_size <= 65536, GT_E_FORMAT,
              "gpt2 config: vocab_size %d (1..65536: tokens are uint16)", c->vocab_size);
    GT_ENSURE(c->padded_vocab_size >= c->vocab_size && c->padded_vocab_size <= (1 << 20),
              GT_E_FORMAT, "gpt2 config: padded_vocab_size %d (vocab_size %d)",
              c->padded_vocab_size, c->vocab_size);
    GT_ENSURE(c->num_layers >= 1 && c->num_layers <= 1024, GT_E_FORMAT,
              "gpt2 config: num_layers %d (1..1024)", c->num_layers);
    GT_ENSURE(c->channels >= 1 && c->channels <= 16384, GT_E_FORMAT,
              "gpt2 config: channels %d (1..16384)", c->channels);
    GT_ENSURE(c->num_heads >= 1 && c->channels % c->num_heads == 0, GT_E_FORMAT,
              "gpt2 config: channels %d not a multiple of num_heads %d", c->channels,
              c->num_heads);
    return GT_OK;
}

size_t gt_gpt2_param_sizes(const gt_gpt2_config *cfg, size_t s[GT_GPT2_NUM_TENSORS])
{
    size_t Vp = (size_t)cfg->padded_vocab_size, C = (size_t)cfg->channels;
    size_t L = (size_t)cfg->num_layers, maxT = (size_t)cfg->max_seq_len;
    s[WTE] = Vp * C;
    s[WPE] = maxT * C;
    s[LN1W] = L * C;
    s[LN1B] = L * C;
    s[QKVW] = L * 3 * C * C;
    s[QKVB] = L * 3 * C;
    s[ATTPROJW] = L * C * C;
    s[ATTPROJB] = L * C;
    s[LN2W] = L * C;
    s[LN2B] = L * C;
    s[FCW] = L * 4 * C * C;
    s[FCB] = L * 4 * C;
    s[FCPROJW] = L * C * 4 * C;
    s[FCPROJB] = L * C;
    s[LNFW] = C;
    s[LNFB] = C;
    size_t n = 0;
    for (int i = 0; i < GT_GPT2_NUM_TENSORS; i++) {
        n += s[i];
    }
    return n;
}

// ---- activation layout ----------------------------------------------------------------------

typedef struct {
    uint64_t encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, att, residual2, ln2, ln2_mean,
        ln2_rstd, fch, fch_gelu, residual3, lnf, lnf_mean, lnf_rstd, logits, losses,
        tmp,   // (BT,C): attproj and fcproj outputs, consumed at once by the residual add
        dres,  // (BT,C): gradient of the residual stream
        dc,    // (BT,C): gradient scratch
        d4c;   // (BT,4C): gradient scratch (also dqkv)
    uint64_t total;  // floats
} act_layout;

static act_layout act_layout_for(const gt_gpt2_config *cfg, int B, int T)
{
    uint64_t L = (uint64_t)cfg->num_layers, C = (uint64_t)cfg->channels;
    uint64_t NH = (uint64_t)cfg->num_heads, Vp = (uint64_t)cfg->padded_vocab_size;
    uint64_t BT = (uint64_t)B * (uint64_t)T;
    act_layout a;
    uint64_t at = 0;
#define PLACE(field, n) do { a.field = at; at += ((n) + 15) / 16 * 16; } while (0)
    PLACE(encoded, BT * C);
    PLACE(ln1, L * BT * C);
    PLACE(ln1_mean, L * BT);
    PLACE(ln1_rstd, L * BT);
    PLACE(qkv, L * BT * 3 * C);
    PLACE(atty, L * BT * C);
    PLACE(att, L * (uint64_t)B * NH * (uint64_t)T * (uint64_t)T);
    PLACE(residual2, L * BT * C);
    PLACE(ln2, L * BT * C);
    PLACE(ln2_mean, L * BT);
    PLACE(ln2_rstd, L * BT);
    PLACE(fch, L * BT * 4 * C);
    PLACE(fch_gelu, L * BT * 4 * C);
    PLACE(residual3, L * BT * C);
    PLACE(lnf, BT * C);
    PLACE(lnf_mean, BT);
    PLACE(lnf_rstd, BT);
    PLACE(logits, BT * Vp);
    PLACE(losses, BT);
    PLACE(tmp, BT * C);
    PLACE(dres, BT * C);
    PLACE(dc, BT * C);
    PLACE(d4c, BT * 4 * C);
#undef PLACE
    a.total = at;
    return a;
}

uint64_t gt_gpt2_activation_bytes(const gt_gpt2_config *cfg, int B, int T)
{
    return act_layout_for(cfg, B, T).total * 4;
}

// ---- model ----------------------------------------------------------------------------------

struct gt_gpt2 {
    gt_device *dev;  // borrowed
    gt_gpt2_config cfg;
    size_t sizes[GT_GPT2_NUM_TENSORS];
    size_t offsets[GT_GPT2_NUM_TENSORS];  // floats
    size_t nparams;
    gt_dbuf params, grads, m, v;  // grads at first backward, m and v at first update
    uint64_t step;
    gt_dbuf acts;
    uint64_t acts_bytes;
    act_layout lay;
    int B, T;           // shapes of the last forward
    bool have_dlogits;  // the last forward ran with grad
    gt_dbuf scalar;     // 8 bytes: sum of squares
    gt_dbuf released;   // 4 bytes: what a release op lets out (the mean loss, the norm)
    // ZeRO-1 (gt_gpt2_zero_shard): AdamW updates params [shard_off, +shard_len) only, with m and
    // v of shard_len floats; partials holds every rank's f64 sum of squares of its shard.
    bool sharded;
    uint64_t shard_off, shard_len;
    uint32_t part, nparts;
    gt_dbuf partials;
    uint64_t partial_step;  // step + 1 whose partial was last written (0: none)
    // What the gradients hold, for gt_gpt2_step_in_backward: all zero (known), a backward's sum
    // not yet applied by an update, and whether a collective was given the buffer (ranks).
    bool grads_zero, grads_pending, grads_shared;
    // SHA-256 of the fp32 parameters when last read from or written to a file (resume checks)
    uint8_t file_sha[GT_WEIGHTS_SHA_BYTES];
    bool has_file_sha;
};

gt_err gt_gpt2_create(gt_gpt2 **out, gt_device *dev, const gt_gpt2_config *cfg)
{
    *out = NULL;
    GT_TRY(gt_gpt2_config_check(cfg));
    gt_gpt2 *m = calloc(1, sizeof *m);
    GT_ENSURE(m != NULL, GT_E_NOMEM, "gpt2: out of memory");
    m->dev = dev;
    m->cfg = *cfg;
    m->nparams = gt_gpt2_param_sizes(cfg, m->sizes);
    size_t at = 0;
    for (int i = 0; i < GT_GPT2_NUM_TENSORS; i++) {
        m->offsets[i] = at;
        at += m->sizes[i];
    }
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_device_alloc(dev, (uint64_t)m->nparams * 4, 0, &m->params), fail);
    GT_TRY_GOTO(err, gt_device_alloc(dev, 8, 0, &m->scalar), fail);
    GT_TRY_GOTO(err, gt_device_alloc(dev, 4, 0, &m->released), fail);
    *out = m;
    return GT_OK;
fail:
    gt_gpt2_free(m);
    return gt_err_wrap(err, "gpt2: %zu parameters", m->nparams);
}

static void free_buf(gt_device *dev, gt_dbuf *b)
{
    if (*b != 0) {
        gt_err e = gt_device_free(dev, *b);
        (void)e;  // only a bad handle fails, and these are ours
        *b = 0;
    }
}

void gt_gpt2_free(gt_gpt2 *m)
{
    if (m == NULL) {
        return;
    }
    free_buf(m->dev, &m->params);
    free_buf(m->dev, &m->grads);
    free_buf(m->dev, &m->m);
    free_buf(m->dev, &m->v);
    free_buf(m->dev, &m->acts);
    free_buf(m->dev, &m->scalar);
    free_buf(m->dev, &m->released);
    free_buf(m->dev, &m->partials);
    free(m);
}

const gt_gpt2_config *gt_gpt2_get_config(const gt_gpt2 *m) { return &m->cfg; }
size_t gt_gpt2_num_params(const gt_gpt2 *m) { return m->nparams; }
uint64_t gt_gpt2_step(const gt_gpt2 *m) { return m->step; }

gt_err gt_gpt2_internal_moments(gt_gpt2 *m, gt_dbuf *mbuf, gt_dbuf *vbuf, bool alloc)
{
    // A shard's moments are not the model's: a state file or an export of them would be 1/N
    // of the state labelled as all of it. Without alloc, a sharded model has no full moments.
    GT_ENSURE(!(m->sharded && alloc), GT_E_STATE,
              "gpt2: the AdamW state is sharded across ranks (ZeRO-1); this rank holds floats "
              "[%llu, +%llu) of it only", (unsigned long long)m->shard_off,
              (unsigned long long)m->shard_len);
    if (m->sharded) {
        *mbuf = *vbuf = 0;
        return GT_OK;
    }
    if (alloc && m->m == 0) {
        GT_TRY(gt_device_alloc(m->dev, (uint64_t)m->nparams * 4, 0, &m->m));
        GT_TRY(gt_device_alloc(m->dev, (uint64_t)m->nparams * 4, 0, &m->v));
    }
    *mbuf = m->m;
    *vbuf = m->v;
    return GT_OK;
}

void gt_gpt2_internal_set_step(gt_gpt2 *m, uint64_t step) { m->step = step; }
gt_device *gt_gpt2_internal_device(gt_gpt2 *m) { return m->dev; }
gt_dbuf gt_gpt2_internal_params(gt_gpt2 *m) { return m->params; }

void gt_gpt2_internal_set_file_sha(gt_gpt2 *m, const uint8_t sha[GT_WEIGHTS_SHA_BYTES])
{
    memcpy(m->file_sha, sha, GT_WEIGHTS_SHA_BYTES);
    m->has_file_sha = true;
}

bool gt_gpt2_internal_file_sha(const gt_gpt2 *m, uint8_t sha[GT_WEIGHTS_SHA_BYTES])
{
    memcpy(sha, m->file_sha, GT_WEIGHTS_SHA_BYTES);
    return m->has_file_sha;
}

static gt_err ensure_grads(gt_gpt2 *m)
{
    if (m->grads == 0) {
        GT_TRY(gt_device_alloc(m->dev, (uint64_t)m->nparams * 4, 0, &m->grads));
    }
    return GT_OK;
}

gt_err gt_gpt2_params_read(gt_gpt2 *m, float *out, size_t n)
{
    GT_ENSURE(n == m->nparams, GT_E_ARG, "gpt2: %zu floats for %zu parameters", n, m->nparams);
    return gt_device_copy_out(m->dev, out, m->params, 0, (uint64_t)n * 4);
}

gt_err gt_gpt2_params_write(gt_gpt2 *m, const float *in, size_t n)
{
    GT_ENSURE(n == m->nparams, GT_E_ARG, "gpt2: %zu floats for %zu parameters", n, m->nparams);
    return gt_device_copy_in(m->dev, m->params, 0, in, (uint64_t)n * 4);
}

gt_err gt_gpt2_grads_buf(gt_gpt2 *m, gt_dbuf *out)
{
    GT_TRY(ensure_grads(m));
    m->grads_shared = true;  // summed across ranks by its holder: before any update
    *out = m->grads;
    return GT_OK;
}

gt_err gt_gpt2_grads_read(gt_gpt2 *m, float *out, size_t n)
{
    GT_ENSURE(n == m->nparams, GT_E_ARG, "gpt2: %zu floats for %zu parameters", n, m->nparams);
    GT_ENSURE(m->grads != 0, GT_E_STATE, "gpt2: no backward has run");
    return gt_device_copy_out(m->dev, out, m->grads, 0, (uint64_t)n * 4);
}

gt_err gt_gpt2_zero_grad(gt_gpt2 *m)
{
    GT_TRY(ensure_grads(m));
    GT_TRY(gt_device_memset(m->dev, m->grads, 0, 0, (uint64_t)m->nparams * 4));
    m->grads_zero = true;
    m->grads_pending = false;
    return GT_OK;
}

// ---- random init ----------------------------------------------------------------------------

uint32_t gt_rng_u32(uint64_t *state)
{
    // xorshift64* (state must not be 0: a zero state is replaced by a fixed odd constant)
    if (*state == 0) {
        *state = 0x9E3779B97F4A7C15ull;
    }
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

float gt_rng_f32(uint64_t *state) { return (gt_rng_u32(state) >> 8) / 16777216.0f; }

static float rng_normal(uint64_t *state)
{
    // Box-Muller; one draw per pair keeps the stream simple to replay.
    float u1 = 0.0f;
    do {
        u1 = gt_rng_f32(state);
    } while (u1 <= 1e-7f);
    float u2 = gt_rng_f32(state);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
}

static gt_err fill_tensor(gt_gpt2 *m, int t, float *tmp, size_t tmp_n, uint64_t *rng, float std,
                          float constant, size_t zero_from)
{
    size_t n = m->sizes[t];
    for (size_t at = 0; at < n; at += tmp_n) {
        size_t k = n - at < tmp_n ? n - at : tmp_n;
        for (size_t i = 0; i < k; i++) {
            tmp[i] = at + i >= zero_from ? 0.0f : std > 0.0f ? std * rng_normal(rng) : constant;
        }
        GT_TRY(gt_device_copy_in(m->dev, m->params, (uint64_t)(m->offsets[t] + at) * 4, tmp,
                                 (uint64_t)k * 4));
    }
    return GT_OK;
}

gt_err gt_gpt2_init_random(gt_gpt2 *m, uint64_t seed)
{
    const size_t tmp_n = 1 << 16;
    float *tmp = malloc(tmp_n * sizeof *tmp);
    GT_ENSURE(tmp != NULL, GT_E_NOMEM, "gpt2 init: out of memory");
    uint64_t rng = seed ^ 0x6A09E667F3BCC909ull;
    float std = 0.02f, resid_std = 0.02f / sqrtf(2.0f * (float)m->cfg.num_layers);
    size_t wte_real = (size_t)m->cfg.vocab_size * (size_t)m->cfg.channels;
    gt_err err = GT_OK;
    for (int t = 0; t < GT_GPT2_NUM_TENSORS; t++) {
        float s = 0.0f, c = 0.0f;
        size_t zero_from = (size_t)-1;
        switch (t) {
        case WTE: s = std; zero_from = wte_real; break;
        case WPE: case QKVW: case FCW: s = std; break;
        case ATTPROJW: case FCPROJW: s = resid_std; break;
        case LN1W: case LN2W: case LNFW: c = 1.0f; break;
        default: c = 0.0f; break;  // biases
        }
        GT_TRY_GOTO(err, fill_tensor(m, t, tmp, tmp_n, &rng, s, c, zero_from), out);
    }
    m->step = 0;
out:
    free(tmp);
    return err;
}

// ---- op helpers -----------------------------------------------------------------------------

static bool has_layers(int t) { return !(t == WTE || t == WPE || t == LNFW || t == LNFB); }

// Floats of tensor t that one layer owns (all of it for the four tensors without layers).
static size_t slice_floats(const gt_gpt2 *m, int t)
{
    return has_layers(t) ? m->sizes[t] / (size_t)m->cfg.num_layers : m->sizes[t];
}

// Tensor t of layer `layer` in buf: params, grads, m or v (one layout).
static gt_dref P(gt_gpt2 *m, gt_dbuf buf, int t, int layer)
{
    size_t per_layer = has_layers(t) ? slice_floats(m, t) : 0;
    return (gt_dref){buf, (uint64_t)(m->offsets[t] + (size_t)layer * per_layer) * 4};
}

static gt_dref A(gt_gpt2 *m, uint64_t field, uint64_t index)  // activation float offset
{
    return (gt_dref){m->acts, (field + index) * 4};
}

// Ops are built by kernels.h's builders, which name every argument (the op table's layout).
static gt_err launch(gt_gpt2 *m, gt_op op)
{
    return gt_device_launch(m->dev, &op);
}

static gt_err ensure_acts(gt_gpt2 *m, int B, int T)
{
    GT_ENSURE(B >= 1 && T >= 1, GT_E_ARG, "gpt2: batch %d x %d", B, T);
    GT_ENSURE(T <= m->cfg.max_seq_len, GT_E_ARG, "gpt2: sequence length %d > max_seq_len %d", T,
              m->cfg.max_seq_len);
    act_layout lay = act_layout_for(&m->cfg, B, T);
    uint64_t bytes = lay.total * 4;
    if (bytes > m->acts_bytes) {
        // Grow geometrically: sampling lengthens T by one token per forward.
        uint64_t want = m->acts_bytes + m->acts_bytes / 2;
        want = want > bytes ? want : bytes;
        free_buf(m->dev, &m->acts);
        m->acts_bytes = 0;
        gt_err e = gt_device_alloc(m->dev, want, 0, &m->acts);
        if (e.code != GT_E_NONE && want > bytes) {
            e = gt_device_alloc(m->dev, want = bytes, 0, &m->acts);
        }
        GT_TRY(e);
        m->acts_bytes = want;
    }
    m->lay = lay;
    m->B = B;
    m->T = T;
    return GT_OK;
}

// The mean loss leaves the device as one scalar, through the release op: the per-position
// losses (computed from holder data) never do (device.h "declared outputs").
static gt_err mean_loss(gt_gpt2 *m, float *loss)
{
    int64_t BT = (int64_t)m->B * m->T;
    GT_TRY(launch(m, gt_op_loss_mean((gt_dref){m->released, 0}, A(m, m->lay.losses, 0), BT)));
    return gt_device_copy_out(m->dev, loss, m->released, 0, 4);
}

// Forward to the logits and, with targets, the losses (and dlogits in place when grad).
static gt_err forward(gt_gpt2 *m, gt_dbuf inputs, gt_dbuf targets, int B, int T, bool grad,
                      float dloss, float *loss)
{
    if (loss != NULL) {
        *loss = NAN;
    }
    m->have_dlogits = false;
    GT_TRY(ensure_acts(m, B, T));
    const act_layout *a = &m->lay;
    int64_t L = m->cfg.num_layers, C = m->cfg.channels, NH = m->cfg.num_heads;
    int64_t V = m->cfg.vocab_size, Vp = m->cfg.padded_vocab_size, maxT = m->cfg.max_seq_len;
    int64_t BT = (int64_t)B * T;
    uint64_t btc = (uint64_t)BT * C, bt = (uint64_t)BT;
    uint64_t att_per_layer = (uint64_t)B * NH * T * T;
    GT_TRY(launch(m, gt_op_encoder_fwd(A(m, a->encoded, 0), (gt_dref){inputs, 0},
                                       P(m, m->params, WTE, 0), P(m, m->params, WPE, 0), B, T, C, V,
                                       Vp, maxT)));
    for (int64_t l = 0; l < L; l++) {
        gt_dref residual = l == 0 ? A(m, a->encoded, 0) : A(m, a->residual3, (l - 1) * btc);
        gt_dref ln1 = A(m, a->ln1, l * btc), qkv = A(m, a->qkv, l * btc * 3);
        gt_dref atty = A(m, a->atty, l * btc), res2 = A(m, a->residual2, l * btc);
        gt_dref ln2 = A(m, a->ln2, l * btc), fch = A(m, a->fch, l * btc * 4);
        gt_dref fchg = A(m, a->fch_gelu, l * btc * 4), res3 = A(m, a->residual3, l * btc);
        gt_dref tmp = A(m, a->tmp, 0);
        GT_TRY(launch(m, gt_op_layernorm_fwd(
                             ln1, A(m, a->ln1_mean, l * bt), A(m, a->ln1_rstd, l * bt), residual,
                             P(m, m->params, LN1W, l), P(m, m->params, LN1B, l), BT, C)));
        GT_TRY(launch(m, gt_op_matmul_fwd(qkv, ln1, P(m, m->params, QKVW, l),
                                          P(m, m->params, QKVB, l), BT, C, 3 * C)));
        GT_TRY(launch(
            m, gt_op_attention_fwd(atty, A(m, a->att, l * att_per_layer), qkv, B, T, C, NH)));
        GT_TRY(launch(m, gt_op_matmul_fwd(tmp, atty, P(m, m->params, ATTPROJW, l),
                                          P(m, m->params, ATTPROJB, l), BT, C, C)));
        GT_TRY(launch(m, gt_op_residual_fwd(res2, residual, tmp, (int64_t)btc)));
        GT_TRY(launch(
            m, gt_op_layernorm_fwd(ln2, A(m, a->ln2_mean, l * bt), A(m, a->ln2_rstd, l * bt), res2,
                                   P(m, m->params, LN2W, l), P(m, m->params, LN2B, l), BT, C)));
        GT_TRY(launch(m, gt_op_matmul_fwd(fch, ln2, P(m, m->params, FCW, l),
                                          P(m, m->params, FCB, l), BT, C, 4 * C)));
        GT_TRY(launch(m, gt_op_gelu_fwd(fchg, fch, (int64_t)btc * 4)));
        GT_TRY(launch(m, gt_op_matmul_fwd(tmp, fchg, P(m, m->params, FCPROJW, l),
                                          P(m, m->params, FCPROJB, l), BT, 4 * C, C)));
        GT_TRY(launch(m, gt_op_residual_fwd(res3, res2, tmp, (int64_t)btc)));
    }
    GT_TRY(
        launch(m, gt_op_layernorm_fwd(A(m, a->lnf, 0), A(m, a->lnf_mean, 0), A(m, a->lnf_rstd, 0),
                                      A(m, a->residual3, (uint64_t)(L - 1) * btc),
                                      P(m, m->params, LNFW, 0), P(m, m->params, LNFB, 0), BT, C)));
    GT_TRY(launch(m, gt_op_matmul_fwd(A(m, a->logits, 0), A(m, a->lnf, 0), P(m, m->params, WTE, 0),
                                      (gt_dref){0, 0}, BT, C, Vp)));
    if (targets == 0) {
        return GT_OK;
    }
    GT_TRY(launch(m, gt_op_softmax_xent(A(m, a->losses, 0), A(m, a->logits, 0),
                                        (gt_dref){targets, 0}, B, T, V, Vp, grad ? 1 : 0, dloss)));
    m->have_dlogits = grad;
    return loss != NULL ? mean_loss(m, loss) : GT_OK;
}

gt_err gt_gpt2_forward_losses(gt_gpt2 *m, gt_dbuf inputs, gt_dbuf targets, int B, int T,
                              gt_dref *losses)
{
    GT_ENSURE(targets != 0, GT_E_ARG, "gpt2: per-position losses need targets");
    GT_TRY(forward(m, inputs, targets, B, T, false, 0.0f, NULL));
    *losses = A(m, m->lay.losses, 0);
    return GT_OK;
}

gt_err gt_gpt2_forward(gt_gpt2 *m, gt_dbuf inputs, gt_dbuf targets, int B, int T, float *loss)
{
    return forward(m, inputs, targets, B, T, false, 0.0f, loss);
}

// AdamW's step-wide values: what gt_gpt2_update and the in-backward schedule share.
typedef struct {
    const gt_adamw *opt;
    float lr, bc1, bc2;
} adamw_step;

static gt_err adamw_check(const gt_adamw *opt, float lr)
{
    GT_ENSURE(opt->beta1 >= 0.0f && opt->beta1 < 1.0f && opt->beta2 >= 0.0f &&
                  opt->beta2 < 1.0f && opt->eps > 0.0f && opt->weight_decay >= 0.0f &&
                  opt->grad_clip >= 0.0f && isfinite(lr),
              GT_E_ARG, "adamw: beta1 %g beta2 %g eps %g weight_decay %g grad_clip %g lr %g",
              opt->beta1, opt->beta2, opt->eps, opt->weight_decay, opt->grad_clip, lr);
    return GT_OK;
}

// The bias corrections of update t = step + 1.
static adamw_step adamw_step_for(const gt_gpt2 *m, const gt_adamw *opt, float lr)
{
    uint64_t t = m->step + 1;
    return (adamw_step){opt, lr, 1.0f - powf(opt->beta1, (float)t),
                        1.0f - powf(opt->beta2, (float)t)};
}

// n floats of params, m, v and grads at the given refs; any clipping was applied before.
static gt_op adamw_op(const adamw_step *s, gt_dref p, gt_dref mo, gt_dref v, gt_dref g, uint64_t n)
{
    const float scale = 1.0f;  // clip_grads scales the gradients themselves
    return gt_op_adamw(p, mo, v, g, (int64_t)n, s->lr, s->opt->beta1, s->opt->beta2,
                       s->opt->eps, s->opt->weight_decay, s->bc1, s->bc2, scale);
}

// In-backward schedule: AdamW on tensor t's slice of `layer` once its gradient is final, then
// that slice zeroed, ready for the next step. Per element the one big op's instructions run:
// the kernels' lanes are masked, not left to a tail that depends on where a range starts
// (cpu_simd.c adamw_avx2/avx512; the cuda kernel is one thread per element).
static gt_err update_slice(gt_gpt2 *m, const adamw_step *s, int t, int layer)
{
    gt_dref g = P(m, m->grads, t, layer);
    uint64_t n = slice_floats(m, t);
    GT_TRY(launch(m, adamw_op(s, P(m, m->params, t, layer), P(m, m->m, t, layer),
                              P(m, m->v, t, layer), g, n)));
    return gt_device_memset(m->dev, m->grads, g.offset, 0, n * 4);
}

// backward's hook: nothing (the standard schedule), or each tensor's update as its gradient is
// final (s != NULL).
static gt_err update_layer(gt_gpt2 *m, const adamw_step *s, int layer)
{
    for (size_t i = 0; s != NULL && i < sizeof layer_tensors / sizeof layer_tensors[0]; i++) {
        GT_TRY(update_slice(m, s, layer_tensors[i], layer));
    }
    return GT_OK;
}

// Accumulates the gradients of the last forward (+=); with s, runs the update inside (above).
static gt_err backward(gt_gpt2 *m, gt_dbuf inputs, const adamw_step *s)
{
    const act_layout *a = &m->lay;
    int B = m->B, T = m->T;
    int64_t L = m->cfg.num_layers, C = m->cfg.channels, NH = m->cfg.num_heads;
    int64_t V = m->cfg.vocab_size, Vp = m->cfg.padded_vocab_size, maxT = m->cfg.max_seq_len;
    int64_t BT = (int64_t)B * T;
    uint64_t btc = (uint64_t)BT * C, bt = (uint64_t)BT;
    uint64_t att_per_layer = (uint64_t)B * NH * T * T;
    gt_dbuf g = m->grads, p = m->params;
    gt_dref dres = A(m, a->dres, 0), dc = A(m, a->dc, 0), d4c = A(m, a->d4c, 0);
    m->grads_zero = false;
    m->grads_pending = true;
    // lm head (tied to wte), final layernorm
    GT_TRY(launch(m, gt_op_matmul_bwd(dc, P(m, g, WTE, 0), (gt_dref){0, 0}, A(m, a->logits, 0),
                                      A(m, a->lnf, 0), P(m, p, WTE, 0), BT, C, Vp, 0)));
    GT_TRY(gt_device_memset(m->dev, m->acts, a->dres * 4, 0, btc * 4));
    GT_TRY(
        launch(m, gt_op_layernorm_bwd(dres, P(m, g, LNFW, 0), P(m, g, LNFB, 0), dc,
                                      A(m, a->residual3, (uint64_t)(L - 1) * btc), P(m, p, LNFW, 0),
                                      A(m, a->lnf_mean, 0), A(m, a->lnf_rstd, 0), BT, C)));
    if (s != NULL) {  // wte's gradient still waits for the encoder's part
        GT_TRY(update_slice(m, s, LNFW, 0));
        GT_TRY(update_slice(m, s, LNFB, 0));
    }
    for (int64_t l = L - 1; l >= 0; l--) {
        gt_dref residual = l == 0 ? A(m, a->encoded, 0) : A(m, a->residual3, (l - 1) * btc);
        gt_dref ln1 = A(m, a->ln1, l * btc), qkv = A(m, a->qkv, l * btc * 3);
        gt_dref atty = A(m, a->atty, l * btc), res2 = A(m, a->residual2, l * btc);
        gt_dref ln2 = A(m, a->ln2, l * btc), fch = A(m, a->fch, l * btc * 4);
        gt_dref fchg = A(m, a->fch_gelu, l * btc * 4);
        // dres is d(residual3) = d(fcproj)
        GT_TRY(launch(m, gt_op_matmul_bwd(d4c, P(m, g, FCPROJW, l), P(m, g, FCPROJB, l), dres, fchg,
                                          P(m, p, FCPROJW, l), BT, 4 * C, C, 0)));
        GT_TRY(launch(m, gt_op_gelu_bwd(d4c, fch, d4c, (int64_t)btc * 4)));
        GT_TRY(launch(m, gt_op_matmul_bwd(dc, P(m, g, FCW, l), P(m, g, FCB, l), d4c, ln2,
                                          P(m, p, FCW, l), BT, C, 4 * C, 0)));
        // dres becomes d(residual2) = d(attproj)
        GT_TRY(launch(m, gt_op_layernorm_bwd(dres, P(m, g, LN2W, l), P(m, g, LN2B, l), dc, res2,
                                             P(m, p, LN2W, l), A(m, a->ln2_mean, l * bt),
                                             A(m, a->ln2_rstd, l * bt), BT, C)));
        GT_TRY(launch(m, gt_op_matmul_bwd(dc, P(m, g, ATTPROJW, l), P(m, g, ATTPROJB, l), dres,
                                          atty, P(m, p, ATTPROJW, l), BT, C, C, 0)));
        GT_TRY(launch(
            m, gt_op_attention_bwd(d4c, dc, qkv, A(m, a->att, l * att_per_layer), B, T, C, NH)));
        GT_TRY(launch(m, gt_op_matmul_bwd(dc, P(m, g, QKVW, l), P(m, g, QKVB, l), d4c, ln1,
                                          P(m, p, QKVW, l), BT, C, 3 * C, 0)));
        // dres becomes d(residual of the layer below)
        GT_TRY(launch(m, gt_op_layernorm_bwd(dres, P(m, g, LN1W, l), P(m, g, LN1B, l), dc, residual,
                                             P(m, p, LN1W, l), A(m, a->ln1_mean, l * bt),
                                             A(m, a->ln1_rstd, l * bt), BT, C)));
        GT_TRY(update_layer(m, s, (int)l));
    }
    GT_TRY(launch(m, gt_op_encoder_bwd(P(m, g, WTE, 0), P(m, g, WPE, 0), dres,
                                       (gt_dref){inputs, 0}, B, T, C, V, Vp, maxT)));
    if (s != NULL) {
        GT_TRY(update_slice(m, s, WTE, 0));
        GT_TRY(update_slice(m, s, WPE, 0));
    }
    return GT_OK;
}

gt_err gt_gpt2_forward_backward(gt_gpt2 *m, gt_dbuf inputs, gt_dbuf targets, int B, int T,
                                float loss_scale, float *loss)
{
    GT_ENSURE(targets != 0, GT_E_ARG, "gpt2: backward needs targets");
    GT_TRY(ensure_acts(m, B, T));  // shapes checked before gradients exist
    GT_TRY(ensure_grads(m));
    float dloss = loss_scale / ((float)B * (float)T);
    GT_TRY(forward(m, inputs, targets, B, T, true, dloss, loss));
    return backward(m, inputs, NULL);
}

// Refusals of the in-backward step: where it cannot be the standard schedule's maths.
static gt_err in_backward_check(const gt_gpt2 *m, const gt_adamw *opt, float lr)
{
    GT_TRY(adamw_check(opt, lr));
    GT_ENSURE(opt->update_in_backward, GT_E_ARG,
              "gpt2: the in-backward step needs opt.update_in_backward (which the recorded "
              "program follows); without it the step is forward_backward + update");
    GT_ENSURE(opt->grad_clip == 0.0f, GT_E_ARG,
              "gpt2: --grad-clip %g with the update inside the backward: clipping (and the "
              "gradient norm) needs the whole gradient before the first update", opt->grad_clip);
    GT_ENSURE(!m->sharded, GT_E_STATE,
              "gpt2: a ZeRO-1 sharded model updates its shard after the reduce-scatter, not "
              "inside the backward");
    GT_ENSURE(!m->grads_shared, GT_E_STATE,
              "gpt2: the gradient buffer was given to a collective (several ranks): they are "
              "summed across ranks before any update, so it cannot run inside the backward");
    GT_ENSURE(!m->grads_pending, GT_E_STATE,
              "gpt2: the gradients hold a backward not yet applied; accumulating micro-batches "
              "(grad-accum > 1) cannot run with the update inside the backward "
              "(gt_gpt2_update or gt_gpt2_zero_grad first)");
    return GT_OK;
}

gt_err gt_gpt2_step_in_backward(gt_gpt2 *m, gt_dbuf inputs, gt_dbuf targets, int B, int T,
                                float loss_scale, const gt_adamw *opt, float lr, float *loss)
{
    GT_ENSURE(targets != 0, GT_E_ARG, "gpt2: backward needs targets");
    GT_TRY(in_backward_check(m, opt, lr));
    GT_TRY(ensure_acts(m, B, T));
    GT_TRY(m->grads_zero ? GT_OK : gt_gpt2_zero_grad(m));  // the last step left them zero
    gt_dbuf mo = 0, v = 0;
    GT_TRY(gt_gpt2_internal_moments(m, &mo, &v, true));
    float dloss = loss_scale / ((float)B * (float)T);
    GT_TRY(forward(m, inputs, targets, B, T, true, dloss, loss));
    adamw_step s = adamw_step_for(m, opt, lr);
    GT_TRY(backward(m, inputs, &s));
    m->step++;
    m->grads_zero = true;  // every slice was zeroed after its update
    m->grads_pending = false;
    return GT_OK;
}

gt_err gt_gpt2_logits_read(gt_gpt2 *m, int b, int t, float *out, size_t n)
{
    size_t Vp = (size_t)m->cfg.padded_vocab_size;
    GT_ENSURE(m->acts != 0 && !m->have_dlogits, GT_E_STATE, "gpt2: no logits (run forward)");
    GT_ENSURE(b >= 0 && b < m->B && t >= 0 && t < m->T && n == Vp, GT_E_ARG,
              "gpt2: logits row (%d,%d) of (%d,%d), %zu floats", b, t, m->B, m->T, n);
    uint64_t off = (m->lay.logits + ((uint64_t)b * (uint64_t)m->T + (uint64_t)t) * Vp) * 4;
    return gt_device_copy_out(m->dev, out, m->acts, off, (uint64_t)Vp * 4);
}

// ---- ZeRO-1 -------------------------------------------------------------------------------------

gt_err gt_gpt2_zero_shard(gt_gpt2 *m, uint64_t off, uint64_t len, uint32_t part, uint32_t nparts)
{
    GT_ENSURE(m->m == 0 && !m->sharded, GT_E_STATE,
              "gpt2: ZeRO-1 sharding is set before the first update, once");
    GT_ENSURE(len >= 1 && off <= m->nparams && len <= m->nparams - off && len <= INT32_MAX &&
                  nparts >= 1 && part < nparts && nparts <= INT32_MAX / 8,
              GT_E_ARG, "gpt2: shard [%llu, +%llu) of %zu parameters, part %u of %u",
              (unsigned long long)off, (unsigned long long)len, m->nparams, part, nparts);
    GT_TRY(gt_device_alloc(m->dev, (uint64_t)nparts * 8, 0, &m->partials));
    GT_TRY(gt_device_alloc(m->dev, len * 4, 0, &m->m));
    GT_TRY(gt_device_alloc(m->dev, len * 4, 0, &m->v));
    m->sharded = true;
    m->shard_off = off;
    m->shard_len = len;
    m->part = part;
    m->nparts = nparts;
    return GT_OK;
}

gt_err gt_gpt2_zero_partial(gt_gpt2 *m, gt_dbuf *partials)
{
    GT_ENSURE(m->sharded && m->grads != 0, GT_E_STATE,
              "gpt2: a partial sum of squares needs a sharded model after a backward");
    GT_TRY(launch(m, gt_op_sumsq((gt_dref){m->partials, (uint64_t)m->part * 8},
                                 (gt_dref){m->grads, m->shard_off * 4}, (int64_t)m->shard_len)));
    m->partial_step = m->step + 1;
    *partials = m->partials;
    return GT_OK;
}

bool gt_gpt2_zero_sharded(const gt_gpt2 *m) { return m->sharded; }

gt_err gt_gpt2_zero_moments_read(gt_gpt2 *m, float *mo, float *vo, size_t len)
{
    GT_ENSURE(m->sharded && len == m->shard_len, GT_E_ARG,
              "gpt2: %zu floats of moments asked, the shard has %llu", len,
              (unsigned long long)m->shard_len);
    GT_TRY(gt_device_copy_out(m->dev, mo, m->m, 0, (uint64_t)len * 4));
    return gt_device_copy_out(m->dev, vo, m->v, 0, (uint64_t)len * 4);
}

// What one update works on: the whole model, or (ZeRO-1) its shard.
typedef struct {
    gt_dbuf mb, vb;
    uint64_t off, len;  // floats of params and grads
} update_range;

static gt_err update_range_get(gt_gpt2 *m, update_range *u)
{
    if (!m->sharded) {
        u->off = 0;
        u->len = m->nparams;
        return gt_gpt2_internal_moments(m, &u->mb, &u->vb, true);
    }
    *u = (update_range){m->m, m->v, m->shard_off, m->shard_len};
    return GT_OK;
}

// The global sum of squares into m->scalar: one pass over the gradients, or (ZeRO-1) the sum of
// the ranks' partials, which the caller all-gathered device to device (they are holder data:
// no declared output), summed in rank order on every device so that every rank clips alike.
static gt_err global_sumsq(gt_gpt2 *m)
{
    if (!m->sharded) {
        return launch(m, gt_op_sumsq((gt_dref){m->scalar, 0}, (gt_dref){m->grads, 0},
                                     (int64_t)m->nparams));
    }
    GT_ENSURE(m->partial_step == m->step + 1, GT_E_STATE,
              "gpt2: ZeRO-1 clipping needs this step's partial sums of squares "
              "(gt_gpt2_zero_partial, then their all-gather)");
    return launch(m, gt_op_sum_f64((gt_dref){m->scalar, 0}, (gt_dref){m->partials, 0},
                                   (int64_t)m->nparts));
}

gt_err gt_gpt2_update(gt_gpt2 *m, const gt_adamw *opt, float lr, float *grad_norm)
{
    GT_ENSURE(m->grads != 0, GT_E_STATE, "gpt2: update before any backward");
    GT_TRY(adamw_check(opt, lr));
    GT_ENSURE(!opt->update_in_backward, GT_E_ARG,
              "adamw: opt.update_in_backward is set: that update runs inside "
              "gt_gpt2_step_in_backward (the program it records has no separate update)");
    update_range u;
    GT_TRY(update_range_get(m, &u));
    // Clipping runs on the device (the norm is computed from holder data); the norm itself
    // leaves only through its release op, when the caller asks for it.
    if (opt->grad_clip > 0.0f || grad_norm != NULL) {
        gt_dref sumsq = {m->scalar, 0};
        GT_TRY(global_sumsq(m));
        if (grad_norm != NULL) {
            GT_TRY(launch(m, gt_op_norm_release((gt_dref){m->released, 0}, sumsq)));
            GT_TRY(gt_device_copy_out(m->dev, grad_norm, m->released, 0, 4));
        }
        if (opt->grad_clip > 0.0f) {
            GT_TRY(launch(m, gt_op_clip_grads((gt_dref){m->grads, u.off * 4}, sumsq,
                                              (int64_t)u.len, opt->grad_clip)));
        }
    }
    adamw_step s = adamw_step_for(m, opt, lr);
    GT_TRY(launch(m, adamw_op(&s, (gt_dref){m->params, u.off * 4}, (gt_dref){u.mb, 0},
                              (gt_dref){u.vb, 0}, (gt_dref){m->grads, u.off * 4}, u.len)));
    m->step++;
    m->grads_pending = false;
    return GT_OK;
}

// ---- schedule ---------------------------------------------------------------------------------

gt_err gt_lr_kind_parse(const char *name, gt_lr_kind *kind)
{
    if (strcmp(name, "constant") == 0) {
        *kind = GT_LR_CONSTANT;
    } else if (strcmp(name, "cosine") == 0) {
        *kind = GT_LR_COSINE;
    } else {
        return gt_errf(GT_E_ARG, "unknown schedule '%s' (expected constant or cosine)", name);
    }
    return GT_OK;
}

float gt_lr_at(const gt_lr_schedule *s, int step)
{
    if (step < s->warmup) {
        return s->lr * (float)(step + 1) / (float)s->warmup;
    }
    if (s->kind == GT_LR_CONSTANT || s->total_steps <= s->warmup) {
        return s->lr;
    }
    float ratio = (float)(step - s->warmup) / (float)(s->total_steps - s->warmup);
    ratio = ratio > 1.0f ? 1.0f : ratio;
    float coeff = 0.5f * (1.0f + cosf(3.14159265358979f * ratio));
    float lr_min = s->lr * s->final_frac;
    return lr_min + coeff * (s->lr - lr_min);
}
