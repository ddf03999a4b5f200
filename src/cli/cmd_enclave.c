// gputravel enclave measure|inspect|sign|check: SGX enclave identity (docs/enclave.md).
#include "cli.h"

#include <gputravel/enclave.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gputravel enclave measure IMAGE [--format auto|sgxs|signed-so|flat]\n"
            "                                 [--ssaframesize N] [--size BYTES] [--json]\n"
            "       gputravel enclave inspect FILE [--json]\n"
            "       gputravel enclave sign --key SIGNER.pem IMAGE --out ENCLAVE.sig\n"
            "                                 [--debug] [--isvprodid N] [--isvsvn N]\n"
            "                                 [--attributes HEX32] [--attributemask HEX32]\n"
            "                                 [--miscselect N] [--miscmask N] [--date YYYYMMDD]\n"
            "                                 [--vendor-intel] [measure's image options]\n"
            "       gputravel enclave check SIG IMAGE [--allow-debug] [--min-isvsvn N]\n"
            "                                 [measure's image options]\n"
            "       gputravel enclave run SIG IMAGE --ecall N [--input HEX] [--platform DIR]\n"
            "                                 [--host sim|snp|tdx] [--quote EVIDENCE]\n"
            "                                 [--allow-debug] [--min-isvsvn N]\n"
            "       gputravel enclave seal|unseal|quote ...  (gputravel enclave seal --help)\n"
            "\n"
            "SGX enclave identity, computed as SGX computes it.\n"
            "  measure  MRENCLAVE of an SGXS stream, an Intel SGX SDK *.signed.so, or a flat\n"
            "           page image (page 0 TCS, the rest REG RWX; --ssaframesize default 1,\n"
            "           --size default the next power of two)\n"
            "  inspect  every SIGSTRUCT field of a raw 1808-byte SIGSTRUCT, a Gramine or\n"
            "           Fortanix .sig, or a *.signed.so, and whether its signature and q1/q2\n"
            "           hold: exit 0 if they do, 2 if not\n"
            "  sign     a SIGSTRUCT for IMAGE's MRENCLAVE with an RSA-3072 e=3 key (openssl\n"
            "           genrsa -3 3072). Defaults: MODE64BIT, XFRM 3, every attribute masked\n"
            "           (DEBUG too), ISVPRODID 0, ISVSVN 0, today's date; --debug sets DEBUG\n"
            "  check    EINIT's checks of SIG against IMAGE (the enclave created with the\n"
            "           SIGSTRUCT's own attributes and MISCSELECT): exit 0 if it would run,\n"
            "           1 if refused, 2 if the input is invalid\n"
            "  run      INSECURE SIMULATION: starts IMAGE (a flat image built with the SDK in\n"
            "           sdk/enclave) in its enclave process, which measures it and runs\n"
            "           EINIT's checks against SIG, then calls ECALL N with --input's bytes and\n"
            "           prints its status and output (OCALLs are echoed back). --platform:\n"
            "           the SGX platform in DIR, its root sealed to the host TEE (--host,\n"
            "           default sim; the same DIR as enclave seal|quote); without it an\n"
            "           ephemeral random root that is not sealed, so keys change every run.\n"
            "           --quote: remote attestation of the running enclave: ECALL N gets the\n"
            "           virtual QE's TARGETINFO (512 bytes) then --input's bytes and must\n"
            "           return the REPORT its ENCLU[EREPORT] made for it (the example's ECALL\n"
            "           7, --input a 32-byte nonce); the QE checks the REPORT's MAC, quotes it\n"
            "           and writes vsgx evidence (check it with gputravel verify). Exit 0 when\n"
            "           the ECALL ran (and was quoted), 1 when the enclave or its REPORT was\n"
            "           refused, 2 for invalid input\n"
            "\n"
            "  --json   one JSON object (measure: mrenclave, records, ecreate, eadd_pages,\n"
            "           eextend_chunks, unmeasured_chunks, page_types, problems; inspect:\n"
            "           mrenclave, mrsigner, isvprodid, isvsvn, attributes, attributemask,\n"
            "           miscselect, date, header_type, signature_valid, q1_q2_valid, ...)\n");
}

