// attest/adapters.c: thin adapters from the format verifiers (intel_quote.h, snp_report.h,
// nvgpu_evidence.h) to the framework's gt_attest_check. Each: parse, fill claims, build the trust
// inputs from the caller's files (roots trusted; --cert files only build the path), verify, and
// sort the verifier's reasons into "not authentic" (INVALID) and "authentic but refused"
// (REJECTED: Intel TCB level unsupported or revoked).
#include "attest_internal.h"

#include "intel_quote.h"
#include "nvgpu_evidence.h"
#include "snp_report.h"

#include <stdlib.h>
#include <string.h>

// ---- certificates from the caller's files ----------------------------------------------------------

typedef struct {
    gt_x509 **v;
    size_t n;
} certvec;

static void certvec_free(certvec *cv)
{
    for (size_t i = 0; i < cv->n; i++) {
        gt_x509_free(cv->v[i]);
    }
    free(cv->v);
    cv->v = NULL;
    cv->n = 0;
}

static gt_err certvec_push(certvec *cv, gt_x509 *c)
{
    gt_x509 **v = realloc(cv->v, (cv->n + 1) * sizeof *v);
    if (v == NULL) {
        gt_x509_free(c);
        return gt_errf(GT_E_NOMEM, "certificates: out of memory");
    }
    cv->v = v;
    cv->v[cv->n++] = c;
    return GT_OK;
}

static const char *file_name(const gt_attest_file *f)
{
    return f->path != NULL ? f->path : "(memory)";
}

// Adds every certificate of f (a PEM bundle or one DER certificate). A file that holds none is a
// reason in `bad` (the appraisal becomes INVALID), not an error.
static gt_err certvec_add_file(certvec *cv, const gt_attest_file *f, const char *what,
                               gt_strlist *bad)
{
    bool pem = memmem(f->data.data, f->data.len, "-----BEGIN", 10) != NULL;
    if (pem) {
        gt_x509 **certs = NULL;
        size_t n = 0;
        gt_err e = gt_x509_parse_pem_all(&certs, &n, (const char *)f->data.data, f->data.len);
        if (!gt_is_ok(e) || n == 0) {
            for (size_t i = 0; i < n; i++) {
                gt_x509_free(certs[i]);
            }
            free(certs);
            return gt_strlist_addf(bad, "%s %s: no certificate (%s)", what, file_name(f),
                                   gt_is_ok(e) ? "empty" : e.msg);
        }
        gt_err err = GT_OK;
        for (size_t i = 0; i < n; i++) {
            if (gt_is_ok(err)) {
                err = certvec_push(cv, certs[i]);
            } else {
                gt_x509_free(certs[i]);
            }
        }
        free(certs);
        return err;
    }
    gt_x509 *c = NULL;
    gt_err e = gt_x509_parse_der(&c, f->data.data, f->data.len);
    if (!gt_is_ok(e)) {
        return gt_strlist_addf(bad, "%s %s: not a certificate (%s)", what, file_name(f), e.msg);
    }
    return certvec_push(cv, c);
}

static gt_err certvec_add_files(certvec *cv, const gt_attest_file *files, size_t n,
                                const char *what, gt_strlist *bad)
{
    for (size_t i = 0; i < n; i++) {
        GT_TRY(certvec_add_file(cv, &files[i], what, bad));
    }
    return GT_OK;
}

// ---- Intel TDX / SGX -----------------------------------------------------------------------------

