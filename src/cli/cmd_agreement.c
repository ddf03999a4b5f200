// gputravel agreement init | check: the contract a newcomer can write without guessing, and a
// check that says everything wrong with one before any party starts.
#include "agreement_doc.h"
#include "cli.h"

#include <gputravel/attest.h>
#include <gputravel/holder.h>
#include <gputravel/seal.h>
#include <gputravel/travel.h>

#include <getopt.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define MAX_PROBLEMS 64

static void usage(void)
{
    printf("usage: gputravel agreement init --holder NAME=KEYDIR,DATASET,HOST:PORT ... --out FILE\n"
           "                                [options]\n"
           "       gputravel agreement check A.json [--key DIR] [--dataset DSDIR] [--name NAME]\n"
           "                                [--policy FILE] [--sim-root DIR]\n"
           "\n"
           "init writes a complete training agreement (docs/agreement.md) as pure JSON (the\n"
           "explanation of every field goes to stderr): each holder's identity_key and\n"
           "recipient_key from its key folder, its dataset_id and the vocabulary from its sealed\n"
           "dataset's signed manifest, its whole dataset as token_budget, and this build's\n"
           "measurement as the trainer's and the device's accepted measurement.\n"
           "  --holder NAME=KEYDIR,DATASET,HOST:PORT   one per holder (repeatable, in order)\n"
           "  --out FILE          where to write it ('-': stdout); an existing file is kept\n"
           "                      unless --force\n"
           "  --name NAME         the agreement's name (default collab)\n"
           "  --steps N --batch N --seq N --learning-rate X    training (200, 8, 64, 0.001)\n"
           "  --layers N --channels N --heads N --max-seq N    model (4, 128, 4, 64)\n"
           "  --budget N          every holder's token_budget (default: its dataset's tokens)\n"
           "  --max-uses N        max_uses_per_chunk (default 1)\n"
           "  --transfer MODE     an allowed transfer mode (repeatable; default: the agreement\n"
           "                      default, travel and conventional-keyrelease)\n"
           "  --loss-only         let only losses out (default: a checkpoint sealed to every\n"
           "                      holder that has a recipient key)\n"
           "  --no-simulation     allow_simulation false (real TEEs; their measurements must\n"
           "                      then be listed: add them to the file)\n"
           "  --any-measurement   leave the measurement lists empty (simulation only)\n"
           "  --ranks N           trainer.ranks: data-parallel trainer ranks (default 1)\n"
           "  --holder-enclave NAME=SIG[,mrenclave]   name holder NAME by its enclave: MRSIGNER,\n"
           "                      ISVPRODID and (as min_isvsvn) ISVSVN from the SIGSTRUCT SIG\n"
           "                      (the holder enclave's holder.sig, or a file holding one; its\n"
           "                      signature must verify); ',mrenclave' pins its MRENCLAVE too.\n"
           "                      NAME=mrsigner:HEX or NAME=mrenclave:HEX: that value alone.\n"
           "                      The trainer then asks that holder for nothing until a quote\n"
           "                      of that enclave verifies (docs/holder-enclave.md)\n"
           "\n"
           "check validates A.json strictly and prints its full hash and every problem found:\n"
           "the document's shape and rules, each endpoint (resolvable, a valid port), the\n"
           "transfer modes and the measurement lists against this build; with --key, this key\n"
           "folder's identity and recipient keys; with --dataset, the dataset id, its signer,\n"
           "its vocabulary against the model and its chunk sizes against the budget (a chunk\n"
           "larger than the budget is never released); with --policy, that the policy parses\n"
           "and admits a trainer of this build in simulation when the agreement allows it.\n"
           "A holder named by enclave whose --key folder is not enclave-sealed is a problem.\n"
           "Exit 0 when a run could start (warnings allowed), 1 with the list of problems.\n"
           "  --name NAME         the holder --key and --dataset belong to (default: the holder\n"
           "                      with the key folder's identity key, or the dataset's id)\n"
           "  --sim-root DIR      simulated platform root (for the --policy check)\n"
           "  -h, --help          this help\n");
}

// ---- init -------------------------------------------------------------------------------------

typedef struct {
    const char *out, *name;
    bool force, loss_only, no_sim, any_measurement;
    uint32_t steps, batch, seq, layers, channels, heads, max_seq, max_uses;
    uint32_t ranks;  // trainer.ranks
    double lr;
    uint64_t budget;  // 0: each dataset's tokens
    uint32_t transfers;
    const char *holders[GT_AGREEMENT_MAX_HOLDERS];
    uint32_t holder_count;
    const char *enclaves[GT_AGREEMENT_MAX_HOLDERS];  // --holder-enclave NAME=...
    uint32_t enclave_count;
} init_options;

static bool plain_name(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.')) {
            return false;
        }
    }
    return n > 0 && n < GT_AGREEMENT_NAME_BYTES;
}