typedef struct {
    const char *action;
    const char *input;    // IMAGE or FILE or SIG
    const char *image;    // check's IMAGE
    const char *key;
    const char *out;
    bool json, debug, allow_debug, vendor_intel;
    gt_sgx_image_kind kind;
    uint32_t ssaframesize;
    uint64_t size;
    gt_sgx_sign_params sign;
    bool have_date;
    uint32_t min_isvsvn;
    bool have_ecall;
    uint32_t ecall;
    const char *input_hex, *platform, *quote;
    gt_tee_type host;
} enclave_options;

enum { O_FORMAT = 1000, O_SSA, O_SIZE, O_JSON, O_KEY, O_OUT, O_DEBUG, O_PRODID, O_SVN, O_ATTR,
       O_MASK, O_MISC, O_MISCMASK, O_DATE, O_INTEL, O_ALLOW_DEBUG, O_MIN_SVN, O_ECALL, O_INPUT,
       O_PLATFORM, O_HOST, O_QUOTE };

static gt_err parse_attributes(const char *flag, const char *hex, gt_sgx_attributes *a)
{
    uint8_t raw[16];
    if (!gt_is_ok(gt_hex_decode_exact(raw, sizeof raw, hex))) {
        return gt_errf(GT_E_ARG, "%s needs 32 hex digits (flags then xfrm, little-endian, as "
                       "inspect prints them)", flag);
    }
    gt_reader r = gt_reader_init(raw, sizeof raw);
    GT_TRY(gt_reader_u64le(&r, &a->flags));
    return gt_reader_u64le(&r, &a->xfrm);
}

static gt_err parse_date(const char *s, uint32_t *out)
{
    GT_ENSURE(strlen(s) == 8 && strspn(s, "0123456789") == 8, GT_E_ARG,
              "--date '%s': expected YYYYMMDD", s);
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 4) | (uint32_t)(s[i] - '0');
    }
    *out = v;
    return GT_OK;
}

static gt_err option(enclave_options *o, int c, const char *arg)
{
    uint32_t v = 0;
    switch (c) {
    case O_FORMAT:
        for (int k = GT_SGX_IMAGE_AUTO; k <= GT_SGX_IMAGE_FLAT; k++) {
            if (strcmp(arg, gt_sgx_image_kind_name((gt_sgx_image_kind)k)) == 0) {
                o->kind = (gt_sgx_image_kind)k;
                return GT_OK;
            }
        }
        return gt_errf(GT_E_ARG, "--format %s: auto, sgxs, signed-so or flat", arg);
    case O_SSA: return gt_cli_parse_u32("--ssaframesize", arg, 1, 1u << 20, &o->ssaframesize);
    case O_SIZE: return gt_parse_size(arg, &o->size);
    case O_JSON: o->json = true; return GT_OK;
    case O_KEY: o->key = arg; return GT_OK;
    case O_OUT: o->out = arg; return GT_OK;
    case O_DEBUG: o->debug = true; return GT_OK;
    case O_PRODID:
        GT_TRY(gt_cli_parse_u32("--isvprodid", arg, 0, 0xffff, &v));
        o->sign.isvprodid = (uint16_t)v;
        return GT_OK;
    case O_SVN:
        GT_TRY(gt_cli_parse_u32("--isvsvn", arg, 0, 0xffff, &v));
        o->sign.isvsvn = (uint16_t)v;
        return GT_OK;
    case O_ATTR: return parse_attributes("--attributes", arg, &o->sign.attributes);
    case O_MASK: return parse_attributes("--attributemask", arg, &o->sign.attributemask);
    case O_MISC: return gt_cli_parse_u32("--miscselect", arg, 0, UINT32_MAX, &o->sign.miscselect);
    case O_MISCMASK: return gt_cli_parse_u32("--miscmask", arg, 0, UINT32_MAX, &o->sign.miscmask);
    case O_DATE: o->have_date = true; return parse_date(arg, &o->sign.date);
    case O_INTEL: o->vendor_intel = true; return GT_OK;
    case O_ALLOW_DEBUG: o->allow_debug = true; return GT_OK;
    case O_MIN_SVN: return gt_cli_parse_u32("--min-isvsvn", arg, 0, 0xffff, &o->min_isvsvn);
    case O_ECALL:
        o->have_ecall = true;
        return gt_cli_parse_u32("--ecall", arg, 0, 63, &o->ecall);
    case O_INPUT: o->input_hex = arg; return GT_OK;
    case O_PLATFORM: o->platform = arg; return GT_OK;
    case O_QUOTE: o->quote = arg; return GT_OK;
    case O_HOST: return gt_tee_type_parse(arg, &o->host);
    default: return gt_errf(GT_E_ARG, "unknown option");
    }
}

