// gputravel verify: appraises one evidence file. Exit 0 accepted, 1 rejected, 2 invalid, 64 usage.
#include "cli.h"

#include <gputravel/attest.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILES 16
#define MAX_TRUST_FILE_BYTES (4u << 20)

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gputravel verify --evidence FILE [--type auto|tdx|sgx|snp|nvgpu|sim|vsgx]\n"
            "                        [--root PEM]... [--cert FILE]... [--collateral FILE]...\n"
            "                        [--at UNIX_TIME] [--policy P.json] [--nonce HEX]\n"
            "                        [--report-data HEX] [--agreement HEX] [--json]\n"
            "\n"
            "Verifies evidence (a TDX/SGX quote, SNP report, NVIDIA SPDM transcript, or gputravel\n"
            "evidence file) against trusted roots and appraises it under a policy.\n"
            "\n"
            "  --evidence FILE     the evidence to verify\n"
            "  --type T            evidence type (default auto: detected from the bytes)\n"
            "  --root PEM          trusted root: CA certificate(s), or the sim root public key\n"
            "  --cert FILE         untrusted certificates for the path (VCEK/VLEK, GPU chain)\n"
            "  --collateral FILE   Intel collateral (TCB info, QE identity, CRLs, TCB signing\n"
            "                      chain, dcap-qvl JSON); KIND:FILE forces the kind\n"
            "  --at UNIX_TIME      verification time (default now)\n"
            "  --policy P.json     appraisal policy (docs/attestation.md). Without one, and for\n"
            "                      what a policy leaves out, the defaults refuse: a debug TEE\n"
            "                      (unless \"allow_debug\": true), an Intel TCB status other than\n"
            "                      UpToDate, or none without --collateral (unless listed in\n"
            "                      \"accepted_tcb_statuses\"; NotEvaluated: no status), and sim\n"
            "                      evidence (unless \"allow_simulation\": true)\n"
            "  --nonce HEX         verifier nonce (nvgpu: SPDM request nonce; others: report_data\n"
            "                      = nonce || zero padding)\n"
            "  --report-data HEX   the exact 64-byte report_data expected\n"
            "  --agreement HEX     the training agreement hash the evidence is used under\n"
            "  --json              print one JSON object (type, version, signature_valid,\n"
            "                      chain_valid, tcb_status, claims, verdict, reasons)\n"
            "\n"
            "Exit status: 0 accepted, 1 rejected, 2 invalid evidence or unreadable input, 64 usage.\n");
}

typedef struct {
    gt_attest_file items[MAX_FILES];
    gt_buf bufs[MAX_FILES];
    size_t count;
} file_list;

static void file_list_free(file_list *l)
{
    for (size_t i = 0; i < l->count; i++) {
        gt_buf_free_nowipe(&l->bufs[i]);
    }
    l->count = 0;
}

// Reads arg into the list. A "kind:" prefix (collateral) stays in the path given to the library;
// the file read is the part after it when no file has the literal name.
static gt_err file_list_add(file_list *l, const char *arg, bool allow_kind)
{
    GT_ENSURE(l->count < MAX_FILES, GT_E_LIMIT, "more than %d files of one kind", MAX_FILES);
    const char *path = arg;
    const char *colon = strchr(arg, ':');
    if (allow_kind && colon != NULL && !gt_path_exists(arg)) {
        path = colon + 1;
    }
    gt_buf *b = &l->bufs[l->count];
    GT_TRY(gt_err_wrap(gt_file_read_all(path, MAX_TRUST_FILE_BYTES, b), "%s", path));
    l->items[l->count] = (gt_attest_file){.path = arg, .data = gt_buf_span(b)};
    l->count++;
    return GT_OK;
}

static gt_err parse_hex_arg(const char *what, const char *hex, uint8_t *out, size_t cap,
                            size_t *len)
{
    if (hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) {
        hex += 2;
    }
    return gt_err_wrap(gt_hex_decode(out, cap, len, hex), "%s", what);
}

