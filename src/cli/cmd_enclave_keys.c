// gputravel enclave seal|unseal|quote: sealing and remote attestation for the enclave a
// SIGSTRUCT names, on a platform whose root is sealed to the host TEE (docs/enclave.md).
#include "cli.h"

#include <gputravel/enclave.h>

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gputravel enclave seal --platform DIR --sigstruct SIG [--policy mrenclave|\n"
            "                              mrsigner] [--host sim|snp|tdx] IN --out BLOB\n"
            "       gputravel enclave unseal --platform DIR --sigstruct SIG [--host H] BLOB\n"
            "                              --out FILE\n"
            "       gputravel enclave quote --platform DIR --sigstruct SIG [--host H]\n"
            "                              [--report-data HEX] --out EVIDENCE\n"
            "\n"
            "For the enclave SIG names (MRENCLAVE = its ENCLAVEHASH, MRSIGNER, ISVPRODID, ISVSVN,\n"
            "ATTRIBUTES; its signature must verify), on the platform in DIR: a random root made on\n"
            "first use and sealed to the host TEE (--host, default sim: sealed to the sim root,\n"
            "insecure-simulation; snp: the SNP_GET_DERIVED_KEY key of /dev/sev-guest; tdx has no\n"
            "sealing key and is refused).\n"
            "  seal    EGETKEY seal key (--policy, default mrenclave) + AES-256-GCM\n"
            "  unseal  the same key derived again: refused to another enclave or signer\n"
            "  quote   an SGX quote by the platform's virtual quoting enclave, its key bound into\n"
            "          the host TEE's evidence (vsgx; check it with gputravel verify)\n");
}

typedef struct {
    const char *action, *platform, *sigstruct, *input, *out, *report_data;
    gt_tee_type host;
    uint16_t policy;
} keys_options;

enum { O_PLATFORM = 1, O_SIG, O_POLICY, O_HOST, O_OUT, O_RD };

static gt_err option(keys_options *o, int c, const char *arg)
{
    switch (c) {
    case O_PLATFORM: o->platform = arg; return GT_OK;
    case O_SIG: o->sigstruct = arg; return GT_OK;
    case O_OUT: o->out = arg; return GT_OK;
    case O_RD: o->report_data = arg; return GT_OK;
    case O_HOST: return gt_tee_type_parse(arg, &o->host);
    case O_POLICY:
        if (strcmp(arg, "mrenclave") == 0 || strcmp(arg, "mrsigner") == 0) {
            o->policy = arg[2] == 'e' ? GT_SGX_KEYPOLICY_MRENCLAVE : GT_SGX_KEYPOLICY_MRSIGNER;
            return GT_OK;
        }
        return gt_errf(GT_E_ARG, "--policy '%s': mrenclave or mrsigner", arg);
    default: return gt_errf(GT_E_ARG, "unknown option");
    }
}

static int parse(int argc, char **argv, keys_options *o)
{
    static const struct option opts[] = {
        {"platform", required_argument, NULL, O_PLATFORM},
        {"sigstruct", required_argument, NULL, O_SIG},
        {"policy", required_argument, NULL, O_POLICY}, {"host", required_argument, NULL, O_HOST},
        {"out", required_argument, NULL, O_OUT},
        {"report-data", required_argument, NULL, O_RD}, {0}};
    memset(o, 0, sizeof *o);
    o->host = GT_TEE_SIM;
    o->policy = GT_SGX_KEYPOLICY_MRENCLAVE;
    o->action = argv[1];
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        gt_err e = c == '?' ? gt_errf(GT_E_ARG, "unknown option") : option(o, c, optarg);
        if (!gt_is_ok(e)) {
            return gt_cli_usage("enclave", "%s", e.msg);
        }
    }
    bool quote = strcmp(o->action, "quote") == 0;
    if (argc - optind != (quote ? 0 : 1)) {
        return gt_cli_usage("enclave", quote ? "quote takes no file" : "%s takes one file",
                            o->action);
    }
    o->input = quote ? NULL : argv[optind];
    if (o->platform == NULL || o->sigstruct == NULL || o->out == NULL) {
        return gt_cli_usage("enclave", "%s needs --platform DIR, --sigstruct SIG and --out FILE",
                            o->action);
    }
    return GT_EXIT_OK;
}

