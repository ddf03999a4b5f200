// One layout for every agreement the CLI writes: a section a line, a holder a line or two, so
// that parties comparing their copies by eye (or diff) see the same thing.
#include "agreement_doc.h"

#include <gputravel/enclave.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static gt_err put(gt_buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static gt_err put(gt_buf *out, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    GT_ENSURE(n >= 0 && (size_t)n < sizeof line, GT_E_LIMIT, "agreement: a line too long");
    return gt_buf_append(out, line, (size_t)n);
}

static bool json_safe(const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) {
            return false;
        }
    }
    return true;
}

static gt_err put_measurements(gt_buf *out, const char *section, const gt_measurement_list *l,
                               uint32_t ranks)
{
    GT_TRY(put(out, "  \"%s\": {", section));
    if (l->count > 0) {
        GT_TRY(put(out, "\"accepted_measurements\": ["));
        for (uint32_t i = 0; i < l->count; i++) {
            char hex[2 * GT_MEASUREMENT_BYTES + 1];
            gt_hex_encode(hex, sizeof hex, l->values[i], GT_MEASUREMENT_BYTES);
            GT_TRY(put(out, "%s\"%s\"", i ? ", " : "", hex));
        }
        GT_TRY(put(out, "]"));
    }
    if (ranks > 1) {
        GT_TRY(put(out, "%s\"ranks\": %u", l->count > 0 ? ", " : "", ranks));
    }
    return put(out, "},\n");
}

// holders[i].enclave, when the holder is named by enclave (every member written explicitly).
static gt_err put_enclave(gt_buf *out, const gt_agreement_enclave *e)
{
    if (!e->present) {
        return GT_OK;
    }
    char hex[2 * 32 + 1];
    GT_TRY(put(out, ",\n     \"enclave\": {"));
    const char *sep = "";
    if (e->has_mrsigner) {
        gt_hex_encode(hex, sizeof hex, e->mrsigner, 32);
        GT_TRY(put(out, "\"mrsigner\": \"%s\"", hex));
        sep = ", ";
    }
    if (e->has_mrenclave) {
        gt_hex_encode(hex, sizeof hex, e->mrenclave, 32);
        GT_TRY(put(out, "%s\"mrenclave\": \"%s\"", sep, hex));
    }
    if (e->has_isvprodid) {
        GT_TRY(put(out, ", \"isvprodid\": %u", e->isvprodid));
    }
    return put(out, ", \"min_isvsvn\": %u, \"debug\": %s}", e->min_isvsvn,
               e->debug ? "true" : "false");
}

gt_err gt_cli_agreement_enclave_from_sig(const char *path, bool with_mrenclave,
                                         gt_agreement_enclave *out)
{
    memset(out, 0, sizeof *out);
    gt_buf data = {0};
    GT_TRY(gt_file_read_all(path, GT_ENCLAVE_IMAGE_MAX_BYTES, &data));
    gt_sgx_sigstruct sig;
    gt_sgx_sigstruct_checks checks;
    size_t offset = 0;
    gt_err err = gt_err_wrap(gt_sgx_sigstruct_find(data.data, data.len, &sig, &offset), "%s",
                             path);
    gt_buf_free_nowipe(&data);
    GT_TRY(err);
    GT_TRY(gt_sgx_sigstruct_verify(&sig, &checks));
    GT_ENSURE(checks.all_ok, GT_E_AUTH, "%s: the SIGSTRUCT does not verify (its signature, q1/q2 "
              "or header): no identity is taken from it", path);
    out->present = true;
    out->has_mrsigner = true;
    memcpy(out->mrsigner, checks.mrsigner, 32);
    out->has_mrenclave = with_mrenclave;
    if (with_mrenclave) {
        memcpy(out->mrenclave, sig.enclavehash, 32);
    }
    out->has_isvprodid = true;
    out->isvprodid = sig.isvprodid;
    out->min_isvsvn = sig.isvsvn;
    return GT_OK;
}