static void print_claim(const char *prefix, const cJSON *c, bool expand);

// vsgx: the QE's and the host TEE's identities are claims objects of their own ("qe", "host"):
// printed member by member, so both levels are read like the enclave's.
static void print_claim_object(const cJSON *o)
{
    const cJSON *m = NULL;
    cJSON_ArrayForEach(m, o)
    {
        char name[64];
        snprintf(name, sizeof name, "%s.%s", o->string, m->string);
        print_claim(name, m, false);
    }
}

static void print_claim(const char *name, const cJSON *c, bool expand)
{
    if (cJSON_IsString(c)) {
        printf("  %-20s %s\n", name, c->valuestring);
    } else if (cJSON_IsBool(c)) {
        printf("  %-20s %s\n", name, cJSON_IsTrue(c) ? "true" : "false");
    } else if (cJSON_IsNumber(c)) {
        printf("  %-20s %.0f\n", name, c->valuedouble);
    } else if (expand && cJSON_IsObject(c)) {
        print_claim_object(c);
    } else if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
        char *text = cJSON_PrintUnformatted(c);  // nested claims: compact, cut for the eye
        if (text != NULL) {
            printf("  %-20s %.100s%s\n", name, text, strlen(text) > 100 ? "..." : "");
            free(text);
        }
    }
}

static void print_text(const gt_appraisal *a, const char *path)
{
    printf("evidence:  %s (%s v%u)%s\n", path, gt_tee_type_name(a->type), a->version,
           a->insecure_simulation ? " [" GT_INSECURE_SIMULATION "]" : "");
    printf("signature: %s\nchain:     %s\ntcb:       %s\n", a->signature_valid ? "valid" : "NOT valid",
           a->chain_valid ? "valid" : "NOT valid", a->tcb_status[0] ? a->tcb_status : "-");
    const cJSON *c = NULL;
    cJSON_ArrayForEach(c, a->claims)
    {
        print_claim(c->string, c, a->type == GT_TEE_VSGX);
    }
    printf("verdict:   %s\n", gt_verdict_name(a->verdict));
    for (size_t i = 0; i < a->reason_count; i++) {
        printf("  reason:  %s\n", a->reasons[i]);
    }
    for (size_t i = 0; i < a->warning_count; i++) {
        printf("  warning: %s\n", a->warnings[i]);
    }
}

typedef struct {
    const char *evidence, *policy_path, *type_name;
    const char *roots[MAX_FILES], *certs[MAX_FILES], *colls[MAX_FILES];
    size_t nroots, ncerts, ncolls;
    const char *at_arg, *nonce_arg, *rd_arg, *agr_arg;
    bool json;
    // Parsed from the strings above:
    gt_tee_type type;
    long long at;
    uint8_t nonce[GT_REPORT_DATA_BYTES], rd[GT_REPORT_DATA_BYTES], agr[64];
    size_t nonce_len, agr_len;
} verify_options;

// One option into o; 0, or the exit status of a usage error (already printed).
static int parse_one(int opt, verify_options *o, char **argv)
{
    switch (opt) {
    case 'e': o->evidence = optarg; break;
    case 't': o->type_name = optarg; break;
    case 'r':
        if (o->nroots == MAX_FILES) return gt_cli_usage("verify", "too many --root");
        o->roots[o->nroots++] = optarg;
        break;
    case 'c':
        if (o->ncerts == MAX_FILES) return gt_cli_usage("verify", "too many --cert");
        o->certs[o->ncerts++] = optarg;
        break;
    case 'C':
        if (o->ncolls == MAX_FILES) return gt_cli_usage("verify", "too many --collateral");
        o->colls[o->ncolls++] = optarg;
        break;
    case 'a': o->at_arg = optarg; break;
    case 'p': o->policy_path = optarg; break;
    case 'n': o->nonce_arg = optarg; break;
    case 'd': o->rd_arg = optarg; break;
    case 'g': o->agr_arg = optarg; break;
    case 'j': o->json = true; break;
    default: return gt_cli_usage("verify", "unknown or incomplete option '%s'", argv[optind - 1]);
    }
    return GT_EXIT_OK;
}

