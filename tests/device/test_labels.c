// device/: labels and declared outputs (device.h "labels", "declared outputs"; issue 13), attacked
// as an adversarial trainer would, on every built backend: cpu; sim, against a devd this test
// starts; cuda where built and a GPU is present (else skipped). Each attack asserts the refusal
// (code and the label it names) and that nothing readable came back: every destination is
// filled with a canary first and must still hold it.
#include "backend_fixture.h"
#include "toy_model.h"

#include <gputravel/device.h>
#include <gputravel/kernels.h>
#include <gputravel/train.h>
#include <gputravel/crypto.h>
#include <gputravel/travel.h>

#include "train/train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LIMIT (64u << 20)
#define NTOK 4096   // tokens in the "holder's chunk"
#define VOCAB GT_TOY_VOCAB  // its tokens are below this (the toy model's vocabulary)
#define CANARY 0x5a

// The dataset the chunk belongs to, as the agreement and the label name it.
static const uint8_t DATASET[GT_LABEL_ID_BYTES] = {0xd5, 0x7a, 0x5e, 0x70, 0x01, 0x02, 0x03, 0x04,
                                                   0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c};
#define DATASET_HEX "d57a5e700102030405060708090a0b0c"
static const uint8_t OTHER[GT_LABEL_ID_BYTES] = {0xee};

typedef gt_test_backend backend;

// An agreement over the one dataset above: `steps` training steps, and `outputs` as given (a
// JSON object's members, "" for the defaults).
static void agreement_make_pinned(gt_agreement *a, uint32_t steps, const char *outputs,
                                  const char *program_hex)
{
    char doc[2048], program[100] = "";
    if (program_hex != NULL) {
        snprintf(program, sizeof program, ",\"program\":\"%s\"", program_hex);
    }
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"labels\",\"model\":{\"layers\":1,\"channels\":16,"
             "\"heads\":2,\"vocab\":%d,\"max_seq\":8,\"init_seed\":5},\"training\":{\"steps\":%u,"
             "\"batch\":2,\"seq\":8,\"learning_rate\":0.001%s},\"holders\":[{\"name\":\"h0\","
             "\"identity_key\":\"11%062d\",\"endpoint\":\"127.0.0.1:1\",\"dataset_id\":\"%s\","
             "\"token_budget\":100000,\"max_uses_per_chunk\":1}],\"trainer\":{},\"device\":{},"
             "\"allow_simulation\":true,\"output\":{\"kind\":\"loss_only\"}%s%s%s}",
             VOCAB, steps, program, 0, DATASET_HEX, outputs[0] ? ",\"outputs\":{" : "", outputs,
             outputs[0] ? "}" : "");
    GT_ASSERT_OK(gt_agreement_parse(a, (const uint8_t *)doc, strlen(doc)));
}

static void agreement_make(gt_agreement *a, uint32_t steps, const char *outputs)
{
    agreement_make_pinned(a, steps, outputs, NULL);
}

// The device of this case; on sim its session is attested under agreement a (NULL: none).
static gt_device *open_dev(void **state, const gt_agreement *a)
{
    backend *b = *state;
    gt_test_backend_skip_absent(state);
    gt_device_config cfg = {.kind = b->kind, .threads = 1, .mem_limit = LIMIT,
                            .socket_path = b->sock};
    gt_device *dev = NULL;
    if (b->kind == GT_DEVICE_SIM) {
        gt_device_sim_options opt;
        memset(&opt, 0, sizeof opt);
        if (a != NULL) {
            memcpy(opt.agreement_hash, a->hash, GT_SHA256_BYTES);
        }
        GT_ASSERT_OK(gt_device_open_sim(&dev, &cfg, &opt));
    } else {
        GT_ASSERT_OK(gt_device_open(&dev, &cfg));
    }
    b->dev = dev;
    return dev;
}