// NAME=KEYDIR,DATASET,HOST:PORT -> the holder's entry, from its key folder and its manifest.
static gt_err holder_from_spec(const char *spec, const init_options *o, gt_cli_agreement_holder *h,
                               uint32_t *vocab)
{
    char buf[4096];
    GT_ENSURE(strlen(spec) < sizeof buf, GT_E_ARG, "--holder: too long");
    snprintf(buf, sizeof buf, "%s", spec);
    char *eq = strchr(buf, '='), *c1 = eq ? strchr(eq, ',') : NULL;
    char *c2 = c1 ? strrchr(c1 + 1, ',') : NULL;
    GT_ENSURE(eq != NULL && c1 != NULL && c2 != NULL && c2 > c1, GT_E_ARG,
              "--holder '%.60s': expected NAME=KEYDIR,DATASET,HOST:PORT", spec);
    *eq = *c1 = *c2 = '\0';
    const char *name = buf, *keydir = eq + 1, *dataset = c1 + 1, *endpoint = c2 + 1;
    GT_ENSURE(plain_name(name), GT_E_ARG,
              "--holder: name '%.60s' must have 1..63 of [A-Za-z0-9._-]", name);
    const char *colon = strrchr(endpoint, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    GT_ENSURE(colon != NULL && colon > endpoint && end != NULL && *end == '\0' && port > 0 &&
                  port < 65536 && strlen(endpoint) < sizeof h->endpoint,
              GT_E_ARG, "--holder %s: endpoint '%.60s' must be HOST:PORT (port 1..65535)", name,
              endpoint);
    snprintf(h->name, sizeof h->name, "%.63s", name);
    snprintf(h->endpoint, sizeof h->endpoint, "%.127s", endpoint);
    GT_TRY(gt_err_wrap(gt_holder_pub_load(keydir, h->identity_key),
                       "--holder %s: key folder %s", name, keydir));
    char rpath[4200];
    GT_TRY(gt_path_join(rpath, sizeof rpath, keydir, GT_KEYDIR_RECIPIENT_PUBLIC));
    if (gt_path_exists(rpath)) {
        GT_TRY(gt_err_wrap(gt_recipient_pub_load(keydir, h->recipient_key), "--holder %s", name));
        h->has_recipient_key = true;
    }
    gt_manifest m;
    GT_TRY(gt_err_wrap(gt_manifest_load(&m, dataset), "--holder %s", name));
    gt_err err = GT_OK;
    if (!gt_ct_equal(m.holder_pub, h->identity_key, sizeof h->identity_key)) {
        err = gt_errf(GT_E_ARG, "--holder %s: dataset %s is signed by another key than key "
                                "folder %s's (seal it with --key %s)", name, dataset, keydir, keydir);
    }
    memcpy(h->dataset_id, m.dataset_id, sizeof h->dataset_id);
    h->token_budget = o->budget ? o->budget : m.token_count;
    h->max_uses_per_chunk = o->max_uses;
    *vocab = m.vocab_size;
    gt_manifest_free(&m);
    GT_ENSURE(h->token_budget > 0, GT_E_ARG, "--holder %s: dataset %s holds no tokens", name,
              dataset);
    return err;
}

// --holder-enclave NAME=SIG[,mrenclave] | NAME=mrsigner:HEX | NAME=mrenclave:HEX
static gt_err enclave_from_spec(const char *spec, gt_cli_agreement_holder *holders, uint32_t n)
{
    char buf[4096];
    GT_ENSURE(strlen(spec) < sizeof buf, GT_E_ARG, "--holder-enclave: too long");
    snprintf(buf, sizeof buf, "%s", spec);
    char *eq = strchr(buf, '=');
    GT_ENSURE(eq != NULL && eq[1] != '\0', GT_E_ARG,
              "--holder-enclave '%.60s': expected NAME=SIG[,mrenclave], NAME=mrsigner:HEX or "
              "NAME=mrenclave:HEX", spec);
    *eq = '\0';
    const char *value = eq + 1;
    gt_cli_agreement_holder *h = NULL;
    for (uint32_t i = 0; i < n && h == NULL; i++) {
        h = strcmp(holders[i].name, buf) == 0 ? &holders[i] : NULL;
    }
    GT_ENSURE(h != NULL, GT_E_ARG, "--holder-enclave %.63s: no --holder of that name", buf);
    GT_ENSURE(!h->enclave.present, GT_E_ARG, "--holder-enclave %s: given twice", h->name);
    gt_agreement_enclave *e = &h->enclave;
    if (strncmp(value, "mrsigner:", 9) == 0 || strncmp(value, "mrenclave:", 10) == 0) {
        bool signer = value[2] == 's';
        *e = (gt_agreement_enclave){.present = true, .has_mrsigner = signer,
                                    .has_mrenclave = !signer};
        return gt_err_wrap(gt_hex_decode_exact(signer ? e->mrsigner : e->mrenclave, 32,
                                               strchr(value, ':') + 1),
                           "--holder-enclave %s: 64 hex digits", h->name);
    }
    char *comma = strrchr(eq + 1, ',');
    bool pin = comma != NULL && strcmp(comma, ",mrenclave") == 0;
    if (pin) {
        *comma = '\0';
    }
    return gt_err_wrap(gt_cli_agreement_enclave_from_sig(value, pin, e), "--holder-enclave %s",
                       h->name);
}

static void explain(const gt_cli_agreement_spec *s, bool measured)
{
    if (gt_cli.quiet) {
        return;
    }
    fprintf(stderr,
            "gputravel agreement init: what the fields say (docs/agreement.md has every rule):\n"
            "  name, version      this agreement; every party must hold the file byte for byte:\n"
            "                     its SHA-256 is bound into every attestation (compare hashes)\n"
            "  model, training    the GPT-2 shapes and the run; model.vocab is the largest\n"
            "                     vocabulary of the holders' datasets (%u)\n"
            "  holders[]          identity_key: the key folder's Ed25519 key (it signs the\n"
            "                     dataset and the ledger); dataset_id: from the signed manifest;\n"
            "                     endpoint: where the holder's agent listens; token_budget: the\n"
            "                     tokens it may release in all (a hard cap: a chunk that would\n"
            "                     cross it is refused whole); max_uses_per_chunk; recipient_key:\n"
            "                     the X25519 key a sealed checkpoint is wrapped to\n"
            "  trainer, device    accepted_measurements: %s\n"
            "  allow_simulation   %s\n"
            "  transfer           %s\n"
            "  output             %s\n"
            "Check it with 'gputravel agreement check FILE --key DIR --dataset DSDIR' at each\n"
            "holder, and send every party the same file.\n",
            s->vocab,
            measured ? "this build's measurement (SHA-384 of\n"
                       "                     this executable): another build is refused"
                     : "empty: any measurement (simulation only)",
            s->allow_simulation ? "true: simulated TEEs and devices are accepted (they prove the\n"
                                  "                     protocol, not isolation); holders need a "
                                  "policy with\n                     {\"allow_simulation\": true}"
                                : "false: real TEEs only",
            s->transfers ? "the modes listed; nothing else is served"
                         : "absent: travel and conventional-keyrelease (the safe default)",
            s->sealed_checkpoint ? "the trained model, sealed to the recipients listed"
                                 : "loss_only: only losses leave the TEE");
}

static gt_err enclave_option(init_options *o, const char *value)
{
    GT_ENSURE(o->enclave_count < GT_AGREEMENT_MAX_HOLDERS, GT_E_ARG,
              "at most %d --holder-enclave", GT_AGREEMENT_MAX_HOLDERS);
    o->enclaves[o->enclave_count++] = value;
    return GT_OK;
}

static int parse_init(int argc, char **argv, init_options *o)
{
    static const struct option opts[] = {
        {"holder", required_argument, NULL, 'H'}, {"out", required_argument, NULL, 'o'},
        {"name", required_argument, NULL, 'n'}, {"force", no_argument, NULL, 'f'},
        {"steps", required_argument, NULL, 's'}, {"batch", required_argument, NULL, 'b'},
        {"seq", required_argument, NULL, 'q'}, {"learning-rate", required_argument, NULL, 'r'},
        {"layers", required_argument, NULL, 'L'}, {"channels", required_argument, NULL, 'C'},
        {"heads", required_argument, NULL, 'E'}, {"max-seq", required_argument, NULL, 'M'},
        {"budget", required_argument, NULL, 'B'}, {"max-uses", required_argument, NULL, 'u'},
        {"transfer", required_argument, NULL, 't'}, {"loss-only", no_argument, NULL, 'l'},
        {"no-simulation", no_argument, NULL, 'N'}, {"any-measurement", no_argument, NULL, 'A'},
        {"ranks", required_argument, NULL, 'R'},
        {"holder-enclave", required_argument, NULL, 'X'}, {0}};
    *o = (init_options){.name = "collab", .steps = 200, .batch = 8, .seq = 0, .layers = 4,
                        .channels = 128, .heads = 4, .max_seq = 64, .max_uses = 1, .lr = 0.001, .ranks = 1};
    int c;
    gt_err e = GT_OK;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1 && gt_is_ok(e)) {
        switch (c) {
        case 'H':
            if (o->holder_count == GT_AGREEMENT_MAX_HOLDERS) {
                return gt_cli_usage("agreement", "at most %d --holder", GT_AGREEMENT_MAX_HOLDERS);
            }
            o->holders[o->holder_count++] = optarg;
            break;
        case 'X': e = enclave_option(o, optarg); break;
        case 'o': o->out = optarg; break;
        case 'n': o->name = optarg; break;
        case 'f': o->force = true; break;
        case 's': e = gt_cli_parse_u32("--steps", optarg, 1, 100000000, &o->steps); break;
        case 'b': e = gt_cli_parse_u32("--batch", optarg, 1, 65536, &o->batch); break;
        case 'q': e = gt_cli_parse_u32("--seq", optarg, 1, 65536, &o->seq); break;
        case 'r': e = gt_cli_parse_double("--learning-rate", optarg, 1e-12, 0.999999, &o->lr);
            break;
        case 'L': e = gt_cli_parse_u32("--layers", optarg, 1, 96, &o->layers); break;
        case 'C': e = gt_cli_parse_u32("--channels", optarg, 1, 12288, &o->channels); break;
        case 'E': e = gt_cli_parse_u32("--heads", optarg, 1, 128, &o->heads); break;
        case 'M': e = gt_cli_parse_u32("--max-seq", optarg, 1, 65536, &o->max_seq); break;
        case 'B': e = gt_cli_parse_u64("--budget", optarg, 1, UINT64_MAX, &o->budget); break;
        case 'u': e = gt_cli_parse_u32("--max-uses", optarg, 1, 1000000, &o->max_uses); break;
        case 't': {
            gt_transfer_mode m;
            e = gt_transfer_mode_parse(optarg, &m);
            o->transfers |= gt_is_ok(e) ? GT_TRANSFER_BIT(m) : 0;
            break;
        }
        case 'l': o->loss_only = true; break;
        case 'N': o->no_sim = true; break;
        case 'A': o->any_measurement = true; break;
        case 'R':
            e = gt_cli_parse_u32("--ranks", optarg, 1, GT_AGREEMENT_MAX_RANKS, &o->ranks);
            break;
        default: return gt_cli_usage("agreement", "unknown option");
        }
    }
    if (!gt_is_ok(e)) {
        return gt_cli_usage("agreement", "%s", e.msg);
    }
    if (optind != argc) {
        return gt_cli_usage("agreement", "unexpected argument '%s'", argv[optind]);
    }
    if (o->holder_count == 0 || o->out == NULL) {
        return gt_cli_usage("agreement", "init needs --holder (one per holder) and --out FILE");
    }
    if (o->no_sim && o->any_measurement) {
        return gt_cli_usage("agreement", "--any-measurement needs simulation (drop "
                                         "--no-simulation)");
    }
    o->seq = o->seq ? o->seq : o->max_seq;
    if (o->seq > o->max_seq || o->channels % o->heads != 0) {
        return gt_cli_usage("agreement", o->seq > o->max_seq ? "--seq exceeds --max-seq"
                                                             : "--channels must be a multiple "
                                                               "of --heads");
    }
    return 0;
}

