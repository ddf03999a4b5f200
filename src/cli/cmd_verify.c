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
            "usage: gputravel verify --evidence FILE [--type auto|tdx|sgx|snp|nvgpu|sim]\n"
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
            "  --policy P.json     appraisal policy (default: signature + chain only; sim refused)\n"
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

static void print_text(const gt_appraisal *a, const char *path)
{
    printf("evidence:  %s (%s v%u)%s\n", path, gt_tee_type_name(a->type), a->version,
           a->insecure_simulation ? " [" GT_INSECURE_SIMULATION "]" : "");
    printf("signature: %s\nchain:     %s\ntcb:       %s\n", a->signature_valid ? "valid" : "NOT valid",
           a->chain_valid ? "valid" : "NOT valid", a->tcb_status[0] ? a->tcb_status : "-");
    const cJSON *c = NULL;
    cJSON_ArrayForEach(c, a->claims)
    {
        if (cJSON_IsString(c)) {
            printf("  %-20s %s\n", c->string, c->valuestring);
        } else if (cJSON_IsBool(c)) {
            printf("  %-20s %s\n", c->string, cJSON_IsTrue(c) ? "true" : "false");
        } else if (cJSON_IsNumber(c)) {
            printf("  %-20s %.0f\n", c->string, c->valuedouble);
        } else if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
            char *text = cJSON_PrintUnformatted(c);  // nested claims: compact, cut for the eye
            if (text != NULL) {
                printf("  %-20s %.100s%s\n", c->string, text, strlen(text) > 100 ? "..." : "");
                free(text);
            }
        }
    }
    printf("verdict:   %s\n", gt_verdict_name(a->verdict));
    for (size_t i = 0; i < a->reason_count; i++) {
        printf("  reason:  %s\n", a->reasons[i]);
    }
    for (size_t i = 0; i < a->warning_count; i++) {
        printf("  warning: %s\n", a->warnings[i]);
    }
}