static void declare(gt_device *dev, const gt_agreement *a)
{
    gt_device_outputs o;
    gt_agreement_device_outputs(a, &o);
    GT_ASSERT_OK(gt_device_declare_outputs(dev, &o, (gt_span){a->doc, a->doc_len}));
}

static gt_dbuf alloc(gt_device *dev, uint64_t bytes, uint32_t flags)
{
    gt_dbuf h = 0;
    GT_ASSERT_OK(gt_device_alloc(dev, bytes, flags, &h));
    return h;
}

static gt_dbuf upload(gt_device *dev, const void *p, uint64_t bytes)
{
    gt_dbuf h = alloc(dev, bytes, 0);
    GT_ASSERT_OK(gt_device_copy_in(dev, h, 0, p, bytes));
    return h;
}

static uint16_t g_tokens[NTOK];

// The holder's chunk as the trainer's device holds it: NO_READBACK, labelled with its dataset
// (what every transfer does: devd itself for a travelled chunk, the trainer for the others).
static gt_dbuf holder_chunk(gt_device *dev, bool labelled)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < NTOK; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        g_tokens[i] = (uint16_t)(x % VOCAB);
    }
    gt_dbuf h = alloc(dev, sizeof g_tokens, labelled ? GT_DBUF_NO_READBACK : 0);
    if (labelled) {
        GT_ASSERT_OK(gt_device_label_add(dev, h, DATASET));
    }
    GT_ASSERT_OK(gt_device_copy_in(dev, h, 0, g_tokens, sizeof g_tokens));
    return h;
}

// copy_out of buf must be refused for its label, and dst must not have changed.
static void assert_stays(gt_device *dev, gt_dbuf buf, uint64_t bytes, const char *what)
{
    uint8_t *dst = malloc(bytes);
    memset(dst, CANARY, bytes);
    gt_err e = gt_device_copy_out(dev, dst, buf, 0, bytes);
    if (e.code != GT_E_POLICY || strstr(e.msg, DATASET_HEX) == NULL) {
        fail_msg("%s: copy_out gave %s (%s), expected a refusal naming dataset %s", what,
                 gt_code_text(e.code), e.msg, DATASET_HEX);
    }
    for (uint64_t i = 0; i < bytes; i++) {
        if (dst[i] != CANARY) {
            fail_msg("%s: byte %llu came back", what, (unsigned long long)i);
        }
    }
    free(dst);
    size_t n = 0;
    uint8_t ids[2][GT_LABEL_ID_BYTES];
    GT_ASSERT_OK(gt_device_label_get(dev, buf, &n, ids, 2));
    assert_true(n >= 1);
    bool found = false;
    for (size_t i = 0; i < n && i < 2; i++) {
        found |= memcmp(ids[i], DATASET, GT_LABEL_ID_BYTES) == 0;
    }
    assert_true(found);
}

static void gather(gt_device *dev, gt_dbuf chunk, gt_dbuf *inp, gt_dbuf *tgt, int64_t n)
{
    *inp = alloc(dev, (uint64_t)n * 4, 0);
    *tgt = alloc(dev, (uint64_t)n * 4, 0);
    gt_op op = gt_op_tokens_gather((gt_dref){*inp, 0}, (gt_dref){*tgt, 0}, (gt_dref){chunk, 0},
                                   n, 0, VOCAB);
    GT_ASSERT_OK(gt_device_launch(dev, &op));
}

// ---- the attacks --------------------------------------------------------------------------------

static void direct_copy_out(void **state)
{
    gt_device *dev = open_dev(state, NULL);
    gt_dbuf chunk = holder_chunk(dev, true);
    assert_stays(dev, chunk, sizeof g_tokens, "the chunk itself");
}

static void through_gather(void **state)
{
    gt_device *dev = open_dev(state, NULL);
    gt_dbuf chunk = holder_chunk(dev, true), inp = 0, tgt = 0;
    gather(dev, chunk, &inp, &tgt, 256);
    assert_stays(dev, inp, 256 * 4, "gathered inputs");
    assert_stays(dev, tgt, 256 * 4, "gathered targets");
}

