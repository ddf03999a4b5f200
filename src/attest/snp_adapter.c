// attest/snp_adapter.c: AMD SEV-SNP reports (snp_report.h) as a gt_attest_check: the VEK from
// --cert or the report's certificate table, the path to a caller root (a table ARK is never
// trusted), verify; every reason is INVALID.
#include "chain.h"
#include "verify.h"

#include "snp_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The certificate table a guest gets with its report (configfs-tsm auxblob, SNP_GET_EXT_REPORT;
// GHCB spec "SNP Extended Guest Request"): entries {GUID[16], offset u32le, length u32le}, ended
// by an all-zero entry; offsets count from the table start; each certificate is DER.
#define SNP_CERT_TABLE_MAX 32
static const uint8_t guid_vcek[16] = {0x63, 0xda, 0x75, 0x8d, 0xe6, 0x64, 0x45, 0x64,
                                      0xad, 0xc5, 0xf4, 0xb9, 0x3b, 0xe8, 0xac, 0xcd};
static const uint8_t guid_vlek[16] = {0xa8, 0x07, 0x4b, 0xc2, 0xa2, 0x5a, 0x48, 0x3e,
                                      0xaa, 0xe6, 0x39, 0xc0, 0x45, 0xa0, 0xb8, 0xa1};

// Adds the VCEK/VLEK of the table to vek and every other certificate (ASK, ASVK, ARK) to inter:
// a table ARK is only a path element, never trusted (trust comes from --root).
static gt_err snp_cert_table(const gt_buf *aux, gt_certvec *vek, gt_certvec *inter,
                             gt_strlist *bad)
{
    gt_reader r = gt_reader_init(aux->data, aux->len);
    for (int i = 0; i < SNP_CERT_TABLE_MAX; i++) {
        uint8_t guid[16] = {0};
        uint32_t off = 0, len = 0;
        gt_err e = gt_reader_bytes(&r, guid, sizeof guid);
        if (gt_is_ok(e)) {
            e = gt_reader_u32le(&r, &off);
        }
        if (gt_is_ok(e)) {
            e = gt_reader_u32le(&r, &len);
        }
        if (!gt_is_ok(e)) {
            return gt_strlist_addf(bad, "snp certificate table: %s", e.msg);
        }
        static const uint8_t zero[16];
        if (memcmp(guid, zero, sizeof zero) == 0) {
            return GT_OK;
        }
        gt_reader body = gt_reader_init(aux->data, aux->len);
        gt_span der = {0};
        e = gt_reader_skip(&body, off);
        if (gt_is_ok(e)) {
            e = gt_reader_span(&body, len, &der);
        }
        if (!gt_is_ok(e)) {
            return gt_strlist_addf(bad, "snp certificate table: entry %d: %s", i, e.msg);
        }
        gt_x509 *c = NULL;
        e = gt_x509_parse_der(&c, der.data, der.len);
        if (!gt_is_ok(e)) {
            return gt_strlist_addf(bad, "snp certificate table: entry %d: %s", i, e.msg);
        }
        bool is_vek = memcmp(guid, guid_vcek, 16) == 0 || memcmp(guid, guid_vlek, 16) == 0;
        GT_TRY(gt_certvec_push(is_vek ? vek : inter, c));
    }
    return gt_strlist_addf(bad, "snp certificate table: more than %d entries", SNP_CERT_TABLE_MAX);
}

// The verdict into the check: validity, and every reason (each makes the evidence invalid).
static gt_err snp_verdict_report(gt_attest_check *c, const gt_snp_verdict *v)
{
    c->signature_valid = v->signature_valid;
    c->chain_valid = v->chain_valid;
    size_t stored = v->reason_count < GT_SNP_MAX_REASONS ? v->reason_count : GT_SNP_MAX_REASONS;
    for (size_t i = 0; i < stored; i++) {
        GT_TRY(gt_strlist_addf(&c->invalid, "snp: %s", v->reasons[i]));
    }
    if (v->reason_count > stored) {
        GT_TRY(gt_strlist_addf(&c->invalid, "snp: %zu more reasons", v->reason_count - stored));
    }
    return GT_OK;
}

gt_err gt_attest_verify_snp(gt_attest_check *c, const gt_evidence *ev, const gt_attest_ctx *ctx)
{
    gt_snp_report rep;
    gt_err perr = gt_snp_report_parse(&rep, ev->body.data, ev->body.len);
    if (!gt_is_ok(perr)) {
        return gt_strlist_addf(&c->invalid, "snp report: %s", perr.msg);
    }
    c->parsed = true;
    c->version = rep.version;
    GT_TRY(gt_snp_report_claims_json(&rep, c->claims));
    GT_ENSURE(cJSON_AddBoolToObject(c->claims, "debug", gt_snp_report_debug_allowed(&rep)) != NULL,
              GT_E_NOMEM, "snp claims: out of memory");

    const gt_appraise_params *p = ctx->p;
    gt_certvec roots = {0}, chain = {0}, vek = {0}, table = {0};
    const gt_x509 **inter = NULL;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_certvec_add_files(&roots, p->roots, p->root_count, "root", &c->invalid),
                out);
    GT_TRY_GOTO(err, gt_certvec_add_files(&chain, p->certs, p->cert_count, "cert", &c->invalid),
                out);
    if (ev->aux.len > 0) {
        // Evidence collected with its certificate table (configfs-tsm auxblob).
        GT_TRY_GOTO(err, snp_cert_table(&ev->aux, &vek, &table, &c->invalid), out);
    }
    // The VEK: the first --cert certificate, else the table's VCEK/VLEK.
    const gt_x509 *leaf = chain.n > 0 ? chain.v[0] : vek.n > 0 ? vek.v[0] : NULL;
    if (leaf == NULL) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "snp: no VCEK/VLEK certificate given "
                                                      "(--cert, or the evidence's certificate "
                                                      "table)"),
                    out);
        goto out;
    }
    if (roots.n == 0) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "snp: no trusted root given (--root: the "
                                                      "AMD ARK, or the ASK/ARK chain file)"),
                    out);
    }
    // The path: every other certificate, including the root files' own (an ASK in the
    // ask_ark.pem file given as root is an intermediate; only a self-signed ARK anchors).
    const gt_certvec *parts[4] = {&chain, &vek, &table, &roots};
    size_t inter_n = 0;
    inter = calloc(chain.n + vek.n + table.n + roots.n, sizeof *inter);
    GT_ENSURE_GOTO(err, inter != NULL, out, GT_E_NOMEM, "snp: out of memory");
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < parts[k]->n; i++) {
            if (parts[k]->v[i] != leaf) {
                inter[inter_n++] = parts[k]->v[i];
            }
        }
    }
    gt_snp_verify_params vp = {
        .vek = leaf,
        .intermediates = inter,
        .intermediate_count = inter_n,
        .roots = (const gt_x509 *const *)roots.v,
        .root_count = roots.n,
        .at = ctx->at,
    };
    gt_snp_verdict v;
    err = gt_snp_report_verify(&v, &rep, &vp);
    if (!gt_is_ok(err)) {
        goto out;
    }
    err = snp_verdict_report(c, &v);
out:
    free(inter);
    gt_certvec_free(&roots);
    gt_certvec_free(&chain);
    gt_certvec_free(&vek);
    gt_certvec_free(&table);
    return err;
}
