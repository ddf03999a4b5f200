// gputravel holder: the data holder's long-running agent.
#include "cli.h"

#include <gputravel/holder.h>

#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROOTS 8

static volatile int stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void usage(void)
{
    printf("usage: gputravel holder --dataset DSDIR --key DIR --agreement A.json [options]\n"
           "\n"
           "Serves this holder's sealed dataset to trainers that prove, with TEE evidence bound\n"
           "to the TLS session and the agreement, that they run what the agreement accepts.\n"
           "Every release and refusal goes to a hash-chained ledger signed with the holder key\n"
           "('gputravel ledger verify' checks it). Runs until SIGINT or SIGTERM.\n"
           "\n"
           "  --dataset DSDIR     sealed dataset (gputravel seal)\n"
           "  --key DIR           holder key folder (gputravel keygen)\n"
           "  --agreement FILE    training agreement (docs/agreement.md)\n"
           "  --name NAME         this holder's name in the agreement (default: the holder\n"
           "                      whose identity key is this key folder's)\n"
           "  --listen HOST:PORT  address to serve on (default: the agreement's endpoint);\n"
           "                      fd:N serves on inherited descriptor N, a listening TCP socket\n"
           "                      its parent bound (the port is never free to be taken)\n"
           "  --policy FILE       appraisal policy for trainers (docs/attestation.md; default\n"
           "                      and unless it relaxes them: sim, debug TEEs and Intel TCB\n"
           "                      statuses other than UpToDate refused)\n"
           "  --ledger FILE       decision ledger (default: DIR/ledger.log). Uses and budget are\n"
           "                      counted over the whole ledger, across agreements\n"
           "  --rollback-guard SPEC  anchor the ledger's head outside this disk, and refuse to\n"
           "                      start on a ledger cut back, deleted or replaced (docs/ledger.md):\n"
           "                      tpm:TCTI (a TPM 2.0 NV counter: tpm:device:/dev/tpmrm0,\n"
           "                      tpm:swtpm:host=H,port=P; tpm@0xINDEX:TCTI for another index),\n"
           "                      sim:FILE (insecure-simulation) or none (default)\n"
           "  --witnesses         serve only after the agreement's other holders countersigned\n"
           "                      this ledger's head (through the trainer) in the session: a\n"
           "                      ledger rolled back behind a head they witnessed is refused,\n"
           "                      with no TPM (docs/ledger.md \"Witnesses\")\n"
           "  --enclave-platform PFDIR  enclave mode (docs/holder-enclave.md): the dataset key\n"
           "                      (DIR/" GT_HOLDER_ENCLAVE_SEALED_KEY ", from 'gputravel holder\n"
           "                      enclave-keys import') and every release decision live in the\n"
           "                      holder enclave, run on this enclave platform; this process\n"
           "                      never holds the dataset key, a chunk key or plaintext. Only\n"
           "                      TRAVEL to an attested devd is served (the chunk key wrapped to\n"
           "                      devd); FETCH and trainer-served trips are refused\n"
           "  --enclave EDIR      the holder enclave's holder.bin/holder.sig (default: enclaves/\n"
           "                      beside this program)\n"
           "  --tee TYPE          how this holder proves itself: sim (default), tdx or snp\n"
           "  --sim-root DIR      simulated platform root (sim evidence; see gputravel attest)\n"
           "  --root FILE         trust input for trainers' evidence (repeatable; for sim: the\n"
           "                      sim root's root-pub.pem)\n"
           "  --config FILE       more options from FILE: a JSON object whose keys are these\n"
           "                      long options without -- (a string or number each, a list\n"
           "                      for --root, true for a flag), e.g. {\"dataset\": \"ds\",\n"
           "                      \"key\": \"keys\", \"root\": [\"root-pub.pem\"]}; unknown keys\n"
           "                      and wrong types are errors; the command line overrides it\n"
           "  -h, --help          this help\n");
}

typedef struct {
    const char *dataset, *key, *agreement, *name, *listen, *policy, *ledger, *sim_root;
    const char *rollback_guard;
    const char *enclave_platform, *enclave;
    bool witnesses;
    gt_tee_type tee;
    const char *roots[MAX_ROOTS];
    int root_count;
} options;