// wte[v] = v: the encoder would write every token's value into a buffer of the trainer's.
static void through_encoder_with_chosen_wte(void **state)
{
    gt_device *dev = open_dev(state, NULL);
    gt_dbuf chunk = holder_chunk(dev, true), inp = 0, tgt = 0;
    const int B = 1, T = 8, C = 4, Vp = 128;
    gather(dev, chunk, &inp, &tgt, B * T);
    float wte[128 * 4], wpe[8 * 4] = {0};
    for (int v = 0; v < Vp; v++) {
        for (int c = 0; c < C; c++) {
            wte[v * C + c] = (float)v;
        }
    }
    gt_dbuf wb = upload(dev, wte, sizeof wte), pb = upload(dev, wpe, sizeof wpe);
    gt_dbuf out = alloc(dev, (uint64_t)B * T * C * 4, 0);
    gt_op op = gt_op_encoder_fwd((gt_dref){out, 0}, (gt_dref){inp, 0}, (gt_dref){wb, 0},
                                 (gt_dref){pb, 0}, B, T, C, VOCAB, Vp, T);
    GT_ASSERT_OK(gt_device_launch(dev, &op));
    assert_stays(dev, out, (uint64_t)B * T * C * 4, "encoder output");
    // the trainer's own inputs stay readable: only what was computed from the chunk is held
    float back[128 * 4];
    GT_ASSERT_OK(gt_device_copy_out(dev, back, wb, 0, sizeof back));
    assert_memory_equal(back, wte, sizeof wte);
}

static void through_matmul_with_identity(void **state)
{
    gt_device *dev = open_dev(state, NULL);
    gt_dbuf chunk = holder_chunk(dev, true), inp = 0, tgt = 0;
    const int N = 16, C = 4;
    gather(dev, chunk, &inp, &tgt, N * C / 2);  // (N*C/2) int32 = N*C/2 floats' worth of bits
    float eye[4 * 4] = {0};
    for (int i = 0; i < C; i++) {
        eye[i * C + i] = 1.0f;
    }
    gt_dbuf w = upload(dev, eye, sizeof eye), out = alloc(dev, (uint64_t)N / 2 * C * 4, 0);
    gt_op op = gt_op_matmul_fwd((gt_dref){out, 0}, (gt_dref){inp, 0}, (gt_dref){w, 0},
                                (gt_dref){0, 0}, N / 2, C, C);
    GT_ASSERT_OK(gt_device_launch(dev, &op));
    assert_stays(dev, out, (uint64_t)N / 2 * C * 4, "matmul(x, I)");
}

// Gradients computed from the chunk flow into AdamW's moments and into the parameters.
static void through_adamw_moments(void **state)
{
    gt_device *dev = open_dev(state, NULL);
    gt_dbuf chunk = holder_chunk(dev, true), inp = 0, tgt = 0;
    const int N = 64;
    gather(dev, chunk, &inp, &tgt, N);
    float zeros[64] = {0};
    gt_dbuf p = upload(dev, zeros, sizeof zeros), m = upload(dev, zeros, sizeof zeros);
    gt_dbuf v = upload(dev, zeros, sizeof zeros);
    gt_op op = gt_op_adamw((gt_dref){p, 0}, (gt_dref){m, 0}, (gt_dref){v, 0}, (gt_dref){inp, 0},
                           N, 0.1f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.1f, 0.05f, 1.0f);
    GT_ASSERT_OK(gt_device_launch(dev, &op));
    assert_stays(dev, m, sizeof zeros, "AdamW m");
    assert_stays(dev, v, sizeof zeros, "AdamW v");
    assert_stays(dev, p, sizeof zeros, "parameters after the update");
}