// The enclave the SIGSTRUCT names, if its signature holds.
static gt_err signed_identity(const char *path, gt_sgx_identity *id)
{
    gt_buf b = {0};
    gt_sgx_sigstruct s;
    gt_sgx_sigstruct_checks c;
    size_t off = 0;
    gt_err err;
    GT_TRY_GOTO(err, gt_file_read_all(path, GT_SGX_IMAGE_MAX_BYTES, &b), out);
    GT_TRY_GOTO(err, gt_sgx_sigstruct_find(b.data, b.len, &s, &off), out);
    GT_TRY_GOTO(err, gt_sgx_sigstruct_verify(&s, &c), out);
    GT_ENSURE_GOTO(err, c.all_ok, out, GT_E_AUTH, "%s: the SIGSTRUCT does not verify", path);
    memset(id, 0, sizeof *id);
    memcpy(id->mrenclave, s.enclavehash, GT_SGX_HASH_BYTES);
    memcpy(id->mrsigner, c.mrsigner, GT_SGX_HASH_BYTES);
    id->isvprodid = s.isvprodid;
    id->isvsvn = s.isvsvn;
    id->attributes = s.attributes;
    id->attributes.flags |= GT_SGX_ATTR_INIT;
    id->miscselect = s.miscselect;
    id->debug = (s.attributes.flags & GT_SGX_ATTR_DEBUG) != 0;
out:
    gt_buf_free_nowipe(&b);
    return err;
}

static void secs_of(const gt_sgx_identity *id, gt_sgx_secs_identity *secs)
{
    memset(secs, 0, sizeof *secs);
    memcpy(secs->mrenclave, id->mrenclave, GT_SGX_HASH_BYTES);
    memcpy(secs->mrsigner, id->mrsigner, GT_SGX_HASH_BYTES);
    secs->isvprodid = id->isvprodid;
    secs->isvsvn = id->isvsvn;
    secs->attributes = id->attributes;
    secs->miscselect = id->miscselect;
}

static gt_err run_seal(const keys_options *o, const gt_sgx_platform *pf,
                       const gt_sgx_secs_identity *secs)
{
    gt_buf in = {0}, out = {0};
    gt_sgx_seal_params p = {.keypolicy = o->policy};
    gt_err err;
    GT_TRY_GOTO(err, gt_file_read_all(o->input, GT_SGX_SEAL_MAX_BYTES, &in), done);
    bool unseal = strcmp(o->action, "unseal") == 0;
    if (unseal) {
        GT_TRY_GOTO(err, gt_sgx_unseal(&out, NULL, pf, secs, in.data, in.len), done);
    } else {
        GT_TRY_GOTO(err, gt_sgx_seal(&out, pf, secs, &p, in.data, in.len, NULL, 0), done);
    }
    GT_TRY_GOTO(err, gt_file_write_atomic(o->out, out.data, out.len, 0600), done);
    fprintf(stderr, "%s %s -> %s (%zu bytes)\n", unseal ? "unsealed" : "sealed", o->input,
            o->out, out.len);
done:
    gt_buf_free(&in);
    gt_buf_free(&out);
    return err;
}

static gt_err run_quote(const keys_options *o, const gt_sgx_platform *pf,
                        const gt_sgx_identity *id)
{
    uint8_t rd[GT_REPORT_DATA_BYTES] = {0};
    size_t n = 0;
    if (o->report_data != NULL) {
        GT_TRY(gt_err_wrap(gt_hex_decode(rd, sizeof rd, &n, o->report_data), "--report-data"));
    }
    gt_collect_params host = {.type = o->host};
    gt_vqe *q = NULL;
    gt_evidence ev = {0};
    gt_err err;
    GT_TRY_GOTO(err, gt_vqe_open(&q, o->platform, pf, &host), done);
    GT_TRY_GOTO(err, gt_vqe_quote(q, id, rd, &ev), done);
    GT_TRY_GOTO(err, gt_evidence_save_file(&ev, o->out), done);
    fprintf(stderr, "quote (vsgx, host %s%s) -> %s\n", gt_tee_type_name(o->host),
            o->host == GT_TEE_SIM ? ", " GT_INSECURE_SIMULATION : "", o->out);
done:
    gt_vqe_free(q);
    gt_evidence_free(&ev);
    return err;
}

int gt_cli_enclave_keys(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage(stdout);
        return GT_EXIT_OK;
    }
    keys_options o;
    int rc = parse(argc, argv, &o);
    if (rc != GT_EXIT_OK) {
        return rc;
    }
    gt_sgx_identity id;
    gt_sgx_secs_identity secs;
    gt_sgx_platform pf;
    gt_sgx_platform_options po = {.host = o.host};
    gt_err err = signed_identity(o.sigstruct, &id);
    if (gt_is_ok(err)) {
        err = gt_sgx_platform_open(o.platform, &po, &pf, NULL);
    }
    if (gt_is_ok(err)) {
        secs_of(&id, &secs);
        err = strcmp(o.action, "quote") == 0 ? run_quote(&o, &pf, &id) : run_seal(&o, &pf, &secs);
        gt_secure_zero(&pf, sizeof pf);
    }
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("enclave", err);
}