static int parse(int argc, char **argv, enclave_options *o)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, O_FORMAT},
        {"ssaframesize", required_argument, NULL, O_SSA},
        {"size", required_argument, NULL, O_SIZE}, {"json", no_argument, NULL, O_JSON},
        {"key", required_argument, NULL, O_KEY}, {"out", required_argument, NULL, O_OUT},
        {"debug", no_argument, NULL, O_DEBUG}, {"isvprodid", required_argument, NULL, O_PRODID},
        {"isvsvn", required_argument, NULL, O_SVN}, {"attributes", required_argument, NULL, O_ATTR},
        {"attributemask", required_argument, NULL, O_MASK},
        {"miscselect", required_argument, NULL, O_MISC},
        {"miscmask", required_argument, NULL, O_MISCMASK},
        {"date", required_argument, NULL, O_DATE}, {"vendor-intel", no_argument, NULL, O_INTEL},
        {"allow-debug", no_argument, NULL, O_ALLOW_DEBUG},
        {"min-isvsvn", required_argument, NULL, O_MIN_SVN},
        {"ecall", required_argument, NULL, O_ECALL}, {"input", required_argument, NULL, O_INPUT},
        {"platform", required_argument, NULL, O_PLATFORM},
        {"host", required_argument, NULL, O_HOST}, {"quote", required_argument, NULL, O_QUOTE},
        {0}};
    memset(o, 0, sizeof *o);
    o->host = GT_TEE_SIM;
    gt_sgx_sign_params_default(&o->sign, (int64_t)time(NULL));
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        gt_err e = c == '?' ? gt_errf(GT_E_ARG, "unknown option") : option(o, c, optarg);
        if (!gt_is_ok(e)) {
            return gt_cli_usage("enclave", "%s", e.msg);
        }
    }
    int n = argc - optind;
    if (n < 1) {
        return gt_cli_usage("enclave", "expected measure, inspect, sign or check");
    }
    o->action = argv[optind];
    bool run = strcmp(o->action, "run") == 0;
    bool check = strcmp(o->action, "check") == 0 || run;
    if (strcmp(o->action, "measure") != 0 && strcmp(o->action, "inspect") != 0 &&
        strcmp(o->action, "sign") != 0 && !check) {
        return gt_cli_usage("enclave", "unknown action '%s' (measure, inspect, sign, check, "
                            "run)", o->action);
    }
    if (n != (check ? 3 : 2)) {
        return gt_cli_usage("enclave", check ? "%s takes SIG and IMAGE"
                                             : "%s takes one file", o->action);
    }
    if (run && !o->have_ecall) {
        return gt_cli_usage("enclave", "run needs --ecall N");
    }
    if (o->host != GT_TEE_SIM && o->platform == NULL) {
        return gt_cli_usage("enclave", "--host names the TEE the --platform DIR is sealed to");
    }
    if (o->quote != NULL && o->platform == NULL) {
        return gt_cli_usage("enclave", "run --quote needs --platform DIR (the virtual quoting "
                            "enclave's platform)");
    }
    o->input = argv[optind + 1];
    o->image = check ? argv[optind + 2] : NULL;
    if (strcmp(o->action, "sign") == 0 && (o->key == NULL || o->out == NULL)) {
        return gt_cli_usage("enclave", "sign needs --key SIGNER.pem and --out FILE");
    }
    if (o->debug) {
        o->sign.attributes.flags |= GT_SGX_ATTR_DEBUG;
    }
    if (o->vendor_intel) {
        o->sign.vendor = GT_SGX_VENDOR_INTEL;
    }
    return GT_EXIT_OK;
}