// Labels only grow: overwriting every byte, a whole-buffer memset or adding another label
// never makes a labelled buffer readable, and alloc has no flag that could say otherwise.
static void labels_only_grow(void **state)
{
    gt_device *dev = open_dev(state, NULL);
    gt_dbuf chunk = holder_chunk(dev, true), inp = 0, tgt = 0;
    gather(dev, chunk, &inp, &tgt, 64);
    uint8_t zeros[256] = {0};
    GT_ASSERT_OK(gt_device_copy_in(dev, inp, 0, zeros, sizeof zeros));
    GT_ASSERT_OK(gt_device_memset(dev, inp, 0, 0, 256));
    assert_stays(dev, inp, 256, "overwritten by the trainer");
    GT_ASSERT_OK(gt_device_label_add(dev, inp, OTHER));
    size_t n = 0;
    uint8_t ids[4][GT_LABEL_ID_BYTES];
    GT_ASSERT_OK(gt_device_label_get(dev, inp, &n, ids, 4));
    assert_int_equal(n, 2);
    assert_stays(dev, inp, 256, "with a second label");
    for (uint32_t bit = 1; bit; bit <<= 1) {  // no flag but NO_READBACK exists
        gt_dbuf h = 0;
        if (bit != GT_DBUF_NO_READBACK) {
            GT_ASSERT_CODE(gt_device_alloc(dev, 64, bit, &h), GT_E_ARG);
        }
    }
}

static void model_after_a_step(void **state)
{
    gt_agreement *a = malloc(sizeof *a);
    agreement_make(a, 2, "");
    gt_device *dev = open_dev(state, a);
    gt_dbuf chunk = holder_chunk(dev, true);
    gt_toy t;
    gt_toy_open(dev, chunk, NTOK, &t);
    float loss = 0.0f;
    // nothing declared: not even the mean loss leaves
    gt_err e = gt_toy_step(&t, &loss);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "no outputs are declared"));
    declare(dev, a);
    GT_ASSERT_OK(gt_toy_step(&t, &loss));
    assert_true(isfinite(loss) && loss > 0.0f);
    size_t n = gt_gpt2_num_params(t.m);
    float *host = malloc(n * 4);
    memset(host, CANARY, n * 4);
    GT_ASSERT_CODE(gt_gpt2_params_read(t.m, host, n), GT_E_POLICY);
    GT_ASSERT_CODE(gt_gpt2_grads_read(t.m, host, n), GT_E_POLICY);
    for (size_t i = 0; i < n * 4; i++) {
        assert_int_equal(((uint8_t *)host)[i], CANARY);
    }
    // the per-position losses and the logits stay too (forward only: logits readable if they
    // could be; they are computed from the chunk)
    float row[128];
    GT_ASSERT_OK(gt_gpt2_forward(t.m, gt_loader_inputs(t.l), 0, 2, 8, &loss));
    GT_ASSERT_CODE(gt_gpt2_logits_read(t.m, 0, 0, row, (size_t)gt_gpt2_pad_vocab(VOCAB)),
                   GT_E_POLICY);
    assert_stays(dev, gt_gpt2_internal_params(t.m), (uint64_t)n * 4, "parameters");
    // the per-position losses (with the weights, they would give the chunk back token by token)
    gt_dref losses = {0, 0};
    GT_ASSERT_OK(gt_gpt2_forward_losses(t.m, gt_loader_inputs(t.l), gt_loader_targets(t.l), 2, 8,
                                        &losses));
    float *lv = malloc(16 * 4);
    memset(lv, CANARY, 16 * 4);
    GT_ASSERT_CODE(gt_device_copy_out(dev, lv, losses.buf, losses.offset, 16 * 4), GT_E_POLICY);
    for (int i = 0; i < 16 * 4; i++) {
        assert_int_equal(((uint8_t *)lv)[i], CANARY);
    }
    free(lv);
    // the agreement's 2 steps allow 2 loss releases: the second step's, then none
    GT_ASSERT_OK(gt_toy_step(&t, &loss));
    e = gt_toy_step(&t, &loss);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "all spent"));
    gt_device_outputs left;
    GT_ASSERT_OK(gt_device_outputs_get(dev, &left));
    assert_int_equal(left.loss_budget, 0);
    free(host);
    gt_toy_close(&t);
    free(a);
}