// The options, and the keys of a --config file: the same names.
static const struct option opts[] = {
    {"dataset", required_argument, NULL, 'd'}, {"key", required_argument, NULL, 'k'},
    {"agreement", required_argument, NULL, 'a'}, {"name", required_argument, NULL, 'n'},
    {"listen", required_argument, NULL, 'l'}, {"policy", required_argument, NULL, 'p'},
    {"ledger", required_argument, NULL, 'L'}, {"tee", required_argument, NULL, 't'},
    {"sim-root", required_argument, NULL, 's'}, {"root", required_argument, NULL, 'r'},
    {"rollback-guard", required_argument, NULL, 'g'}, {"witnesses", no_argument, NULL, 'w'},
    {"enclave-platform", required_argument, NULL, 'P'}, {"enclave", required_argument, NULL, 'E'},
    {0}};
static const char *const repeatable[] = {"root", NULL};

static int parse_options(int argc, char **argv, options *o)
{
    o->tee = GT_TEE_SIM;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': o->dataset = optarg; break;
        case 'k': o->key = optarg; break;
        case 'a': o->agreement = optarg; break;
        case 'n': o->name = optarg; break;
        case 'l': o->listen = optarg; break;
        case 'p': o->policy = optarg; break;
        case 'L': o->ledger = optarg; break;
        case 's': o->sim_root = optarg; break;
        case 'g': o->rollback_guard = optarg; break;
        case 'w': o->witnesses = true; break;
        case 'P': o->enclave_platform = optarg; break;
        case 'E': o->enclave = optarg; break;
        case 't':
            if (!gt_is_ok(gt_tee_type_parse(optarg, &o->tee)) ||
                (o->tee != GT_TEE_SIM && o->tee != GT_TEE_TDX && o->tee != GT_TEE_SNP)) {
                return gt_cli_usage("holder", "--tee must be sim, tdx or snp");
            }
            break;
        case 'r':
            if (o->root_count == MAX_ROOTS) {
                return gt_cli_usage("holder", "at most %d --root files", MAX_ROOTS);
            }
            o->roots[o->root_count++] = optarg;
            break;
        default: return gt_cli_usage("holder", "unknown option");
        }
    }
    if (o->enclave != NULL && o->enclave_platform == NULL) {
        return gt_cli_usage("holder", "--enclave needs --enclave-platform (enclave mode)");
    }
    if (!o->dataset || !o->key || !o->agreement) {
        return gt_cli_usage("holder", "--dataset, --key and --agreement are required");
    }
    if (optind != argc) {
        return gt_cli_usage("holder", "unexpected argument '%s'", argv[optind]);
    }
    // Every kind of evidence is checked against a root given here: without one, every trainer
    // would be refused, one by one, long after the start.
    if (o->root_count == 0) {
        return gt_cli_usage("holder", "no --root: this holder could not accept any trainer's "
                                      "evidence. Give the root it is checked against (sim: the "
                                      "sim root's root-pub.pem, see gputravel attest; tdx/snp: "
                                      "the vendor's root certificate)");
    }
    return 0;
}

// What a serving holder holds until it stops (freed by holder_free).
typedef struct {
    gt_holder_keys keys;
    gt_agreement agreement;
    const gt_agreement_holder *me;
    gt_policy *policy;
    gt_rollback_guard *guard;
    gt_ledger *ledger;
    gt_holder_agent *agent;
    gt_holder_enclave *enclave;  // enclave mode
    gt_listener *listener;
    gt_buf root_bytes[MAX_ROOTS];
    gt_attest_file roots[MAX_ROOTS];
    char ledger_path[4200];
    gt_tee_attestor att;
} holder_run;

// This holder's entry in the agreement: by --name, else by the key folder's identity key.
static gt_err find_me(const options *o, holder_run *r)
{
    for (uint32_t i = 0; i < r->agreement.holder_count && r->me == NULL; i++) {
        const gt_agreement_holder *h = &r->agreement.holders[i];
        bool by_name = o->name != NULL && strcmp(h->name, o->name) == 0;
        bool by_key = o->name == NULL &&
                      gt_ct_equal(h->identity_key, r->keys.holder_pub, GT_ED25519_PUBLIC_BYTES);
        r->me = by_name || by_key ? h : NULL;
    }
    GT_ENSURE(r->me != NULL, GT_E_ARG,
              o->name ? "holder '%s' is not in the agreement"
                      : "%sno holder in the agreement has this key folder's identity key",
              o->name ? o->name : "");
    return GT_OK;
}