static gt_err measure_file(const enclave_options *o, const char *path, gt_sgx_measurement *m,
                           gt_sgx_image_kind *kind)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, GT_SGX_IMAGE_MAX_BYTES, &b));
    gt_err err = gt_sgx_measure_image(b.data, b.len, o->kind, o->ssaframesize, o->size, m, kind);
    gt_buf_free_nowipe(&b);
    return err.code ? gt_err_wrap(err, "%s", path) : err;
}

static int print_json(cJSON *j)
{
    char *text = j != NULL ? cJSON_Print(j) : NULL;
    if (text == NULL) {
        cJSON_Delete(j);
        return gt_cli_fail("enclave", gt_errf(GT_E_NOMEM, "json: out of memory"));
    }
    printf("%s\n", text);
    free(text);
    cJSON_Delete(j);
    return GT_EXIT_OK;
}

static int run_measure(const enclave_options *o)
{
    gt_sgx_measurement m;
    gt_sgx_image_kind kind = o->kind;
    gt_err err = measure_file(o, o->input, &m, &kind);
    if (!gt_is_ok(err)) {
        return gt_cli_fail("enclave", err);
    }
    char hex[2 * GT_SGX_HASH_BYTES + 1];
    gt_hex_encode(hex, sizeof hex, m.mrenclave, sizeof m.mrenclave);
    if (o->json) {
        cJSON *j = NULL;
        err = gt_sgx_measurement_json(&m, &j);
        if (!gt_is_ok(err)) {
            return gt_cli_fail("enclave", err);
        }
        cJSON_AddStringToObject(j, "file", o->input);
        cJSON_AddStringToObject(j, "format", gt_sgx_image_kind_name(kind));
        return print_json(j);
    }
    printf("%s: MRENCLAVE %s (%s; SSAFRAMESIZE %u, SIZE 0x%llx, %llu pages added, %llu chunks "
           "measured)\n", o->input, hex, gt_sgx_image_kind_name(kind), m.ssaframesize,
           (unsigned long long)m.size, (unsigned long long)m.eadd_pages,
           (unsigned long long)m.eextend_chunks);
    for (uint32_t i = 0; i < m.problem_count && i < GT_SGX_PROBLEMS_KEPT; i++) {
        printf("  problem: %s\n", m.problems[i]);
    }
    return GT_EXIT_OK;
}

static gt_err load_sigstruct(const char *path, gt_sgx_sigstruct *s, size_t *offset)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, GT_SGX_IMAGE_MAX_BYTES, &b));
    gt_err err = gt_sgx_sigstruct_find(b.data, b.len, s, offset);
    gt_buf_free_nowipe(&b);
    return err.code ? gt_err_wrap(err, "%s", path) : err;
}