// Honest training is unchanged: the losses released from labelled data are bit for bit those of
// the same run on unlabelled data, where the mean loss is an ordinary op.
static void honest_losses_unchanged(void **state)
{
    gt_agreement *a = malloc(sizeof *a);
    agreement_make(a, 3, "");
    float plain[3], held[3];
    for (int labelled = 0; labelled < 2; labelled++) {
        gt_device *dev = open_dev(state, a);
        if (labelled) {
            declare(dev, a);
        }
        gt_toy t;
        gt_toy_open(dev, holder_chunk(dev, labelled), NTOK, &t);
        for (int s = 0; s < 3; s++) {
            GT_ASSERT_OK(gt_toy_step(&t, labelled ? &held[s] : &plain[s]));
        }
        gt_toy_close(&t);
        gt_test_backend_case_teardown(state);
    }
    assert_memory_equal(plain, held, sizeof plain);
    free(a);
}

// A release op lets out one scalar only as declared: not undeclared outputs, not into part of a
// buffer (the rest would be left readable), and at the declared precision whatever the trainer
// asks for.
static void release_rules(void **state)
{
    gt_agreement *a = malloc(sizeof *a);
    agreement_make(a, 4, "\"loss\":{\"mantissa_bits\":4}");
    gt_device *dev = open_dev(state, a);
    gt_dbuf chunk = holder_chunk(dev, true), inp = 0, tgt = 0;
    gather(dev, chunk, &inp, &tgt, 64);
    float wte[128];
    for (int v = 0; v < 128; v++) {
        wte[v] = 1.0f + (float)v / 1024.0f;  // many mantissa bits
    }
    gt_dbuf wb = upload(dev, wte, sizeof wte), pb = alloc(dev, 8 * 4, 0);
    gt_dbuf x = alloc(dev, 8 * 4, 0);
    gt_op enc = gt_op_encoder_fwd((gt_dref){x, 0}, (gt_dref){inp, 0}, (gt_dref){wb, 0},
                                  (gt_dref){pb, 0}, 1, 8, 1, VOCAB, 128, 8);
    GT_ASSERT_OK(gt_device_launch(dev, &enc));
    gt_dbuf big = alloc(dev, 8, 0), one = alloc(dev, 4, 0);
    gt_op rel = gt_op_loss_mean((gt_dref){big, 4}, (gt_dref){x, 0}, 1);
    gt_err e = gt_device_launch(dev, &rel);  // before the declaration
    GT_ASSERT_CODE(e, GT_E_POLICY);
    declare(dev, a);
    e = gt_device_launch(dev, &rel);  // into part of a buffer
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "whole buffer"));
    gt_dbuf s = alloc(dev, 8, 0);
    gt_op sq = gt_op_sumsq((gt_dref){s, 0}, (gt_dref){x, 0}, 8);
    GT_ASSERT_OK(gt_device_launch(dev, &sq));
    gt_op nr = gt_op_norm_release((gt_dref){one, 0}, (gt_dref){s, 0});
    e = gt_device_launch(dev, &nr);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "grad_norm is not a declared output"));
    rel = gt_op_loss_mean((gt_dref){one, 0}, (gt_dref){x, 0}, 1);
    rel.ints[1] = 23;  // the trainer asks for every bit
    GT_ASSERT_OK(gt_device_launch(dev, &rel));
    float got = 0.0f;
    GT_ASSERT_OK(gt_device_copy_out(dev, &got, one, 0, 4));
    float exact = wte[g_tokens[0]];
    assert_true(got == gt_round_mantissa(exact, 4));
    // 4 steps declared: 3 more releases, then none
    for (int i = 0; i < 3; i++) {
        GT_ASSERT_OK(gt_device_launch(dev, &rel));
    }
    GT_ASSERT_CODE(gt_device_launch(dev, &rel), GT_E_POLICY);
    free(a);
}