// The values behind --type, --at, --nonce, --report-data and --agreement.
static int parse_values(verify_options *o)
{
    if (!gt_is_ok(gt_tee_type_parse(o->type_name, &o->type))) {
        return gt_cli_usage("verify", "--type must be auto, tdx, sgx, snp, nvgpu or sim");
    }
    if (o->at_arg != NULL) {
        char *end = NULL;
        errno = 0;
        o->at = strtoll(o->at_arg, &end, 10);
        if (end == o->at_arg || *end != '\0' || errno != 0 || o->at <= 0) {
            return gt_cli_usage("verify", "--at must be a positive UNIX time in seconds");
        }
    }
    size_t rd_len = 0;
    if (o->nonce_arg != NULL &&
        (!gt_is_ok(parse_hex_arg("--nonce", o->nonce_arg, o->nonce, sizeof o->nonce,
                                 &o->nonce_len)) || o->nonce_len == 0)) {
        return gt_cli_usage("verify", "--nonce must be 1..64 bytes of hex");
    }
    if (o->rd_arg != NULL &&
        (!gt_is_ok(parse_hex_arg("--report-data", o->rd_arg, o->rd, sizeof o->rd, &rd_len)) ||
         rd_len != GT_REPORT_DATA_BYTES)) {
        return gt_cli_usage("verify", "--report-data must be exactly 64 bytes of hex");
    }
    if (o->agr_arg != NULL &&
        (!gt_is_ok(parse_hex_arg("--agreement", o->agr_arg, o->agr, sizeof o->agr, &o->agr_len)) ||
         o->agr_len == 0)) {
        return gt_cli_usage("verify", "--agreement must be 1..64 bytes of hex");
    }
    return GT_EXIT_OK;
}