static int run_inspect(const enclave_options *o)
{
    gt_sgx_sigstruct s;
    gt_sgx_sigstruct_checks c;
    size_t offset = 0;
    gt_err err = load_sigstruct(o->input, &s, &offset);
    if (err.code == GT_E_NONE) {
        err = gt_sgx_sigstruct_verify(&s, &c);
    }
    if (!gt_is_ok(err)) {
        gt_cli_fail("enclave", err);
        return GT_EXIT_INVALID;
    }
    int rc = c.all_ok ? GT_EXIT_OK : GT_EXIT_INVALID;
    if (o->json) {
        cJSON *j = NULL;
        err = gt_sgx_sigstruct_json(&s, &c, offset, &j);
        if (!gt_is_ok(err)) {
            return gt_cli_fail("enclave", err);
        }
        int prc = print_json(j);
        return prc != GT_EXIT_OK ? prc : rc;
    }
    char mre[65], mrs[65], iso[16];
    gt_hex_encode(mre, sizeof mre, s.enclavehash, sizeof s.enclavehash);
    gt_hex_encode(mrs, sizeof mrs, c.mrsigner, sizeof c.mrsigner);
    gt_sgx_date_encoding enc = gt_sgx_date_decode(s.date, iso, sizeof iso);
    printf("%s: SIGSTRUCT%s\n", o->input, offset ? " (inside the signed ELF)" : "");
    printf("  mrenclave      %s\n  mrsigner       %s\n", mre, mrs);
    printf("  isvprodid      %u\n  isvsvn         %u\n", s.isvprodid, s.isvsvn);
    printf("  attributes     flags 0x%016llx xfrm 0x%016llx%s\n",
           (unsigned long long)s.attributes.flags, (unsigned long long)s.attributes.xfrm,
           (s.attributes.flags & GT_SGX_ATTR_DEBUG) ? " (DEBUG)" : "");
    printf("  attributemask  flags 0x%016llx xfrm 0x%016llx\n",
           (unsigned long long)s.attributemask.flags, (unsigned long long)s.attributemask.xfrm);
    printf("  miscselect     0x%08x (mask 0x%08x)\n", s.miscselect, s.miscmask);
    printf("  vendor         0x%04x   date %s (%s)   header type 0x%08x (%s)\n", s.vendor, iso,
           gt_sgx_date_encoding_name(enc), s.header_type,
           s.header_type == 0 ? "production" : s.header_type == GT_SGX_HEADER_TYPE_DEBUG
                                                   ? "debug-signed" : "invalid");
    printf("  signature      %s   q1/q2 %s   header constants %s   reserved %s\n",
           c.signature_ok ? "valid" : "INVALID", c.q1_ok && c.q2_ok ? "valid" : "INVALID",
           c.header_ok && c.header2_ok && c.vendor_ok && c.exponent_ok && c.modulus_ok ? "ok"
                                                                                       : "BAD",
           c.reserved_ok[0] && c.reserved_ok[1] && c.reserved_ok[2] && c.reserved_ok[3]
               ? "zero" : "NOT ZERO");
    return rc;
}

static int run_sign(enclave_options *o)
{
    gt_sgx_measurement m;
    gt_err err = measure_file(o, o->input, &m, NULL);
    gt_pkey *key = NULL;
    gt_sgx_sigstruct s;
    if (err.code == GT_E_NONE) {
        err = gt_pkey_load_pem(&key, o->key, true);
    }
    if (err.code == GT_E_NONE) {
        memcpy(o->sign.enclavehash, m.mrenclave, sizeof m.mrenclave);
        err = gt_sgx_sigstruct_sign(&s, &o->sign, key);
    }
    gt_pkey_free(key);
    if (err.code == GT_E_NONE) {
        err = gt_file_write_atomic(o->out, s.raw, sizeof s.raw, 0644);
    }
    if (!gt_is_ok(err)) {
        return gt_cli_fail("enclave", err);
    }
    char mre[65];
    gt_hex_encode(mre, sizeof mre, m.mrenclave, sizeof m.mrenclave);
    printf("%s: SIGSTRUCT for MRENCLAVE %s written to %s\n", o->input, mre, o->out);
    return GT_EXIT_OK;
}

static int run_check(const enclave_options *o)
{
    gt_sgx_sigstruct s;
    gt_sgx_measurement m;
    size_t offset = 0;
    gt_err err = load_sigstruct(o->input, &s, &offset);
    if (err.code == GT_E_NONE) {
        err = measure_file(o, o->image, &m, NULL);
    }
    if (!gt_is_ok(err)) {
        gt_cli_fail("enclave", err);
        return GT_EXIT_INVALID;
    }
    gt_sgx_einit_params p = {.mrenclave = m.mrenclave, .secs_attributes = s.attributes,
                             .secs_miscselect = s.miscselect,
                             .secs_cet_attributes = s.cet_attributes,
                             .allow_debug = o->allow_debug, .min_isvsvn = (uint16_t)o->min_isvsvn};
    gt_sgx_identity id;
    err = gt_enclave_einit_check(&s, &p, &id);
    if (!gt_is_ok(err)) {
        printf("%s + %s: refused: %s\n", o->input, o->image, err.msg);
        return GT_EXIT_FAIL;
    }
    char mre[65], mrs[65];
    gt_hex_encode(mre, sizeof mre, id.mrenclave, sizeof id.mrenclave);
    gt_hex_encode(mrs, sizeof mrs, id.mrsigner, sizeof id.mrsigner);
    printf("%s + %s: EINIT checks pass: MRENCLAVE %s MRSIGNER %s ISVPRODID %u ISVSVN %u%s\n",
           o->input, o->image, mre, mrs, id.isvprodid, id.isvsvn, id.debug ? " (DEBUG)" : "");
    return GT_EXIT_OK;
}