// The declaration itself: once per session, and on sim only the attested agreement's bytes.
static void declaration_rules(void **state)
{
    backend *b = *state;
    gt_agreement *a = malloc(sizeof *a), *other = malloc(sizeof *other);
    agreement_make(a, 2, "");
    agreement_make(other, 1000, "\"grad_norm\":true");
    gt_device *dev = open_dev(state, a);
    gt_device_outputs o;
    GT_ASSERT_CODE(gt_device_outputs_get(dev, &o), GT_E_NOTFOUND);
    if (b->kind == GT_DEVICE_SIM) {
        // a more generous agreement than the one the session was attested with: devd refuses
        gt_device_outputs lie;
        gt_agreement_device_outputs(other, &lie);
        gt_err e = gt_device_declare_outputs(dev, &lie, (gt_span){other->doc, other->doc_len});
        GT_ASSERT_CODE(e, GT_E_POLICY);
        assert_non_null(strstr(e.msg, "not the one this session was attested with"));
        // the rules devd keeps are its own reading of the bytes, whatever the client passes
        lie.loss_budget = 1000000;
        GT_ASSERT_OK(gt_device_declare_outputs(dev, &lie, (gt_span){a->doc, a->doc_len}));
        GT_ASSERT_OK(gt_device_outputs_get(dev, &o));
        assert_int_equal(o.loss_budget, 2);
        assert_false(o.grad_norm);
    } else {
        declare(dev, a);
    }
    GT_ASSERT_CODE(gt_device_declare_outputs(dev, &o, (gt_span){a->doc, a->doc_len}),
                   GT_E_STATE);
    free(a);
    free(other);
}

// The residual channel (docs/security.md): a trainer running crafted ops can still steer what a
// release lets out. This measures it with the best packing attack we know: four 6-bit tokens
// packed exactly into one float (an encoder with wte[v] = v, then a matmul by 2^18, 2^12, 2^6,
// 1), released one float at a time. Per release it recovers as many bits as the declared
// precision keeps; the bound a release can never pass is the float's sign, exponent and kept
// mantissa: bits + 9.
static void bits_per_release(void **state)
{
    static const int settings[] = {23, 12, 4};
    const int K = 16;  // releases per setting
    print_message("| loss mantissa bits | bound (bits/release) | measured (bits/release) |\n");
    for (size_t si = 0; si < sizeof settings / sizeof settings[0]; si++) {
        int bits = settings[si];
        char outputs[64];
        snprintf(outputs, sizeof outputs, "\"loss\":{\"mantissa_bits\":%d}", bits);
        gt_agreement *a = malloc(sizeof *a);
        agreement_make(a, (uint32_t)K, outputs);
        gt_device *dev = open_dev(state, a);
        declare(dev, a);
        gt_dbuf chunk = holder_chunk(dev, true), inp = 0, tgt = 0;
        gather(dev, chunk, &inp, &tgt, 4 * K);
        float wte[128], wpe[4] = {0}, pack[4] = {262144.0f, 4096.0f, 64.0f, 1.0f};
        for (int v = 0; v < 128; v++) {
            wte[v] = (float)v;
        }
        gt_dbuf wb = upload(dev, wte, sizeof wte), pb = upload(dev, wpe, sizeof wpe);
        gt_dbuf w = upload(dev, pack, sizeof pack);
        gt_dbuf e = alloc(dev, (uint64_t)K * 4 * 4, 0), x = alloc(dev, (uint64_t)K * 4, 0);
        gt_op enc = gt_op_encoder_fwd((gt_dref){e, 0}, (gt_dref){inp, 0}, (gt_dref){wb, 0},
                                      (gt_dref){pb, 0}, K, 4, 1, VOCAB, 128, 4);
        GT_ASSERT_OK(gt_device_launch(dev, &enc));
        gt_op mm = gt_op_matmul_fwd((gt_dref){x, 0}, (gt_dref){e, 0}, (gt_dref){w, 0},
                                    (gt_dref){0, 0}, K, 4, 1);
        GT_ASSERT_OK(gt_device_launch(dev, &mm));
        gt_dbuf one = alloc(dev, 4, 0);
        uint32_t worst = 0;
        for (int k = 0; k < K; k++) {
            gt_op rel = gt_op_loss_mean((gt_dref){one, 0}, (gt_dref){x, (uint64_t)k * 4}, 1);
            GT_ASSERT_OK(gt_device_launch(dev, &rel));
            float got = 0.0f;
            GT_ASSERT_OK(gt_device_copy_out(dev, &got, one, 0, 4));
            uint32_t truth = 0;
            for (int j = 0; j < 4; j++) {
                truth = truth << 6 | g_tokens[4 * k + j];
            }
            uint32_t r = (uint32_t)got, err = r > truth ? r - truth : truth - r;
            worst = err > worst ? err : worst;
        }
        int lost = 0;
        while (lost < 24 && (1u << lost) <= worst) {
            lost++;
        }
        int measured = 24 - lost;
        print_message("| %d | %d | %d |\n", bits, bits + 9, measured);
        assert_true(measured <= bits + 9);  // never past the bound
        assert_true(measured >= (bits < 23 ? bits : 24));  // and the attack gets near it
        gt_test_backend_case_teardown(state);
        free(a);
    }
}