static gt_err run_init(const init_options *o, gt_cli_agreement_holder *holders,
                       gt_agreement *check)
{
    GT_ENSURE(plain_name(o->name), GT_E_ARG, "--name '%.60s' must have 1..63 of [A-Za-z0-9._-]",
              o->name);
    uint32_t vocab = 2;
    const char *recipients[GT_AGREEMENT_MAX_HOLDERS];
    uint32_t nrec = 0;
    for (uint32_t i = 0; i < o->holder_count; i++) {
        uint32_t v = 0;
        GT_TRY(holder_from_spec(o->holders[i], o, &holders[i], &v));
        vocab = v > vocab ? v : vocab;
        if (holders[i].has_recipient_key) {
            recipients[nrec++] = holders[i].name;
        }
    }
    for (uint32_t i = 0; i < o->enclave_count; i++) {
        GT_TRY(enclave_from_spec(o->enclaves[i], holders, o->holder_count));
    }
    gt_cli_agreement_spec s = {
        .name = o->name, .layers = o->layers, .channels = o->channels, .heads = o->heads,
        .vocab = vocab, .max_seq = o->max_seq, .init_seed = 1337, .steps = o->steps,
        .batch = o->batch, .seq = o->seq, .learning_rate = o->lr, .holders = holders,
        .holder_count = o->holder_count, .allow_simulation = !o->no_sim,
        .transfers = o->transfers, .sealed_checkpoint = !o->loss_only && nrec > 0,
        .recipients = recipients, .recipient_count = nrec, .ranks = o->ranks,
    };
    if (!o->loss_only && nrec == 0) {
        fprintf(stderr, "gputravel agreement init: note: no holder's key folder has a recipient "
                        "key, so only losses leave (output loss_only); add one with 'gputravel "
                        "keygen --out DIR --add-recipient-key'\n");
    }
    bool measured = !o->any_measurement;
    if (measured) {
        GT_TRY(gt_err_wrap(gt_sim_measure_exe(s.trainer.values[0], NULL), "this build"));
        memcpy(s.device.values[0], s.trainer.values[0], GT_MEASUREMENT_BYTES);
        s.trainer.count = s.device.count = 1;
    }
    gt_buf doc = {0};
    gt_err err = gt_cli_agreement_format(&s, &doc);
    // What we write must be what every party's parser accepts.
    if (gt_is_ok(err)) {
        err = gt_agreement_parse(check, doc.data, doc.len);
    }
    if (gt_is_ok(err)) {
        if (strcmp(o->out, "-") == 0) {
            err = fwrite(doc.data, 1, doc.len, stdout) == doc.len
                      ? GT_OK : gt_errf(GT_E_IO, "stdout: write failed");
        } else if (!o->force && gt_path_exists(o->out)) {
            err = gt_errf(GT_E_STATE, "%s exists: refusing to replace it (--force replaces it; "
                                      "every party then needs the new file)", o->out);
        } else {
            err = gt_file_write_atomic(o->out, doc.data, doc.len, 0644);
        }
    }
    gt_buf_free_nowipe(&doc);
    GT_TRY(err);
    explain(&s, measured);
    char hash[2 * GT_SHA256_BYTES + 1];
    gt_hex_encode(hash, sizeof hash, check->hash, sizeof check->hash);
    FILE *say = strcmp(o->out, "-") == 0 ? stderr : stdout;
    fprintf(say, "wrote %s: agreement %s, %u holder(s), sha256 %s\n",
            strcmp(o->out, "-") == 0 ? "(stdout)" : o->out, o->name, o->holder_count, hash);
    return GT_OK;
}