// Collateral kind from a "kind:" prefix of the path, else from the content.
static gt_err intel_coll_kind(const gt_attest_file *f, gt_intel_coll_kind *kind, gt_strlist *bad)
{
    static const struct {
        const char *prefix;
        gt_intel_coll_kind kind;
    } prefixes[] = {
        {"tcb-info:", GT_INTEL_COLL_TCB_INFO},
        {"qe-identity:", GT_INTEL_COLL_QE_IDENTITY},
        {"tcb-signing-chain:", GT_INTEL_COLL_TCB_SIGNING_CHAIN},
        {"pck-crl:", GT_INTEL_COLL_PCK_CRL},
        {"root-ca-crl:", GT_INTEL_COLL_ROOT_CA_CRL},
        {"dcap-qvl:", GT_INTEL_COLL_DCAP_QVL_JSON},
    };
    const char *path = file_name(f);
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        if (strncmp(path, prefixes[i].prefix, strlen(prefixes[i].prefix)) == 0) {
            *kind = prefixes[i].kind;
            return GT_OK;
        }
    }
    const uint8_t *d = f->data.data;
    size_t n = f->data.len, i = 0;
    while (i < n && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t')) {
        i++;
    }
    if (i < n && d[i] == '{') {
        if (memmem(d, n, "\"tcb_info_issuer_chain\"", 23) != NULL ||
            memmem(d, n, "\"qe_identity_issuer_chain\"", 26) != NULL) {
            *kind = GT_INTEL_COLL_DCAP_QVL_JSON;
        } else if (memmem(d, n, "\"tcbInfo\"", 9) != NULL) {
            *kind = GT_INTEL_COLL_TCB_INFO;
        } else if (memmem(d, n, "\"enclaveIdentity\"", 17) != NULL) {
            *kind = GT_INTEL_COLL_QE_IDENTITY;
        } else {
            GT_TRY(gt_strlist_addf(bad, "collateral %s: JSON that is neither TCB info, QE identity "
                                        "nor dcap-qvl collateral",
                                   path));
            return gt_errf(GT_E_NOTFOUND, "unknown collateral");
        }
        return GT_OK;
    }
    if (memmem(d, n, "BEGIN CERTIFICATE", 17) != NULL) {
        *kind = GT_INTEL_COLL_TCB_SIGNING_CHAIN;
        return GT_OK;
    }
    bool pem_crl = memmem(d, n, "BEGIN X509 CRL", 14) != NULL;
    if (pem_crl || (n > 0 && d[0] == 0x30)) {
        // The issuer name is in clear in a DER CRL; for PEM, the file name decides.
        bool root = pem_crl ? strstr(path, "root") != NULL
                            : memmem(d, n, "Intel SGX Root CA", 17) != NULL;
        *kind = root ? GT_INTEL_COLL_ROOT_CA_CRL : GT_INTEL_COLL_PCK_CRL;
        return GT_OK;
    }
    GT_TRY(gt_strlist_addf(bad, "collateral %s: unrecognised (use KIND:FILE with tcb-info, "
                                "qe-identity, tcb-signing-chain, pck-crl, root-ca-crl, dcap-qvl)",
                           path));
    return gt_errf(GT_E_NOTFOUND, "unknown collateral");
}

// Reasons that mean "authentic, but Intel's TCB evaluation refuses it" (REJECTED, not INVALID).
static bool intel_tcb_refusal(const char *reason)
{
    return strstr(reason, "(TCB not supported)") != NULL ||
           strstr(reason, "TCB status Revoked") != NULL;
}