// The toy's step program for opt (*prog), an agreement pinning its hash (*a), a device that
// declared it, a labelled chunk (*chunk) and the toy on it (*t): no program given to the device yet.
static gt_device *pinned_toy(void **state, const gt_adamw *opt, gt_buf *prog, gt_agreement **a,
                             gt_dbuf *chunk, gt_toy *t)
{
    gt_gpt2_config c = {.max_seq_len = 8, .vocab_size = VOCAB,
                        .padded_vocab_size = gt_gpt2_pad_vocab(VOCAB), .num_layers = 1,
                        .num_heads = 2, .channels = 16};
    *prog = (gt_buf){0};
    GT_ASSERT_OK(gt_gpt2_program(&c, 2, 8, opt, prog));
    uint8_t hash[GT_SHA256_BYTES];
    GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, hash, prog->data, prog->len));
    char hex[2 * GT_SHA256_BYTES + 1];
    gt_hex_encode(hex, sizeof hex, hash, sizeof hash);
    *a = malloc(sizeof **a);
    agreement_make_pinned(*a, 4, "", hex);
    gt_device *dev = open_dev(state, *a);
    declare(dev, *a);
    *chunk = holder_chunk(dev, true);
    gt_toy_open(dev, *chunk, NTOK, t);
    return dev;
}

// A pinned program (training.program): the device runs only the agreement's step on labelled
// data, op by op, and only the program whose hash the agreement names.
static void pinned_program(void **state)
{
    gt_buf prog;
    gt_agreement *a = NULL;
    gt_dbuf chunk = 0;
    gt_toy t;
    gt_device *dev = pinned_toy(state, &gt_toy_opt, &prog, &a, &chunk, &t);
    float loss = 0.0f;
    gt_err e = gt_toy_step(&t, &loss);  // pinned, but not given yet
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "none has been given"));
    prog.data[prog.len - 1] ^= 1;  // another program (a shape changed)
    e = gt_device_pin_program(dev, gt_buf_span(&prog));
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "not the one the agreement pins"));
    prog.data[prog.len - 1] ^= 1;
    GT_ASSERT_OK(gt_device_pin_program(dev, gt_buf_span(&prog)));
    GT_ASSERT_CODE(gt_device_pin_program(dev, gt_buf_span(&prog)), GT_E_STATE);
    GT_ASSERT_OK(gt_toy_step(&t, &loss));  // the honest step is the program
    GT_ASSERT_OK(gt_toy_step(&t, &loss));
    // an op the step does not have, at this point of the step: a gather of another size
    gt_dbuf inp = alloc(dev, 64 * 4, 0), tgt = alloc(dev, 64 * 4, 0);
    gt_op g = gt_op_tokens_gather((gt_dref){inp, 0}, (gt_dref){tgt, 0}, (gt_dref){chunk, 0}, 64,
                                  0, VOCAB);
    e = gt_device_launch(dev, &g);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "outside the pinned program"));
    // the program's own first op is fine; its second where the first belongs is not
    g.ints[0] = 16;
    GT_ASSERT_OK(gt_device_launch(dev, &g));
    e = gt_device_launch(dev, &g);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "encoder_forward"));
    gt_buf_free_nowipe(&prog);
    gt_toy_close(&t);
    free(a);
}

