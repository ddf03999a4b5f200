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
           "  --listen HOST:PORT  address to serve on (default: the agreement's endpoint)\n"
           "  --policy FILE       appraisal policy for trainers (default: docs/attestation.md)\n"
           "  --ledger FILE       decision ledger (default: DIR/ledger.log)\n"
           "  --tee TYPE          how this holder proves itself: sim (default), tdx or snp\n"
           "  --sim-root DIR      simulated platform root (sim evidence; see gputravel attest)\n"
           "  --root FILE         trust input for trainers' evidence (repeatable; for sim: the\n"
           "                      sim root's root-pub.pem)\n"
           "  -h, --help          this help\n");
}

typedef struct {
    const char *dataset, *key, *agreement, *name, *listen, *policy, *ledger, *sim_root;
    gt_tee_type tee;
    const char *roots[MAX_ROOTS];
    int root_count;
} options;

static int parse_options(int argc, char **argv, options *o)
{
    static const struct option opts[] = {
        {"dataset", required_argument, NULL, 'd'}, {"key", required_argument, NULL, 'k'},
        {"agreement", required_argument, NULL, 'a'}, {"name", required_argument, NULL, 'n'},
        {"listen", required_argument, NULL, 'l'}, {"policy", required_argument, NULL, 'p'},
        {"ledger", required_argument, NULL, 'L'}, {"tee", required_argument, NULL, 't'},
        {"sim-root", required_argument, NULL, 's'}, {"root", required_argument, NULL, 'r'},
        {0}};
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
    if (!o->dataset || !o->key || !o->agreement) {
        return gt_cli_usage("holder", "--dataset, --key and --agreement are required");
    }
    if (optind != argc) {
        return gt_cli_usage("holder", "unexpected argument '%s'", argv[optind]);
    }
    return 0;
}

int gt_cmd_holder(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    options o = {0};
    int rc = parse_options(argc, argv, &o);
    if (rc != 0) {
        return rc;
    }
    gt_holder_keys keys;
    gt_agreement agreement;
    gt_policy *policy = NULL;
    gt_ledger *ledger = NULL;
    gt_holder_agent *agent = NULL;
    gt_listener *listener = NULL;
    gt_buf root_bytes[MAX_ROOTS] = {{0}};
    gt_attest_file roots[MAX_ROOTS];
    char ledger_path[4200];
    gt_err err = GT_OK;
    memset(&keys, 0, sizeof keys);
    GT_TRY_GOTO(err, gt_keydir_load(o.key, &keys), out);
    GT_TRY_GOTO(err, gt_agreement_load(&agreement, o.agreement), out);
    const gt_agreement_holder *me = NULL;
    for (uint32_t i = 0; i < agreement.holder_count && me == NULL; i++) {
        bool by_name = o.name != NULL && strcmp(agreement.holders[i].name, o.name) == 0;
        bool by_key = o.name == NULL && gt_ct_equal(agreement.holders[i].identity_key,
                                                    keys.holder_pub, GT_ED25519_PUBLIC_BYTES);
        me = by_name || by_key ? &agreement.holders[i] : NULL;
    }
    GT_ENSURE_GOTO(err, me != NULL, out, GT_E_ARG,
                   o.name ? "holder '%s' is not in the agreement"
                          : "%sno holder in the agreement has this key folder's identity key",
                   o.name ? o.name : "");
    if (o.policy != NULL) {
        GT_TRY_GOTO(err, gt_policy_load_file(&policy, o.policy), out);
    } else {
        GT_TRY_GOTO(err, gt_policy_default(&policy), out);
    }
    for (int i = 0; i < o.root_count; i++) {
        GT_TRY_GOTO(err, gt_file_read_all(o.roots[i], 1 << 20, &root_bytes[i]), out);
        roots[i] = (gt_attest_file){o.roots[i], gt_buf_span(&root_bytes[i])};
    }
    if (o.ledger == NULL) {
        GT_TRY_GOTO(err, gt_path_join(ledger_path, sizeof ledger_path, o.key, "ledger.log"), out);
        o.ledger = ledger_path;
    }
    GT_TRY_GOTO(err, gt_ledger_open(&ledger, o.ledger, keys.holder_sec), out);
    gt_tee_attestor att = {
        .collect = {.type = o.tee, .sim_root = o.sim_root}, .policy = policy, .roots = roots,
        .root_count = (size_t)o.root_count, .agreement = &agreement,
        .peer_role = GT_PEER_TRAINER,
    };
    gt_holder_agent_config cfg = {
        .dataset_dir = o.dataset, .keys = &keys, .agreement = &agreement, .name = me->name,
        .ledger = ledger, .ledger_path = o.ledger, .attestor = gt_tee_attestor_bind(&att),
        .peer_summary = att.peer_summary,
    };
    GT_TRY_GOTO(err, gt_holder_agent_create(&agent, &cfg), out);
    const char *addr = o.listen ? o.listen : me->endpoint;
    GT_TRY_GOTO(err, gt_listener_open(&listener, addr), out);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    printf("holder %s: serving dataset %s on %s (ledger %s)%s\n", me->name, o.dataset, addr,
           o.ledger, o.tee == GT_TEE_SIM ? "; proving itself with insecure-simulation evidence"
                                         : "");
    fflush(stdout);
    GT_TRY_GOTO(err, gt_holder_agent_serve(agent, listener, &stop_requested), out);
    gt_holder_agent_stats st;
    gt_holder_agent_get_stats(agent, &st);
    printf("holder %s: stopped after %llu grant(s), %llu refusal(s), %llu tokens released\n",
           me->name, (unsigned long long)st.grants, (unsigned long long)st.refusals,
           (unsigned long long)st.tokens_released);
out:
    gt_listener_close(listener);
    gt_holder_agent_free(agent);
    gt_ledger_close(ledger);
    gt_policy_free(policy);
    for (int i = 0; i < MAX_ROOTS; i++) {
        gt_buf_free_nowipe(&root_bytes[i]);
    }
    gt_holder_keys_wipe(&keys);
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("holder", err);
}