static gt_err echo_ocall(void *ctx, uint64_t number, const uint8_t *in, size_t in_len,
                         gt_buf *reply, int64_t *status)
{
    (void)ctx;
    char hex[2 * 64 + 1];
    gt_hex_encode(hex, sizeof hex, in, in_len < 64 ? in_len : 64);
    printf("OCALL %llu: %zu bytes %s%s (echoed back)\n", (unsigned long long)number, in_len, hex,
           in_len > 64 ? "..." : "");
    *status = 0;
    return gt_buf_append(reply, in, in_len);
}

static gt_err run_inputs(const enclave_options *o, gt_buf *sig, gt_buf *image, gt_buf *input,
                         gt_sgx_platform *pf)
{
    GT_TRY(gt_file_read_all(o->input, GT_SGX_SIGSTRUCT_BYTES, sig));
    GT_ENSURE(sig->len == GT_SGX_SIGSTRUCT_BYTES, GT_E_FORMAT, "%s: not a %d-byte SIGSTRUCT",
              o->input, GT_SGX_SIGSTRUCT_BYTES);
    GT_TRY(gt_file_read_all(o->image, GT_ENCLAVE_IMAGE_MAX_BYTES, image));
    if (o->input_hex != NULL) {
        size_t n = 0;
        GT_TRY(gt_buf_reserve(input, strlen(o->input_hex) / 2 + 1));
        GT_TRY(gt_err_wrap(gt_hex_decode(input->data, input->cap, &n, o->input_hex), "--input"));
        input->len = n;
    }
    if (o->platform == NULL) {
        GT_TRY(gt_random_bytes(pf, sizeof *pf));
        memset(pf->cpusvn, 0, sizeof pf->cpusvn);
        printf("no --platform: an ephemeral random root, not sealed (keys change every run)\n");
    }
    return GT_OK;
}

// --quote: the virtual QE on the same platform (its root, its host TEE) quotes the REPORT the
// enclave made for it; the enclave's identity reaches the quote only through that REPORT.
static gt_err open_quoter(const enclave_options *o, gt_vqe **q, gt_buf *input)
{
    gt_sgx_platform pf;
    gt_sgx_platform_options po = {.host = o->host};
    gt_collect_params host = {.type = o->host};
    gt_sgx_targetinfo ti;
    uint8_t raw[GT_SGX_TARGETINFO_BYTES];
    gt_err err;
    GT_TRY_GOTO(err, gt_sgx_platform_open(o->platform, &po, &pf, NULL), out);
    GT_TRY_GOTO(err, gt_vqe_open(q, o->platform, &pf, &host), out);
    gt_vqe_targetinfo(*q, &ti);
    gt_sgx_targetinfo_encode(&ti, raw);
    gt_buf with_target = {0};
    GT_TRY_GOTO(err, gt_buf_append(&with_target, raw, sizeof raw), out);
    GT_TRY_GOTO(err, gt_buf_append(&with_target, input->data, input->len), out);
    gt_buf_free(input);
    *input = with_target;
out:
    gt_secure_zero(&pf, sizeof pf);
    return err;
}

static gt_err write_quote(const enclave_options *o, const gt_vqe *q, const gt_buf *report)
{
    gt_evidence ev = {0};
    gt_err err = gt_vqe_quote_report(q, report->data, report->len, &ev);
    if (gt_is_ok(err)) {
        err = gt_evidence_save_file(&ev, o->quote);
    }
    if (gt_is_ok(err)) {
        printf("quote (vsgx, host %s%s) of the enclave's own REPORT -> %s\n",
               gt_tee_type_name(o->host), o->host == GT_TEE_SIM ? ", " GT_INSECURE_SIMULATION : "",
               o->quote);
    }
    gt_evidence_free(&ev);
    return err;
}