static int parse(int argc, char **argv, verify_options *o)
{
    static const struct option opts[] = {
        {"evidence", required_argument, NULL, 'e'}, {"type", required_argument, NULL, 't'},
        {"root", required_argument, NULL, 'r'},     {"cert", required_argument, NULL, 'c'},
        {"collateral", required_argument, NULL, 'C'}, {"at", required_argument, NULL, 'a'},
        {"policy", required_argument, NULL, 'p'},   {"nonce", required_argument, NULL, 'n'},
        {"report-data", required_argument, NULL, 'd'}, {"agreement", required_argument, NULL, 'g'},
        {"json", no_argument, NULL, 'j'},           {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->type_name = "auto";
    int opt, rc = GT_EXIT_OK;
    opterr = 0;
    while (rc == GT_EXIT_OK && (opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        rc = parse_one(opt, o, argv);
    }
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    if (optind != argc) {
        return gt_cli_usage("verify", "unexpected argument '%s'", argv[optind]);
    }
    if (o->evidence == NULL) {
        return gt_cli_usage("verify", "--evidence FILE is required");
    }
    return parse_values(o);
}

// What a verification holds while it runs (freed by verify_free).
typedef struct {
    file_list roots, certs, colls;
    gt_policy *policy;
    gt_buf ev_bytes;
} verify_inputs;

static void verify_free(verify_inputs *in)
{
    gt_buf_free_nowipe(&in->ev_bytes);
    gt_policy_free(in->policy);
    file_list_free(&in->roots);
    file_list_free(&in->certs);
    file_list_free(&in->colls);
}

static gt_err load_inputs(const verify_options *o, verify_inputs *in)
{
    for (size_t i = 0; i < o->nroots; i++) {
        GT_TRY(file_list_add(&in->roots, o->roots[i], false));
    }
    for (size_t i = 0; i < o->ncerts; i++) {
        GT_TRY(file_list_add(&in->certs, o->certs[i], false));
    }
    for (size_t i = 0; i < o->ncolls; i++) {
        GT_TRY(file_list_add(&in->colls, o->colls[i], true));
    }
    if (o->policy_path != NULL) {
        GT_TRY(gt_policy_load_file(&in->policy, o->policy_path));
    }
    return GT_OK;
}

// Appraises the evidence into a (which the caller frees when this succeeds).
static gt_err run(const verify_options *o, verify_inputs *in, gt_appraisal *a)
{
    GT_TRY(load_inputs(o, in));
    gt_appraise_params prm = {
        .at = o->at, .roots = in->roots.items, .root_count = in->roots.count,
        .certs = in->certs.items, .cert_count = in->certs.count,
        .collateral = in->colls.items, .collateral_count = in->colls.count,
    };
    if (o->nonce_arg != NULL) {
        prm.nonce = o->nonce;
        prm.nonce_len = o->nonce_len;
    }
    if (o->rd_arg != NULL) {
        prm.expected_report_data = o->rd;
    }
    if (o->agr_arg != NULL) {
        prm.agreement_hash = o->agr;
        prm.agreement_hash_len = o->agr_len;
    }
    gt_err err = gt_file_read_all(o->evidence, GT_EVIDENCE_MAX_BYTES, &in->ev_bytes);
    if (gt_is_ok(err)) {
        return gt_attest_appraise_bytes(a, in->ev_bytes.data, in->ev_bytes.len, o->type,
                                        in->policy, &prm);
    }
    GT_ENSURE(err.code == GT_E_LIMIT || err.code == GT_E_TRUNCATED, err.code, "%s", err.msg);
    // An oversized file is invalid evidence, reported like any other.
    gt_err perr = gt_err_wrap(err, "%s", o->evidence);
    GT_TRY(gt_attest_appraise_bytes(a, NULL, 0, o->type, in->policy, &prm));
    if (a->reason_count > 0) {
        free(a->reasons[0]);
        a->reasons[0] = strdup(perr.msg);
        if (a->reasons[0] == NULL) {
            a->reason_count = 0;
        }
    }
    return GT_OK;
}

// Prints the appraisal and returns the exit status its verdict calls for.
static int print_appraisal(const verify_options *o, const gt_appraisal *a)
{
    if (o->json) {
        cJSON *j = gt_appraisal_to_json(a);
        char *text = j ? cJSON_Print(j) : NULL;
        cJSON_Delete(j);
        if (text == NULL) {
            fprintf(stderr, "gputravel verify: error: out of memory\n");
            return GT_EXIT_INVALID;
        }
        printf("%s\n", text);
        free(text);
    } else {
        print_text(a, o->evidence);
    }
    return a->verdict == GT_VERDICT_ACCEPTED   ? GT_EXIT_OK
           : a->verdict == GT_VERDICT_REJECTED ? GT_EXIT_FAIL
                                               : GT_EXIT_INVALID;
}

int gt_cmd_verify(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage(stdout);
        return GT_EXIT_OK;
    }
    verify_options *o = calloc(1, sizeof *o);
    if (o == NULL) {
        fprintf(stderr, "gputravel verify: error: out of memory\n");
        return GT_EXIT_INVALID;
    }
    int rc = parse(argc, argv, o);
    if (rc != GT_EXIT_OK) {
        free(o);
        return rc;
    }
    verify_inputs in = {0};
    gt_appraisal a = {0};
    gt_err err = run(o, &in, &a);
    if (gt_is_ok(err)) {
        rc = print_appraisal(o, &a);
        gt_appraisal_free(&a);
    } else {
        fprintf(stderr, "gputravel verify: error: %s\n", err.msg);
        rc = GT_EXIT_INVALID;
    }
    verify_free(&in);
    free(o);
    return rc;
}