gt_err gt_attest_verify_intel(gt_attest_check *c, const gt_evidence *ev, const gt_attest_ctx *ctx)
{
    const char *name = gt_tee_type_name(ev->type);
    gt_intel_quote q;
    gt_err perr = gt_intel_quote_parse(&q, ev->body.data, ev->body.len);
    if (!gt_is_ok(perr)) {
        return gt_strlist_addf(&c->invalid, "%s quote: %s", name, perr.msg);
    }
    if (gt_intel_quote_is_tdx(&q) != (ev->type == GT_TEE_TDX)) {
        return gt_strlist_addf(&c->invalid, "%s quote: the quote is a%s", name,
                               gt_intel_quote_is_tdx(&q) ? " tdx quote" : "n sgx quote");
    }
    c->parsed = true;
    c->version = q.header.version;
    GT_TRY(gt_intel_quote_claims_json(&q, c->claims));

    const gt_appraise_params *p = ctx->p;
    certvec roots = {0};
    gt_intel_collateral coll = {0};
    gt_intel_verdict *v = calloc(1, sizeof *v);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, v != NULL, out, GT_E_NOMEM, "intel: out of memory");
    GT_TRY_GOTO(err, certvec_add_files(&roots, p->roots, p->root_count, "root", &c->invalid), out);
    if (roots.n == 0) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "%s: no trusted root given (--root: the "
                                                      "Intel SGX Root CA)",
                                         name),
                    out);
    }
    for (size_t i = 0; i < p->collateral_count; i++) {
        gt_intel_coll_kind kind = GT_INTEL_COLL_TCB_INFO;
        gt_err kerr = intel_coll_kind(&p->collateral[i], &kind, &c->invalid);
        if (kerr.code == GT_E_NOMEM) {
            err = kerr;
            goto out;
        }
        if (!gt_is_ok(kerr)) {
            continue;  // the reason is already listed
        }
        gt_err aerr = gt_intel_collateral_add(&coll, kind, p->collateral[i].data.data,
                                              p->collateral[i].data.len);
        if (!gt_is_ok(aerr)) {
            GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "collateral %s: %s",
                                             file_name(&p->collateral[i]), aerr.msg),
                        out);
        }
    }
    gt_intel_verify_params vp = {
        .roots = (const gt_x509 *const *)roots.v,
        .root_count = roots.n,
        .at = ctx->at,
        .collateral = p->collateral_count > 0 ? &coll : NULL,
    };
    gt_err verr = gt_intel_quote_verify(&q, &vp, v);
    if (verr.code != GT_E_NONE && verr.code != GT_E_AUTH) {
        err = verr;
        goto out;
    }
    c->signature_valid = v->signature_valid;
    c->chain_valid = v->chain_valid;
    snprintf(c->tcb_status, sizeof c->tcb_status, "%s", v->tcb_status ? v->tcb_status : "");
    size_t stored = v->reason_count < GT_INTEL_MAX_REASONS ? v->reason_count : GT_INTEL_MAX_REASONS;
    bool authentic = v->signature_valid && v->chain_valid && v->pck_ext_valid;
    for (size_t i = 0; i < stored; i++) {
        bool refusal = authentic && intel_tcb_refusal(v->reasons[i]);
        GT_TRY_GOTO(err, gt_strlist_addf(refusal ? &c->rejected : &c->invalid, "%s: %s", name,
                                         v->reasons[i]),
                    out);
    }
    if (v->reason_count > stored) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "%s: %zu more reasons", name,
                                         v->reason_count - stored),
                    out);
    }
    if (v->advisory_count > 0) {
        char list[256] = "";
        for (size_t i = 0; i < v->advisory_count; i++) {
            strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
            strncat(list, v->advisories[i], sizeof list - strlen(list) - 1);
        }
        GT_TRY_GOTO(err, gt_strlist_addf(&c->warnings, "%s: TCB %s, advisories: %s", name,
                                         c->tcb_status[0] ? c->tcb_status : "n/a", list),
                    out);
    }
    if (v->pck_ext_valid) {
        GT_TRY_GOTO(err, gt_claims_add_hex(c->claims, "fmspc", v->pck.fmspc, sizeof v->pck.fmspc),
                    out);
    }
out:
    free(v);
    gt_intel_collateral_free(&coll);
    certvec_free(&roots);
    return err;
}

// ---- AMD SEV-SNP ---------------------------------------------------------------------------------

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
static gt_err snp_cert_table(const gt_buf *aux, certvec *vek, certvec *inter, gt_strlist *bad)
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
        GT_TRY(certvec_push(is_vek ? vek : inter, c));
    }
    return gt_strlist_addf(bad, "snp certificate table: more than %d entries", SNP_CERT_TABLE_MAX);
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
    certvec roots = {0}, chain = {0}, vek = {0}, table = {0};
    const gt_x509 **inter = NULL;
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, certvec_add_files(&roots, p->roots, p->root_count, "root", &c->invalid), out);
    GT_TRY_GOTO(err, certvec_add_files(&chain, p->certs, p->cert_count, "cert", &c->invalid), out);
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
    const certvec *parts[4] = {&chain, &vek, &table, &roots};
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
    c->signature_valid = v.signature_valid;
    c->chain_valid = v.chain_valid;
    size_t stored = v.reason_count < GT_SNP_MAX_REASONS ? v.reason_count : GT_SNP_MAX_REASONS;
    for (size_t i = 0; i < stored; i++) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "snp: %s", v.reasons[i]), out);
    }
    if (v.reason_count > stored) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "snp: %zu more reasons",
                                         v.reason_count - stored),
                    out);
    }