// The device pinned to the program of `pinned`'s schedule runs that step, twice, and refuses
// the step of `other` at its first op out of place: the in-backward step's first adamw (of
// lnfw, 16 floats), where the standard step has the last layer's fcproj backward.
static void pinned_schedule(void **state, const gt_adamw *pinned, const gt_adamw *other)
{
    gt_buf prog;
    gt_agreement *a = NULL;
    gt_dbuf chunk = 0;
    gt_toy t;
    gt_device *dev = pinned_toy(state, pinned, &prog, &a, &chunk, &t);
    GT_ASSERT_OK(gt_device_pin_program(dev, gt_buf_span(&prog)));
    float loss = 0.0f;
    GT_ASSERT_OK(gt_toy_step_with(&t, pinned, &loss));
    GT_ASSERT_OK(gt_toy_step_with(&t, pinned, &loss));
    gt_err e = gt_toy_step_with(&t, other, &loss);
    GT_ASSERT_CODE(e, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "outside the pinned program"));
    assert_non_null(strstr(e.msg, "adamw(N=16)"));
    gt_buf_free_nowipe(&prog);
    gt_toy_close(&t);
    free(a);
}

// gt_gpt2_program with update_in_backward records the step gt_gpt2_step_in_backward launches.
static void pinned_program_in_backward(void **state)
{
    gt_adamw ib = gt_toy_opt_unclipped;
    ib.update_in_backward = true;
    pinned_schedule(state, &ib, &gt_toy_opt_unclipped);
}

// ... and the standard schedule's program refuses it.
static void pinned_program_refuses_in_backward(void **state)
{
    gt_adamw ib = gt_toy_opt_unclipped;
    ib.update_in_backward = true;
    pinned_schedule(state, &gt_toy_opt_unclipped, &ib);
}

int main(void)
{
    static const char *const devd_args[] = {"--mem-limit", "64MiB", "--threads", "1", NULL};
    gt_test_backend_devd_args = devd_args;
    const struct CMUnitTest cases[] = {
        cmocka_unit_test_teardown(direct_copy_out, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(through_gather, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(through_encoder_with_chosen_wte, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(through_matmul_with_identity, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(through_adamw_moments, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(labels_only_grow, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(model_after_a_step, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(honest_losses_unchanged, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(release_rules, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(declaration_rules, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(bits_per_release, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(pinned_program, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(pinned_program_in_backward, gt_test_backend_case_teardown),
        cmocka_unit_test_teardown(pinned_program_refuses_in_backward,
                                  gt_test_backend_case_teardown),
    };
    int rc = cmocka_run_group_tests_name("cpu", cases, gt_test_backend_setup_cpu,
                                       gt_test_backend_teardown);
    rc |= cmocka_run_group_tests_name("sim", cases, gt_test_backend_setup_sim,
                                        gt_test_backend_teardown);
#ifdef GT_HAVE_CUDA
    rc |= cmocka_run_group_tests_name("cuda", cases, gt_test_backend_setup_cuda,
                                        gt_test_backend_teardown);
#endif
    return rc;
}