// The dataset's manifest is there, this holder's, and the one the agreement names for it (the
// agent checks every chunk as well, once the ledger is open).
static gt_err dataset_precheck(const options *o, const holder_run *r)
{
    gt_manifest m;
    GT_TRY(gt_manifest_load(&m, o->dataset));
    gt_err err = GT_OK;
    if (!gt_ct_equal(m.holder_pub, r->keys.holder_pub, GT_ED25519_PUBLIC_BYTES)) {
        char got[2 * GT_ED25519_PUBLIC_BYTES + 1], want[2 * GT_ED25519_PUBLIC_BYTES + 1];
        gt_hex_encode(got, sizeof got, m.holder_pub, sizeof m.holder_pub);
        gt_hex_encode(want, sizeof want, r->keys.holder_pub, sizeof r->keys.holder_pub);
        err = gt_errf(GT_E_AUTH, "dataset %s is signed by holder %.16s..., not by this key "
                      "folder's %.16s... (%s)", o->dataset, got, want, o->key);
    } else if (!gt_ct_equal(m.dataset_id, r->me->dataset_id, GT_DATASET_ID_BYTES)) {
        err = gt_errf(GT_E_POLICY, "dataset %s is not the one the agreement names for '%s'",
                      o->dataset, r->me->name);
    }
    gt_manifest_free(&m);
    return err;
}

// Enclave mode: the identity key from the folder (the ledger's), the dataset key only sealed,
// opened inside the holder enclave.
static gt_err open_enclave(const options *o, holder_run *r)
{
    GT_TRY(gt_keydir_load_identity(o->key, &r->keys));
    char path[4200];
    GT_TRY(gt_path_join(path, sizeof path, o->key, GT_HOLDER_ENCLAVE_SEALED_KEY));
    gt_buf sealed = {0};
    gt_err err = gt_file_read_all(path, 4096, &sealed);
    if (err.code == GT_E_NOTFOUND) {
        return gt_errf(GT_E_NOTFOUND, "%s: missing (enclave mode needs the key sealed by "
                       "'gputravel holder enclave-keys import')", path);
    }
    GT_TRY(err);
    err = gt_cli_holder_enclave_start(&r->enclave, o->enclave, o->enclave_platform, o->sim_root,
                                      "");
    if (gt_is_ok(err)) {
        err = gt_holder_enclave_open_key(r->enclave, sealed.data, sealed.len);
    }
    gt_buf_free_nowipe(&sealed);
    return err;
}

// Keys, agreement, policy, trust roots, the dataset's manifest and the listener; then the
// ledger and the agent.
static gt_err open_agent(options *o, holder_run *r)
{
    if (o->enclave_platform != NULL) {
        GT_TRY(open_enclave(o, r));
    } else {
        GT_TRY(gt_keydir_load(o->key, &r->keys));
    }
    GT_TRY(gt_agreement_load(&r->agreement, o->agreement));
    GT_TRY(find_me(o, r));
    // Named by enclave: the trainer will ask for a quote of the holder enclave; without enclave
    // mode there is none, and it would refuse this holder after the handshake.
    GT_ENSURE(!r->me->enclave.present || r->enclave != NULL, GT_E_POLICY,
              "the agreement names holder %s by its enclave (holders[].enclave): run it in "
              "enclave mode (--enclave-platform PFDIR, after 'gputravel holder enclave-keys "
              "import')", r->me->name);
    if (o->policy != NULL) {
        GT_TRY(gt_policy_load_file(&r->policy, o->policy));
    } else {
        GT_TRY(gt_policy_default(&r->policy));
    }
    for (int i = 0; i < o->root_count; i++) {
        GT_TRY(gt_file_read_all(o->roots[i], 1 << 20, &r->root_bytes[i]));
        r->roots[i] = (gt_attest_file){o->roots[i], gt_buf_span(&r->root_bytes[i])};
    }
    // What makes a start fail is checked before the ledger is opened: a holder that cannot
    // serve (no dataset, another one than the agreement's, its port taken) writes no genesis.
    GT_TRY(dataset_precheck(o, r));
    GT_TRY(gt_listener_open(&r->listener, o->listen ? o->listen : r->me->endpoint));
    if (o->ledger == NULL) {
        GT_TRY(gt_path_join(r->ledger_path, sizeof r->ledger_path, o->key, "ledger.log"));
        o->ledger = r->ledger_path;
    }
    GT_TRY(gt_rollback_guard_open(&r->guard, o->rollback_guard ? o->rollback_guard : "none"));
    GT_TRY(gt_ledger_open_guarded(&r->ledger, o->ledger, r->keys.holder_sec, r->guard));
    r->att = (gt_tee_attestor){
        .collect = {.type = o->tee, .sim_root = o->sim_root}, .policy = r->policy,
        .roots = r->roots, .root_count = (size_t)o->root_count, .agreement = &r->agreement,
        .peer_role = GT_PEER_TRAINER,
    };
    gt_holder_agent_config cfg = {
        .dataset_dir = o->dataset, .keys = &r->keys, .agreement = &r->agreement,
        .name = r->me->name, .ledger = r->ledger, .ledger_path = o->ledger,
        .attestor = gt_tee_attestor_bind(&r->att), .tee = &r->att,
        .require_witnesses = o->witnesses, .enclave = r->enclave,
    };
    return gt_holder_agent_create(&r->agent, &cfg);
}