out:
    free(inter);
    certvec_free(&roots);
    certvec_free(&chain);
    certvec_free(&vek);
    certvec_free(&table);
    return err;
}

// ---- NVIDIA GPU (SPDM) ---------------------------------------------------------------------------

gt_err gt_attest_verify_nvgpu(gt_attest_check *c, const gt_evidence *ev, const gt_attest_ctx *ctx)
{
    gt_nvgpu_evidence *e = calloc(1, sizeof *e);
    GT_ENSURE(e != NULL, GT_E_NOMEM, "nvgpu: out of memory");
    certvec roots = {0}, chain = {0};
    const gt_x509 **inter = NULL;
    gt_err err = GT_OK;
    gt_err perr = gt_nvgpu_evidence_parse(e, ev->body.data, ev->body.len);
    if (!gt_is_ok(perr)) {
        err = gt_strlist_addf(&c->invalid, "nvgpu evidence: %s", perr.msg);
        goto out;
    }
    c->parsed = true;
    c->version = e->req_version;
    GT_TRY_GOTO(err, gt_nvgpu_evidence_claims_json(e, c->claims), out);
    gt_span fwid = {0};
    if (gt_is_ok(gt_nvgpu_opaque_find(e, GT_NVGPU_OPAQUE_FWID, &fwid)) && fwid.len <= 64) {
        GT_TRY_GOTO(err, gt_claims_add_hex(c->claims, "fwid", fwid.data, fwid.len), out);
    }

    const gt_appraise_params *p = ctx->p;
    GT_TRY_GOTO(err, certvec_add_files(&roots, p->roots, p->root_count, "root", &c->invalid), out);
    GT_TRY_GOTO(err, certvec_add_files(&chain, p->certs, p->cert_count, "cert", &c->invalid), out);
    if (chain.n == 0) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "nvgpu: no GPU certificate chain given "
                                                      "(--cert, leaf first)"),
                    out);
        goto out;
    }
    size_t inter_n = chain.n - 1 + roots.n;
    inter = calloc(inter_n ? inter_n : 1, sizeof *inter);
    GT_ENSURE_GOTO(err, inter != NULL, out, GT_E_NOMEM, "nvgpu: out of memory");
    for (size_t i = 1; i < chain.n; i++) {
        inter[i - 1] = chain.v[i];
    }
    for (size_t i = 0; i < roots.n; i++) {
        inter[chain.n - 1 + i] = roots.v[i];
    }
    // Freshness (the request nonce) is checked by the framework's binding rules, so that a
    // stale nonce is REJECTED rather than INVALID.
    gt_nvgpu_verify_params vp = {
        .leaf = chain.v[0],
        .intermediates = inter,
        .intermediate_count = inter_n,
        .roots = (const gt_x509 *const *)roots.v,
        .root_count = roots.n,
        .at = ctx->at,
    };
    gt_nvgpu_verdict v;
    GT_TRY_GOTO(err, gt_nvgpu_evidence_verify(&v, e, &vp), out);
    c->signature_valid = v.signature_valid;
    c->chain_valid = v.chain_valid;
    size_t stored = v.reason_count < GT_NVGPU_MAX_REASONS ? v.reason_count : GT_NVGPU_MAX_REASONS;
    for (size_t i = 0; i < stored; i++) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "nvgpu: %s", v.reasons[i]), out);
    }
    if (v.reason_count > stored) {
        GT_TRY_GOTO(err, gt_strlist_addf(&c->invalid, "nvgpu: %zu more reasons",
                                         v.reason_count - stored),
                    out);
    }
out:
    free(inter);
    certvec_free(&roots);
    certvec_free(&chain);
    free(e);
    return err;
}