int gt_cmd_verify(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage(stdout);
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {
        {"evidence", required_argument, NULL, 'e'}, {"type", required_argument, NULL, 't'},
        {"root", required_argument, NULL, 'r'},     {"cert", required_argument, NULL, 'c'},
        {"collateral", required_argument, NULL, 'C'}, {"at", required_argument, NULL, 'a'},
        {"policy", required_argument, NULL, 'p'},   {"nonce", required_argument, NULL, 'n'},
        {"report-data", required_argument, NULL, 'd'}, {"agreement", required_argument, NULL, 'g'},
        {"json", no_argument, NULL, 'j'},           {NULL, 0, NULL, 0},
    };
    const char *evidence = NULL, *policy_path = NULL, *type_name = "auto";
    const char *roots[MAX_FILES], *certs[MAX_FILES], *colls[MAX_FILES];
    size_t nroots = 0, ncerts = 0, ncolls = 0;
    const char *at_arg = NULL, *nonce_arg = NULL, *rd_arg = NULL, *agr_arg = NULL;
    bool json = false;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'e': evidence = optarg; break;
        case 't': type_name = optarg; break;
        case 'r':
            if (nroots == MAX_FILES) return gt_cli_usage("verify", "too many --root");
            roots[nroots++] = optarg;
            break;
        case 'c':
            if (ncerts == MAX_FILES) return gt_cli_usage("verify", "too many --cert");
            certs[ncerts++] = optarg;
            break;
        case 'C':
            if (ncolls == MAX_FILES) return gt_cli_usage("verify", "too many --collateral");
            colls[ncolls++] = optarg;
            break;
        case 'a': at_arg = optarg; break;
        case 'p': policy_path = optarg; break;
        case 'n': nonce_arg = optarg; break;
        case 'd': rd_arg = optarg; break;
        case 'g': agr_arg = optarg; break;
        case 'j': json = true; break;
        default:
            return gt_cli_usage("verify", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc) {
        return gt_cli_usage("verify", "unexpected argument '%s'", argv[optind]);
    }
    if (evidence == NULL) {
        return gt_cli_usage("verify", "--evidence FILE is required");
    }
    gt_tee_type type = GT_TEE_AUTO;
    if (!gt_is_ok(gt_tee_type_parse(type_name, &type))) {
        return gt_cli_usage("verify", "--type must be auto, tdx, sgx, snp, nvgpu or sim");
    }
    gt_appraise_params prm = {0};
    if (at_arg != NULL) {
        char *end = NULL;
        errno = 0;
        long long at = strtoll(at_arg, &end, 10);
        if (end == at_arg || *end != '\0' || errno != 0 || at <= 0) {
            return gt_cli_usage("verify", "--at must be a positive UNIX time in seconds");
        }
        prm.at = at;
    }
    uint8_t nonce[GT_REPORT_DATA_BYTES], rd[GT_REPORT_DATA_BYTES], agr[64];
    size_t nonce_len = 0, rd_len = 0, agr_len = 0;
    if (nonce_arg != NULL) {
        gt_err e = parse_hex_arg("--nonce", nonce_arg, nonce, sizeof nonce, &nonce_len);
        if (!gt_is_ok(e) || nonce_len == 0) {
            return gt_cli_usage("verify", "--nonce must be 1..64 bytes of hex");
        }
        prm.nonce = nonce;
        prm.nonce_len = nonce_len;
    }
    if (rd_arg != NULL) {
        gt_err e = parse_hex_arg("--report-data", rd_arg, rd, sizeof rd, &rd_len);
        if (!gt_is_ok(e) || rd_len != GT_REPORT_DATA_BYTES) {
            return gt_cli_usage("verify", "--report-data must be exactly 64 bytes of hex");
        }
        prm.expected_report_data = rd;
    }
    if (agr_arg != NULL) {
        gt_err e = parse_hex_arg("--agreement", agr_arg, agr, sizeof agr, &agr_len);
        if (!gt_is_ok(e) || agr_len == 0) {
            return gt_cli_usage("verify", "--agreement must be 1..64 bytes of hex");
        }
        prm.agreement_hash = agr;
        prm.agreement_hash_len = agr_len;
    }

    int rc = GT_EXIT_INVALID;
    file_list lroots = {0}, lcerts = {0}, lcolls = {0};
    gt_policy *policy = NULL;
    gt_buf ev_bytes = {0};
    gt_appraisal a = {0};
    bool have_appraisal = false;
    gt_err err = GT_OK;
    for (size_t i = 0; i < nroots && gt_is_ok(err); i++) {
        err = file_list_add(&lroots, roots[i], false);
    }
    for (size_t i = 0; i < ncerts && gt_is_ok(err); i++) {
        err = file_list_add(&lcerts, certs[i], false);
    }
    for (size_t i = 0; i < ncolls && gt_is_ok(err); i++) {
        err = file_list_add(&lcolls, colls[i], true);
    }
    if (gt_is_ok(err) && policy_path != NULL) {
        err = gt_policy_load_file(&policy, policy_path);
    }
    if (!gt_is_ok(err)) {
        fprintf(stderr, "gputravel verify: error: %s\n", err.msg);
        goto out;
    }
    prm.roots = lroots.items;
    prm.root_count = lroots.count;
    prm.certs = lcerts.items;
    prm.cert_count = lcerts.count;
    prm.collateral = lcolls.items;
    prm.collateral_count = lcolls.count;

    err = gt_file_read_all(evidence, GT_EVIDENCE_MAX_BYTES, &ev_bytes);
    if (gt_is_ok(err)) {
        err = gt_attest_appraise_bytes(&a, ev_bytes.data, ev_bytes.len, type, policy, &prm);
    } else if (err.code == GT_E_LIMIT || err.code == GT_E_TRUNCATED) {
        // An oversized file is invalid evidence, reported like any other.
        gt_err perr = gt_err_wrap(err, "%s", evidence);
        err = gt_attest_appraise_bytes(&a, NULL, 0, type, policy, &prm);
        if (gt_is_ok(err) && a.reason_count > 0) {
            free(a.reasons[0]);
            a.reasons[0] = strdup(perr.msg);
            if (a.reasons[0] == NULL) {
                a.reason_count = 0;
            }
        }
    }
    if (!gt_is_ok(err)) {
        fprintf(stderr, "gputravel verify: error: %s\n", err.msg);
        goto out;
    }
    have_appraisal = true;
    if (json) {
        cJSON *o = gt_appraisal_to_json(&a);
        char *text = o ? cJSON_Print(o) : NULL;
        cJSON_Delete(o);
        if (text == NULL) {
            fprintf(stderr, "gputravel verify: error: out of memory\n");
            goto out;
        }
        printf("%s\n", text);
        free(text);
    } else {
        print_text(&a, evidence);
    }
    rc = a.verdict == GT_VERDICT_ACCEPTED   ? GT_EXIT_OK
         : a.verdict == GT_VERDICT_REJECTED ? GT_EXIT_FAIL
                                            : GT_EXIT_INVALID;
out:
    if (have_appraisal) {
        gt_appraisal_free(&a);
    }
    gt_buf_free_nowipe(&ev_bytes);
    gt_policy_free(policy);
    file_list_free(&lroots);
    file_list_free(&lcerts);
    file_list_free(&lcolls);
    return rc;
}