static int cmd_init(int argc, char **argv)
{
    init_options o;
    int rc = parse_init(argc, argv, &o);
    if (rc != 0) {
        return rc;
    }
    gt_cli_agreement_holder *holders = calloc(GT_AGREEMENT_MAX_HOLDERS, sizeof *holders);
    gt_agreement *check = calloc(1, sizeof *check);
    gt_err err = holders && check ? run_init(&o, holders, check)
                                  : gt_errf(GT_E_NOMEM, "out of memory");
    free(holders);
    free(check);
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("agreement", err);
}

// ---- check ------------------------------------------------------------------------------------

typedef struct {
    char problems[MAX_PROBLEMS][256];
    unsigned nproblems;
    char warnings[MAX_PROBLEMS][256];
    unsigned nwarnings;
} findings;

static void add(char list[][256], unsigned *n, const char *fmt, va_list ap)
{
    if (*n < MAX_PROBLEMS) {
        vsnprintf(list[*n], 256, fmt, ap);
        (*n)++;
    }
}

static void problem(findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(findings *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(f->problems, &f->nproblems, fmt, ap);
    va_end(ap);
}

static void warning(findings *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warning(findings *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(f->warnings, &f->nwarnings, fmt, ap);
    va_end(ap);
}

static void on_shape_problem(void *ctx, const char *p)
{
    problem(ctx, "%s", p);
}

typedef struct {
    const char *path, *key, *dataset, *name, *policy, *sim_root;
} check_options;

// HOST:PORT resolves (a numeric address, /etc/hosts or DNS) and the port is 1..65535. Whether the
// agent listens is not asked: holders start after the agreement is settled.
static void check_endpoint(findings *f, const gt_agreement_holder *h)
{
    char host[128];
    snprintf(host, sizeof host, "%s", h->endpoint);
    char *colon = strrchr(host, ':');
    *colon = '\0';  // the parser requires one
    const char *port = colon + 1, *hp = host;
    char *end = NULL;
    long p = strtol(port, &end, 10);
    if (end == port || *end != '\0' || p < 1 || p > 65535) {
        problem(f, "holder %s: endpoint %s: the port must be 1..65535", h->name, h->endpoint);
        return;
    }
    size_t n = strlen(host);
    char bare[128];
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {  // [::1]:7001
        snprintf(bare, sizeof bare, "%.*s", (int)(n - 2), host + 1);
        hp = bare;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = hp[0] ? getaddrinfo(hp, port, &hints, &res) : EAI_NONAME;
    if (rc != 0) {
        problem(f, "holder %s: endpoint %s does not resolve (%s)", h->name, h->endpoint,
                gai_strerror(rc));
    }
    if (res != NULL) {
        freeaddrinfo(res);
    }
}

static void check_measurements(findings *f, const gt_agreement *a)
{
    uint8_t me[GT_MEASUREMENT_BYTES];
    if (!gt_is_ok(gt_sim_measure_exe(me, NULL))) {
        return;
    }
    char hex[2 * GT_MEASUREMENT_BYTES + 1];
    gt_hex_encode(hex, sizeof hex, me, sizeof me);
    const gt_measurement_list *lists[] = {&a->trainer_measurements, &a->device_measurements};
    const char *what[] = {"trainer", "device"};
    for (int i = 0; i < 2; i++) {
        if (lists[i]->count == 0) {
            warning(f, "%s.accepted_measurements is empty: any %s measurement is accepted "
                       "(simulation only)", what[i], what[i]);
        } else if (!gt_measurement_allowed(lists[i], me)) {
            warning(f, "%s.accepted_measurements does not list this build (%.16s...): a %s "
                       "running this build is refused", what[i], hex, what[i]);
        }
    }
}

// This holder's entry: by --name, else by the key folder's identity key, else by the dataset id.
static const gt_agreement_holder *find_holder(findings *f, const gt_agreement *a,
                                              const check_options *o, const uint8_t *key,
                                              const uint8_t *dataset_id)
{
    if (o->name != NULL) {
        const gt_agreement_holder *h = gt_agreement_find_holder(a, o->name);
        if (h == NULL) {
            problem(f, "--name %s: no holder of that name in the agreement", o->name);
        }
        return h;
    }
    for (uint32_t i = 0; i < a->holder_count; i++) {
        const gt_agreement_holder *h = &a->holders[i];
        if ((key != NULL && gt_ct_equal(h->identity_key, key, GT_ED25519_PUBLIC_BYTES)) ||
            (key == NULL && dataset_id != NULL &&
             gt_ct_equal(h->dataset_id, dataset_id, GT_DATASET_ID_BYTES))) {
            return h;
        }
    }
    char hex[65];
    gt_hex_encode(hex, sizeof hex, key ? key : dataset_id,
                  key ? GT_ED25519_PUBLIC_BYTES : GT_DATASET_ID_BYTES);
    problem(f, key ? "no holder in the agreement has identity_key %s (the key folder's)"
                   : "no holder in the agreement has dataset_id %s (the dataset's)", hex);
    return NULL;
}

static bool is_recipient(const gt_agreement *a, const char *name)
{
    for (uint32_t i = 0; i < a->recipient_count; i++) {
        if (strcmp(a->recipients[i], name) == 0) {
            return true;
        }
    }
    return false;
}

// A holder named by enclave serves only in enclave mode: its dataset key must be the one sealed
// in the holder enclave (holder enclave-keys import), not a plain file.
static void check_enclave_sealed(findings *f, const gt_agreement_holder *h, const char *dir)
{
    if (!h->enclave.present) {
        return;
    }
    char sealed[4200], plain[4200];
    bool has_sealed = gt_is_ok(gt_path_join(sealed, sizeof sealed, dir,
                                            GT_HOLDER_ENCLAVE_SEALED_KEY)) &&
                      gt_path_exists(sealed);
    bool has_plain = gt_is_ok(gt_path_join(plain, sizeof plain, dir, GT_KEYDIR_DATASET_KEY)) &&
                     gt_path_exists(plain);
    if (!has_sealed) {
        problem(f, "holder %s is named by enclave (its \"enclave\" entry), but key folder %s is "
                   "not enclave-sealed (no %s): 'gputravel holder enclave-keys import --key %s', "
                   "then run the holder with --enclave-platform", h->name, dir,
                GT_HOLDER_ENCLAVE_SEALED_KEY, dir);
    } else if (has_plain) {
        warning(f, "holder %s: key folder %s still holds a plain %s beside the enclave-sealed "
                   "key: the enclave guarantee the agreement names means nothing while it exists",
                h->name, dir, GT_KEYDIR_DATASET_KEY);
    }
}

static void check_key(findings *f, const gt_agreement *a, const check_options *o,
                      const gt_agreement_holder **me, uint8_t key[GT_ED25519_PUBLIC_BYTES])
{
    gt_err e = gt_holder_pub_load(o->key, key);
    if (!gt_is_ok(e)) {
        problem(f, "--key %s: %s", o->key, e.msg);
        return;
    }
    const gt_agreement_holder *h = find_holder(f, a, o, key, NULL);
    if (h == NULL) {
        return;
    }
    *me = h;
    if (!gt_ct_equal(h->identity_key, key, GT_ED25519_PUBLIC_BYTES)) {
        problem(f, "holder %s: identity_key is not key folder %s's (keys show %s prints it)",
                h->name, o->key, o->key);
    }
    char rpath[4200];
    uint8_t rk[GT_X25519_BYTES];
    bool has = gt_is_ok(gt_path_join(rpath, sizeof rpath, o->key, GT_KEYDIR_RECIPIENT_PUBLIC)) &&
               gt_path_exists(rpath) && gt_is_ok(gt_recipient_pub_load(o->key, rk));
    if (h->has_recipient_key && has && !gt_ct_equal(h->recipient_key, rk, sizeof rk)) {
        problem(f, "holder %s: recipient_key is not key folder %s's: a checkpoint sealed to it "
                   "could not be opened with this folder", h->name, o->key);
    } else if (h->has_recipient_key && !has) {
        problem(f, "holder %s: key folder %s has no recipient key to open a checkpoint sealed "
                   "to recipient_key ('gputravel keygen --out %s --add-recipient-key')",
                h->name, o->key, o->key);
    } else if (!h->has_recipient_key && is_recipient(a, h->name)) {
        problem(f, "holder %s is a recipient without a recipient_key", h->name);
    }
    check_enclave_sealed(f, h, o->key);
}

static void check_dataset(findings *f, const gt_agreement *a, const check_options *o,
                          const gt_agreement_holder *me)
{
    gt_manifest m;
    gt_err e = gt_manifest_load(&m, o->dataset);
    if (!gt_is_ok(e)) {
        problem(f, "--dataset %s: %s", o->dataset, e.msg);
        return;
    }
    const gt_agreement_holder *h = me ? me : find_holder(f, a, o, NULL, m.dataset_id);
    if (h != NULL) {
        char id[2 * GT_DATASET_ID_BYTES + 1];
        gt_hex_encode(id, sizeof id, m.dataset_id, sizeof m.dataset_id);
        bool same = gt_ct_equal(h->dataset_id, m.dataset_id, GT_DATASET_ID_BYTES);
        if (!same) {
            problem(f, "holder %s: dataset_id is not dataset %s's (%s)", h->name, o->dataset, id);
            h = NULL;  // its budget says nothing about another dataset's chunks
        }
    }
    if (h != NULL) {
        if (!gt_ct_equal(h->identity_key, m.holder_pub, GT_ED25519_PUBLIC_BYTES)) {
            problem(f, "holder %s: dataset %s is signed by another key than its identity_key",
                    h->name, o->dataset);
        }
        uint32_t too_big = 0;
        uint64_t smallest = UINT64_MAX;
        for (uint32_t c = 0; c < m.chunk_count; c++) {
            uint64_t t = m.chunks[c].plaintext_len / 2;  // uint16 tokens
            too_big += t > h->token_budget;
            smallest = t < smallest ? t : smallest;
        }
        if (m.chunk_count > 0 && too_big == m.chunk_count) {
            problem(f, "holder %s: token_budget %llu is smaller than every chunk (the smallest "
                       "holds %llu tokens): the budget is a hard cap, so no chunk is ever "
                       "released", h->name, (unsigned long long)h->token_budget,
                    (unsigned long long)smallest);
        } else if (too_big > 0) {
            warning(f, "holder %s: token_budget %llu is smaller than %u of the %u chunks: "
                       "those are never released", h->name, (unsigned long long)h->token_budget,
                    too_big, m.chunk_count);
        }
    }
    if (m.vocab_size > a->vocab) {
        problem(f, "dataset %s: vocabulary %u exceeds model.vocab %u (the trainer refuses it)",
                o->dataset, m.vocab_size, a->vocab);
    }
    gt_manifest_free(&m);
}

// Would this policy admit a trainer of this build under this agreement, in simulation? The real
// appraisal, on sim evidence bound (as a session's is) to this agreement's hash.
static void check_policy(findings *f, const gt_agreement *a, const check_options *o)
{
    gt_policy *p = NULL;
    gt_err e = gt_policy_load_file(&p, o->policy);
    if (!gt_is_ok(e)) {
        problem(f, "--policy %s: %s", o->policy, e.msg);
        return;
    }
    if (!a->allow_simulation) {
        gt_policy_free(p);
        return;
    }
    gt_pkey *root = NULL;
    char pub[4200];
    e = gt_sim_root_open(&root, pub, sizeof pub, o->sim_root, false);
    gt_pkey_free(root);
    uint8_t binding[GT_NET_BINDING_BYTES] = {0}, rd[GT_REPORT_DATA_BYTES];
    gt_evidence ev = {0};
    if (gt_is_ok(e)) {
        e = gt_attest_report_data_build(rd, GT_TLS_REPORT_DATA_TAG, binding, sizeof binding,
                                        NULL, 0, a->hash, sizeof a->hash);
    }
    // The attest layer warns on every simulated evidence; here that is the point, not news.
    gt_log_level level = gt_log_get_level();
    gt_log_set_level(GT_LOG_ERROR);
    if (gt_is_ok(e)) {
        gt_collect_params cp = {.type = GT_TEE_SIM, .sim_root = o->sim_root};
        e = gt_attest_collect(&ev, &cp, rd);
    }
    if (!gt_is_ok(e)) {
        gt_log_set_level(level);
        warning(f, "--policy %s: not tried on simulated evidence (%s)", o->policy, e.msg);
        gt_policy_free(p);
        return;
    }
    gt_attest_file rf = {pub, {NULL, 0}};
    gt_appraise_params prm = {.roots = &rf, .root_count = 1, .expected_report_data = rd,
                              .agreement_hash = a->hash, .agreement_hash_len = sizeof a->hash};
    gt_appraisal ap = {0};
    e = gt_attest_appraise(&ap, &ev, p, &prm);
    gt_log_set_level(level);
    if (!gt_is_ok(e)) {
        warning(f, "--policy %s: not tried on simulated evidence (%s)", o->policy, e.msg);
    } else if (ap.verdict != GT_VERDICT_ACCEPTED) {
        for (size_t i = 0; i < ap.reason_count; i++) {
            problem(f, "--policy %s refuses a simulated trainer of this build: %s", o->policy,
                    ap.reasons[i]);
        }
    }
    gt_appraisal_free(&ap);
    gt_evidence_free(&ev);
    gt_policy_free(p);
}

static void check_parsed(findings *f, const gt_agreement *a, const check_options *o)
{
    for (uint32_t i = 0; i < a->holder_count; i++) {
        check_endpoint(f, &a->holders[i]);
    }
    if (a->output == GT_OUTPUT_LOSS_ONLY) {
        warning(f, "output loss_only: no trained model leaves the TEE");
    }
    if (gt_agreement_allows(a, GT_TRANSFER_CONVENTIONAL)) {
        warning(f, "transfer lists conventional: holders decrypt and send plaintext over the "
                   "attested channel");
    }
    if (gt_agreement_allows(a, GT_TRANSFER_INSECURE_HOST_TRIP)) {
        warning(f, "transfer lists insecure-host-trip: chunks in the cpu trainer's host memory, "
                   "no protection at all");
    }
    if (a->allow_simulation) {
        warning(f, "allow_simulation: simulated TEEs and devices are accepted (they prove the "
                   "protocol, not isolation)");
    }
    check_measurements(f, a);
    const gt_agreement_holder *me = NULL;
    uint8_t key[GT_ED25519_PUBLIC_BYTES];
    if (o->key != NULL) {
        check_key(f, a, o, &me, key);
    } else if (o->name != NULL) {
        me = find_holder(f, a, o, NULL, NULL);
    }
    if (o->dataset != NULL) {
        check_dataset(f, a, o, me);
    }
    if (o->policy != NULL) {
        check_policy(f, a, o);
    }
}

static void report(const findings *f)
{
    for (unsigned i = 0; i < f->nwarnings; i++) {
        printf("  warning: %s\n", f->warnings[i]);
    }
    for (unsigned i = 0; i < f->nproblems; i++) {
        printf("  problem: %s\n", f->problems[i]);
    }
    if (f->nproblems == 0) {
        printf("OK: a run could start under this agreement (%u warning(s))\n", f->nwarnings);
    } else {
        printf("%u problem(s): no run can start until they are fixed\n", f->nproblems);
    }
}

static int run_check(const check_options *o)
{
    gt_buf b = {0};
    gt_err e = gt_file_read_all(o->path, GT_AGREEMENT_MAX_BYTES, &b);
    if (!gt_is_ok(e)) {
        return gt_cli_fail("agreement", e);
    }
    uint8_t hash[GT_SHA256_BYTES];
    char hex[2 * GT_SHA256_BYTES + 1];
    e = gt_hash(GT_HASH_SHA256, hash, b.data, b.len);
    if (!gt_is_ok(e)) {
        gt_buf_free_nowipe(&b);
        return gt_cli_fail("agreement", e);
    }
    gt_hex_encode(hex, sizeof hex, hash, sizeof hash);
    printf("%s: sha256 %s\n", o->path, hex);
    findings *f = calloc(1, sizeof *f);
    gt_agreement *a = calloc(1, sizeof *a);
    if (f == NULL || a == NULL) {
        free(f);
        free(a);
        gt_buf_free_nowipe(&b);
        return gt_cli_fail("agreement", gt_errf(GT_E_NOMEM, "out of memory"));
    }
    unsigned n = 0;
    e = gt_agreement_lint(b.data, b.len, on_shape_problem, f, MAX_PROBLEMS, &n);
    if (!gt_is_ok(e)) {
        problem(f, "%s", e.msg);
    } else if (n == 0) {
        e = gt_agreement_parse(a, b.data, b.len);
        if (!gt_is_ok(e)) {
            problem(f, "%s", e.msg);
        } else {
            printf("agreement %s: %u holder(s), model %u layers x %u channels, vocab %u; "
                   "%u steps of %u x %u; %u trainer rank(s)\n", a->name, a->holder_count,
                   a->layers, a->channels, a->vocab, a->steps, a->batch, a->seq, a->ranks);
            check_parsed(f, a, o);
        }
    }
    gt_buf_free_nowipe(&b);
    report(f);
    int rc = f->nproblems ? GT_EXIT_FAIL : GT_EXIT_OK;
    free(f);
    free(a);
    return rc;
}

static int cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {
        {"key", required_argument, NULL, 'k'}, {"dataset", required_argument, NULL, 'd'},
        {"name", required_argument, NULL, 'n'}, {"policy", required_argument, NULL, 'p'},
        {"sim-root", required_argument, NULL, 's'}, {0}};
    check_options o = {0};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'k': o.key = optarg; break;
        case 'd': o.dataset = optarg; break;
        case 'n': o.name = optarg; break;
        case 'p': o.policy = optarg; break;
        case 's': o.sim_root = optarg; break;
        default: return gt_cli_usage("agreement", "unknown option");
        }
    }
    if (optind + 1 != argc) {
        return gt_cli_usage("agreement", optind == argc ? "check needs the agreement file"
                                                        : "unexpected argument '%s'",
                            argv[optind + 1 < argc ? optind + 1 : optind]);
    }
    o.path = argv[optind];
    return run_check(&o);
}

int gt_cmd_agreement(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    if (argc < 2) {
        return gt_cli_usage("agreement", "a subcommand is required: init or check");
    }
    optind = 1;
    if (strcmp(argv[1], "init") == 0) {
        return cmd_init(argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "check") == 0) {
        return cmd_check(argc - 1, argv + 1);
    }
    return gt_cli_usage("agreement", "unknown subcommand '%s' (init or check)", argv[1]);
}