gt_err gt_cli_agreement_format(const gt_cli_agreement_spec *s, gt_buf *out)
{
    out->len = 0;
    GT_ENSURE(json_safe(s->name), GT_E_ARG, "agreement name '%s': not a plain name", s->name);
    GT_TRY(put(out, "{\n  \"version\": 1,\n  \"name\": \"%s\",\n", s->name));
    GT_TRY(put(out, "  \"model\": {\"layers\": %u, \"channels\": %u, \"heads\": %u, \"vocab\": %u, "
                    "\"max_seq\": %u, \"init_seed\": %llu},\n",
               s->layers, s->channels, s->heads, s->vocab, s->max_seq,
               (unsigned long long)s->init_seed));
    GT_TRY(put(out, "  \"training\": {\"steps\": %u, \"batch\": %u, \"seq\": %u, "
                    "\"learning_rate\": %.9g},\n",
               s->steps, s->batch, s->seq, s->learning_rate));
    GT_TRY(put(out, "  \"holders\": ["));
    for (uint32_t i = 0; i < s->holder_count; i++) {
        const gt_cli_agreement_holder *h = &s->holders[i];
        GT_ENSURE(json_safe(h->name) && json_safe(h->endpoint), GT_E_ARG,
                  "holder '%s': name and endpoint must be plain text", h->name);
        char key[2 * GT_ED25519_PUBLIC_BYTES + 1], id[2 * GT_DATASET_ID_BYTES + 1];
        gt_hex_encode(key, sizeof key, h->identity_key, sizeof h->identity_key);
        gt_hex_encode(id, sizeof id, h->dataset_id, sizeof h->dataset_id);
        GT_TRY(put(out, "%s\n    {\"name\": \"%s\", \"identity_key\": \"%s\", \"endpoint\": \"%s\", "
                        "\"dataset_id\": \"%s\", \"token_budget\": %llu, "
                        "\"max_uses_per_chunk\": %u",
                   i ? "," : "", h->name, key, h->endpoint, id,
                   (unsigned long long)h->token_budget, h->max_uses_per_chunk));
        if (h->has_recipient_key) {
            char rkey[2 * GT_X25519_BYTES + 1];
            gt_hex_encode(rkey, sizeof rkey, h->recipient_key, sizeof h->recipient_key);
            GT_TRY(put(out, ",\n     \"recipient_key\": \"%s\"", rkey));
        }
        GT_TRY(put_enclave(out, &h->enclave));
        GT_TRY(put(out, "}"));
    }
    GT_TRY(put(out, "\n  ],\n"));
    GT_TRY(put_measurements(out, "trainer", &s->trainer, s->ranks));
    GT_TRY(put_measurements(out, "device", &s->device, 0));
    GT_TRY(put(out, "  \"allow_simulation\": %s,\n", s->allow_simulation ? "true" : "false"));
    if (s->transfers != 0) {
        GT_TRY(put(out, "  \"transfer\": ["));
        bool first = true;
        for (int m = 0; m < GT_TRANSFER_MODE_COUNT; m++) {
            if (s->transfers & GT_TRANSFER_BIT(m)) {
                GT_TRY(put(out, "%s\"%s\"", first ? "" : ", ",
                           gt_transfer_mode_name((gt_transfer_mode)m)));
                first = false;
            }
        }
        GT_TRY(put(out, "],\n"));
    }
    if (!s->sealed_checkpoint) {
        return put(out, "  \"output\": {\"kind\": \"loss_only\"}\n}\n");
    }
    GT_TRY(put(out, "  \"output\": {\"kind\": \"sealed_checkpoint\", \"recipients\": ["));
    for (uint32_t i = 0; i < s->recipient_count; i++) {
        GT_ENSURE(json_safe(s->recipients[i]), GT_E_ARG, "recipient: not a plain name");
        GT_TRY(put(out, "%s\"%s\"", i ? ", " : "", s->recipients[i]));
    }
    return put(out, "]}\n}\n");
}