static void print_started(const gt_enclave *e)
{
    char mre[65], mrs[65];
    gt_hex_encode(mre, sizeof mre, gt_enclave_identity(e)->mrenclave, 32);
    gt_hex_encode(mrs, sizeof mrs, gt_enclave_identity(e)->mrsigner, 32);
    printf("enclave process %d: MRENCLAVE %s MRSIGNER %s\n", gt_enclave_pid(e), mre, mrs);
}

static void print_output(const enclave_options *o, int64_t status, const gt_buf *out)
{
    char *hex = malloc(2 * out->len + 1);
    if (hex != NULL) {
        gt_hex_encode(hex, 2 * out->len + 1, out->data, out->len);
        printf("ECALL %u: status %lld, %zu output bytes %s\n", o->ecall, (long long)status,
               out->len, hex);
    }
    free(hex);
}

// A refusal of the enclave (EINIT, its hello) or of its REPORT exits 1; the rest 2.
static int refusal_rc(gt_err err)
{
    return err.code == GT_E_AUTH || err.code == GT_E_POLICY ? GT_EXIT_FAIL : GT_EXIT_INVALID;
}

static gt_err start_and_call(const enclave_options *o, gt_enclave_spec *spec, gt_buf *input,
                             gt_buf *out, int *rc)
{
    gt_enclave *e = NULL;
    gt_vqe *q = NULL;
    int64_t status = 0;
    gt_err err = GT_OK;
    if (o->quote != NULL) {
        GT_TRY_GOTO(err, open_quoter(o, &q, input), done);
    }
    err = gt_enclave_start(&e, spec);
    *rc = refusal_rc(err);
    GT_TRY_GOTO(err, err, done);
    print_started(e);
    *rc = GT_EXIT_INVALID;
    GT_TRY_GOTO(err, gt_enclave_ecall(e, o->ecall, input->data, input->len, out, &status), done);
    print_output(o, status, out);
    if (q != NULL) {
        err = write_quote(o, q, out);
        *rc = refusal_rc(err);
        GT_TRY_GOTO(err, err, done);
    }
    *rc = GT_EXIT_OK;
done:
    gt_enclave_stop(e);
    gt_vqe_free(q);
    return err;
}

static int run_enclave(const enclave_options *o)
{
    gt_buf sig = {0}, image = {0}, input = {0}, out = {0};
    gt_sgx_platform pf;
    gt_sgx_platform_options po = {.host = o->host};
    int rc = GT_EXIT_INVALID;
    gt_err err = run_inputs(o, &sig, &image, &input, &pf);
    gt_enclave_spec spec = {.image = image.data, .image_len = image.len, .sigstruct = sig.data,
                            .allow_debug = o->allow_debug,
                            .min_isvsvn = (uint16_t)o->min_isvsvn, .ocall = echo_ocall};
    if (o->platform != NULL) {
        spec.platform_dir = o->platform;
        spec.platform_options = &po;
    } else {
        spec.platform = &pf;
    }
    printf("insecure-simulation: the enclave runs in a process of its own, ENCLU emulated\n");
    if (gt_is_ok(err)) {
        err = start_and_call(o, &spec, &input, &out, &rc);
    }
    gt_buf_free(&sig);
    gt_buf_free(&image);
    gt_buf_free(&input);
    gt_buf_free(&out);
    gt_secure_zero(&pf, sizeof pf);
    if (!gt_is_ok(err)) {
        gt_cli_fail("enclave", err);
    }
    return rc;
}

int gt_cmd_enclave(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "seal") == 0 || strcmp(argv[1], "unseal") == 0 ||
                     strcmp(argv[1], "quote") == 0)) {
        return gt_cli_enclave_keys(argc, argv);
    }
    if (gt_cli_wants_help(argc, argv)) {
        usage(stdout);
        return GT_EXIT_OK;
    }
    enclave_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    if (strcmp(o.action, "measure") == 0) {
        return run_measure(&o);
    }
    if (strcmp(o.action, "inspect") == 0) {
        return run_inspect(&o);
    }
    if (strcmp(o.action, "sign") == 0) {
        return run_sign(&o);
    }
    if (strcmp(o.action, "run") == 0) {
        return run_enclave(&o);
    }
    return run_check(&o);
}