// Serves until SIGINT or SIGTERM; says so once it listens (tests and the demo wait for it).
static gt_err run(options *o, holder_run *r)
{
    GT_TRY(open_agent(o, r));
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    printf("holder %s: serving dataset %s on %s (port %d; ledger %s)%s\n", r->me->name,
           o->dataset, o->listen ? o->listen : r->me->endpoint, gt_listener_port(r->listener),
           o->ledger,
           o->tee == GT_TEE_SIM ? "; proving itself with insecure-simulation evidence" : "");
    if (r->enclave != NULL) {
        printf("holder %s: enclave mode: the dataset key and the release decision are in the "
               "holder enclave (INSECURE SIMULATION); chunk keys go only wrapped to an attested "
               "devd\n", r->me->name);
    }
    char modes[96];
    gt_agreement_transfer_list(&r->agreement, modes, sizeof modes);
    printf("holder %s: serves only the agreement's transfer modes: %s\n", r->me->name, modes);
    if (gt_rollback_guard_kind(r->guard) == GT_ROLLBACK_NONE) {
        printf("holder %s: ledger head not anchored (no --rollback-guard: a ledger cut back, "
               "deleted or replaced would go unnoticed)\n", r->me->name);
    } else {
        printf("holder %s: ledger head anchored by rollback guard %s\n", r->me->name,
               gt_rollback_guard_name(r->guard));
    }
    fflush(stdout);
    return gt_holder_agent_serve(r->agent, r->listener, &stop_requested);
}

static void print_stats(const holder_run *r)
{
    gt_holder_agent_stats st;
    gt_holder_agent_get_stats(r->agent, &st);
    printf("holder %s: stopped after %llu grant(s), %llu refusal(s), %llu tokens released; "
           "%llu connection(s) refused before attesting\n",
           r->me->name, (unsigned long long)st.grants, (unsigned long long)st.refusals,
           (unsigned long long)st.tokens_released, (unsigned long long)st.handshake_failures);
}

static void holder_free(holder_run *r)
{
    gt_listener_close(r->listener);
    gt_holder_agent_free(r->agent);
    gt_holder_enclave_stop(r->enclave);
    gt_ledger_close(r->ledger);
    gt_rollback_guard_close(r->guard);  // after the ledger: its close may end a batch
    gt_policy_free(r->policy);
    for (int i = 0; i < MAX_ROOTS; i++) {
        gt_buf_free_nowipe(&r->root_bytes[i]);
    }
    gt_holder_keys_wipe(&r->keys);
    free(r);
}

int gt_cmd_holder(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "status") == 0) {
        return gt_cli_holder_status(argc - 1, argv + 1);  // cmd_holder_status.c
    }
    if (argc > 1 && strcmp(argv[1], "enclave-keys") == 0) {
        return gt_cli_holder_enclave_keys(argc - 1, argv + 1);  // cmd_holder_enclave.c
    }
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    gt_cli_config conf;
    int rc = gt_cli_config_expand("holder", opts, repeatable, &argc, &argv, &conf);
    if (rc != 0) {
        return rc;
    }
    options o = {0};
    rc = parse_options(argc, argv, &o);
    if (rc != 0) {
        gt_cli_config_free(&conf);
        return rc;
    }
    holder_run *r = calloc(1, sizeof *r);
    if (r == NULL) {
        gt_cli_config_free(&conf);
        return gt_cli_fail("holder", gt_errf(GT_E_NOMEM, "out of memory"));
    }
    gt_err err = run(&o, r);
    if (gt_is_ok(err)) {
        print_stats(r);
    }
    holder_free(r);
    gt_cli_config_free(&conf);  // o's strings may be the file's
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("holder", err);
}
