// gputravel demo: the README's main command. Three data holders seal their own text; an
// emulated confidential GPU (devd) and three holder agents start as separate processes; the
// trainer trains one GPT-2 on everybody's data, each chunk reaching the device's protected
// memory through an attested channel; every party's decisions are checked; the model writes.
// Everything runs on the simulated TEE and the emulated device, and says so.
#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>
#include <gputravel/holder.h>
#include <gputravel/orchestr.h>
#include <gputravel/train.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORTUNE_DIR "/usr/share/games/fortunes"
#define DEMO_MARKER ".gputravel-demo"
#define HOLDERS 3
#define CHUNK_BYTES (48u << 10)  // small chunks, so that training visits every holder

static const char *const holder_names[HOLDERS] = {"hospital", "bank", "lab"};

typedef struct {
    char shard[4096], keys[4096], dataset[4096], ledger[4096], log[4096];
    gt_holder_keys k;
    uint8_t dataset_id[GT_DATASET_ID_BYTES];
    uint64_t tokens;
    uint32_t chunks;
    int port;
    pid_t pid;
    char from[160];
    gt_buf text;
} demo_holder;

typedef struct {
    char dir[3072];
    bool quiet;
    char sim_root[4096], root_pub[4200], policy[4096], agreement_path[4096], socket[4096];
    char state[4096], devd_log[4096], tampered[4096], self[4096], sealed[4200];
    demo_holder h[HOLDERS];
    gt_agreement agreement;
    pid_t devd;
    uint32_t steps;
    gt_transfer_mode transfer;
    double t_step, t_total;
    double *curve_x, *curve_y;
    size_t curve_n;
} demo;

static void say(const demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const demo *d, const char *fmt, ...)
{
    if (d->quiet) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static void step_begin(demo *d, int n, const char *title)
{
    say(d, "\n[%d] %s\n", n, title);
    d->t_step = gt_now_seconds();
}

static void step_end(demo *d)
{
    say(d, "    (%.2f s)\n", gt_now_seconds() - d->t_step);
}

static void usage(void)
{
    printf("usage: gputravel demo [--out DIR] [--steps N] [--transfer MODE] [--quiet]\n"
           "\n"
           "End to end on one machine: three data holders (hospital, bank, lab) seal their\n"
           "own text (the fortunes databases, split by file); an emulated confidential GPU\n"
           "(gputravel devd) and three holder agents (gputravel holder) start as processes;\n"
           "the trainer attests to every holder and trains one GPT-2 on all their data: for each\n"
           "chunk the device travels to its holder, who loads the chunk straight into the\n"
           "device's protected memory; it is trained on, then erased. Then every\n"
           "holder's ledger is verified, a loss curve is drawn, and the model writes some text.\n"
           "All TEEs are simulated and the device is emulated: every evidence says\n"
           "insecure-simulation.\n"
           "\n"
           "  --out DIR        work folder (default: a new folder under /tmp); a folder from an\n"
           "                   earlier demo is reused, any other non-empty folder is refused\n"
           "  --steps N        training steps (default 600)\n"
           "  --transfer MODE  travel (default: the GPU travels to each holder),\n"
           "                   conventional-keyrelease or conventional\n"
           "  --quiet          only the final line\n");
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static gt_err prepare_dir(demo *d, const char *out)
{
    if (out == NULL) {
        snprintf(d->dir, sizeof d->dir, "/tmp/gputravel-demo-XXXXXX");
        GT_ENSURE(mkdtemp(d->dir) != NULL, GT_E_IO, "mkdtemp: %s", strerror(errno));
    } else {
        GT_ENSURE(strlen(out) < 1024, GT_E_LIMIT, "--out: path too long");
        snprintf(d->dir, sizeof d->dir, "%s", out);
        GT_TRY(gt_mkdir_p(d->dir, 0700));
    }
    char marker[4096];
    GT_TRY(gt_path_join(marker, sizeof marker, d->dir, DEMO_MARKER));
    DIR *dir = opendir(d->dir);
    GT_ENSURE(dir != NULL, GT_E_IO, "%s: %s", d->dir, strerror(errno));
    bool empty = true;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        empty = empty && (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0);
    }
    closedir(dir);
    GT_ENSURE(empty || gt_path_exists(marker), GT_E_STATE,
              "%s is not empty and was not made by gputravel demo: choose another --out", d->dir);
    // A demo folder from an earlier run: start over (its keys and datasets were demo data).
    dir = opendir(d->dir);
    while (dir != NULL && (e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", d->dir, e->d_name);
            nftw(p, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
    GT_TRY(gt_file_write_atomic(marker, "gputravel demo work folder\n", 27, 0644));
    snprintf(d->sim_root, sizeof d->sim_root, "%s/sim-root", d->dir);
    snprintf(d->root_pub, sizeof d->root_pub, "%s/root-pub.pem", d->sim_root);
    snprintf(d->policy, sizeof d->policy, "%s/policy.json", d->dir);
    snprintf(d->agreement_path, sizeof d->agreement_path, "%s/agreement.json", d->dir);
    snprintf(d->socket, sizeof d->socket, "%s/devd.sock", d->dir);
    snprintf(d->state, sizeof d->state, "%s/trainer", d->dir);
    snprintf(d->devd_log, sizeof d->devd_log, "%s/logs/devd.log", d->dir);
    snprintf(d->tampered, sizeof d->tampered, "%s/tampered", d->dir);
    for (int i = 0; i < HOLDERS; i++) {
        demo_holder *h = &d->h[i];
        const char *n = holder_names[i];
        snprintf(h->shard, sizeof h->shard, "%s/%s/text.bin", d->dir, n);
        snprintf(h->keys, sizeof h->keys, "%s/%s/keys", d->dir, n);
        snprintf(h->dataset, sizeof h->dataset, "%s/%s/dataset", d->dir, n);
        snprintf(h->ledger, sizeof h->ledger, "%s/%s/ledger.log", d->dir, n);
        snprintf(h->log, sizeof h->log, "%s/logs/holder-%s.log", d->dir, n);
        char hd[4096];
        snprintf(hd, sizeof hd, "%s/%s", d->dir, n);
        GT_TRY(gt_mkdir_p(hd, 0700));
    }
    char logs[4096];
    snprintf(logs, sizeof logs, "%s/logs", d->dir);
    GT_TRY(gt_mkdir_p(logs, 0700));
    // Every process of the demo shares one simulated platform root.
    GT_TRY(gt_cli_sim_root_use(d->sim_root));
    ssize_t n = readlink("/proc/self/exe", d->self, sizeof d->self - 1);
    GT_ENSURE(n > 0, GT_E_IO, "cannot find this executable: %s", strerror(errno));
    d->self[n] = '\0';
    return GT_OK;
}

// ---- step 1: three holders' text ------------------------------------------------------------

static const char builtin_text[] =
    "Three organisations kept text that none of them could show the others: a hospital its\n"
    "discharge notes, a bank its letters to customers, a laboratory its notebooks. Together\n"
    "they wanted one language model. Each sealed its text under its own keys, and a\n"
    "confidential accelerator travelled to each of them in turn, took on one chunk at a\n"
    "time inside its protected memory, and carried nothing home but what the training\n"
    "agreement allowed.\n";

static int text_file(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    bool dat = n > 4 && strcmp(e->d_name + n - 4, ".dat") == 0;
    bool u8 = n > 3 && strcmp(e->d_name + n - 3, ".u8") == 0;
    return e->d_name[0] != '.' && !dat && !u8;
}

// Deals the fortune files out to the holders in turn, so each has its own topics.
static gt_err corpus_from_fortunes(demo *d)
{
    struct dirent **names = NULL;
    int n = scandir(FORTUNE_DIR, &names, text_file, alphasort);
    GT_ENSURE(n > 0, GT_E_NOTFOUND, "%s: no fortune files", FORTUNE_DIR);
    gt_err err = GT_OK;
    int files[HOLDERS] = {0}, dealt = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        if (gt_is_ok(err) && gt_is_ok(gt_path_join(path, sizeof path, FORTUNE_DIR,
                                                   names[i]->d_name)) &&
            lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (16 << 20)) {
            demo_holder *h = &d->h[dealt % HOLDERS];
            gt_buf one = {0};
            err = gt_file_read_all(path, 16u << 20, &one);
            if (gt_is_ok(err)) {
                err = gt_buf_append(&h->text, one.data, one.len);
                size_t used = strlen(h->from);
                snprintf(h->from + used, sizeof h->from - used, "%s%s", used ? ", " : "",
                         names[i]->d_name);
                files[dealt % HOLDERS]++;
                dealt++;
            }
            gt_buf_free_nowipe(&one);
        }
        free(names[i]);
    }
    free(names);
    GT_TRY(err);
    GT_ENSURE(files[HOLDERS - 1] > 0, GT_E_NOTFOUND, "too few fortune files");
    return GT_OK;
}

static gt_err step_corpus(demo *d)
{
    step_begin(d, 1, "Three data holders, each with private text");
    if (!gt_is_ok(corpus_from_fortunes(d))) {
        for (int i = 0; i < HOLDERS; i++) {
            gt_buf_free_nowipe(&d->h[i].text);
            for (int r = 0; r < 600; r++) {
                GT_TRY(gt_buf_append(&d->h[i].text, builtin_text, sizeof builtin_text - 1));
            }
            snprintf(d->h[i].from, sizeof d->h[i].from,
                     "built-in text (install fortunes for a richer corpus)");
        }
    }
    for (int i = 0; i < HOLDERS; i++) {
        char size[32];
        gt_format_size(size, sizeof size, d->h[i].text.len);
        say(d, "    %-9s %9s of text (%.60s%s)\n", holder_names[i], size, d->h[i].from,
            strlen(d->h[i].from) > 60 ? "..." : "");
    }
    step_end(d);
    return GT_OK;
}

// ---- step 2: each holder tokenizes, creates keys and seals -----------------------------------

static gt_err step_seal(demo *d)
{
    step_begin(d, 2, "Each holder tokenizes its text, creates its keys and seals its dataset");
    for (int i = 0; i < HOLDERS; i++) {
        demo_holder *h = &d->h[i];
        uint16_t *tokens = malloc(h->text.len * sizeof *tokens + 2);
        GT_ENSURE(tokens != NULL, GT_E_NOMEM, "out of memory");
        gt_tokenize_bytes(tokens, h->text.data, h->text.len);
        gt_err err = gt_shard_write(h->shard, tokens, h->text.len);
        free(tokens);
        GT_TRY(err);
        GT_TRY(gt_keydir_generate(h->keys, false, &h->k));
        const char *shards[] = {h->shard};
        gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = h->dataset,
                            .chunk_size = CHUNK_BYTES, .vocab_size = GT_BYTE_VOCAB};
        gt_seal_result r;
        GT_TRY(gt_seal(&p, &h->k, &r));
        // The plaintext shard was only a step on the way: the holder keeps the sealed form.
        unlink(h->shard);
        memcpy(h->dataset_id, r.dataset_id, sizeof h->dataset_id);
        h->tokens = r.token_count;
        h->chunks = r.chunk_count;
        char id[2 * GT_DATASET_ID_BYTES + 1], pub[2 * GT_ED25519_PUBLIC_BYTES + 1];
        gt_hex_encode(id, sizeof id, r.dataset_id, sizeof r.dataset_id);
        gt_hex_encode(pub, sizeof pub, h->k.holder_pub, sizeof h->k.holder_pub);
        say(d, "    %-9s %8llu byte-level tokens -> %3u chunks (AES-256-GCM, signed manifest)\n"
               "              dataset %.16s...  holder key %.16s...\n",
            holder_names[i], (unsigned long long)r.token_count, r.chunk_count, id, pub);
    }
    say(d, "    Each chunk has its own HKDF-derived key; the manifest lists every chunk's IV,\n"
           "    GCM tag and SHA-256 and is signed with the holder's Ed25519 key.\n");
    step_end(d);
    return GT_OK;
}

// ---- step 3: tampering is caught ------------------------------------------------------------

static gt_err copy_file(const char *from, const char *to)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(from, 1u << 30, &b));
    gt_err err = gt_file_write_atomic(to, b.data, b.len, 0644);
    gt_buf_free_nowipe(&b);  // ciphertext
    return err;
}

static gt_err tamper_one(demo *d, const demo_holder *h, const gt_manifest *m)
{
    GT_TRY(gt_mkdir_p(d->tampered, 0755));
    char from[4096], to[4096];
    GT_TRY(gt_path_join(from, sizeof from, h->dataset, GT_MANIFEST_FILE));
    GT_TRY(gt_path_join(to, sizeof to, d->tampered, GT_MANIFEST_FILE));
    GT_TRY(copy_file(from, to));
    uint32_t victim = m->chunk_count > 1 ? 1 : 0;
    for (uint32_t i = 0; i < m->chunk_count; i++) {
        GT_TRY(gt_chunk_path(from, sizeof from, h->dataset, i));
        GT_TRY(gt_chunk_path(to, sizeof to, d->tampered, i));
        GT_TRY(copy_file(from, to));
    }
    GT_TRY(gt_chunk_path(to, sizeof to, d->tampered, victim));
    int fd = open(to, O_RDWR);
    GT_ENSURE(fd >= 0, GT_E_IO, "%s: %s", to, strerror(errno));
    off_t at = GT_CHUNK_HEADER_BYTES + (off_t)(m->chunks[victim].plaintext_len / 2);
    uint8_t byte = 0;
    bool ok = pread(fd, &byte, 1, at) == 1;
    byte ^= 0x10;
    ok = ok && pwrite(fd, &byte, 1, at) == 1;
    close(fd);
    GT_ENSURE(ok, GT_E_IO, "%s: cannot flip a bit", to);
    say(d, "    Copied the dataset to %s and flipped bit 4 of byte %lld of chunk %u.\n",
        d->tampered, (long long)at, victim);
    gt_err v = gt_dataset_verify(d->tampered, NULL, false, NULL);
    GT_ENSURE(v.code == GT_E_AUTH, GT_E_STATE, "tampering was not detected: %s",
              v.code ? v.msg : "verify passed");
    say(d, "    verify-dataset: %s\n", v.msg);
    char shard[4096];
    GT_TRY(gt_path_join(shard, sizeof shard, d->tampered, "unsealed.bin"));
    gt_err u = gt_unseal(d->tampered, &h->k, shard, false, NULL);
    GT_ENSURE(u.code == GT_E_AUTH && !gt_path_exists(shard), GT_E_STATE,
              "tampering was not detected by unseal: %s", u.code ? u.msg : "unseal passed");
    say(d, "    unseal:         %s; no plaintext file was left behind.\n", u.msg);
    return GT_OK;
}

static gt_err step_tamper(demo *d)
{
    step_begin(d, 3, "Anyone can check a sealed dataset without a key; a flipped bit is caught");
    gt_manifest m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < HOLDERS; i++) {
        gt_manifest_free(&m);
        GT_TRY(gt_dataset_verify(d->h[i].dataset, d->h[i].k.holder_pub, false, &m));
        say(d, "    %-9s manifest signature valid; all %u chunks present and intact\n",
            holder_names[i], m.chunk_count);
    }
    gt_manifest_free(&m);
    GT_TRY(gt_manifest_load(&m, d->h[0].dataset));
    gt_err err = tamper_one(d, &d->h[0], &m);
    gt_manifest_free(&m);
    GT_TRY(err);
    step_end(d);
    return GT_OK;
}


// ---- step 4: the agreement ------------------------------------------------------------------

static gt_err free_port(int *port)
{
    gt_listener *l = NULL;
    GT_TRY(gt_listener_open(&l, "127.0.0.1:0"));
    *port = gt_listener_port(l);
    gt_listener_close(l);
    return GT_OK;
}

static gt_err step_agreement(demo *d)
{
    step_begin(d, 4, "The parties sign up to one training agreement");
    char holders[4096] = "";
    for (int i = 0; i < HOLDERS; i++) {
        demo_holder *h = &d->h[i];
        GT_TRY(free_port(&h->port));
        char key[65], id[33], rkey[65], one[640];
        uint8_t rpub[GT_X25519_BYTES] = {0};
        GT_TRY(gt_recipient_pub_load(h->keys, rpub));
        gt_hex_encode(key, sizeof key, h->k.holder_pub, 32);
        gt_hex_encode(id, sizeof id, h->dataset_id, 16);
        gt_hex_encode(rkey, sizeof rkey, rpub, sizeof rpub);
        snprintf(one, sizeof one,
                 "%s\n    {\"name\": \"%s\", \"identity_key\": \"%s\", \"endpoint\": "
                 "\"127.0.0.1:%d\", \"dataset_id\": \"%s\", \"token_budget\": %llu, "
                 "\"max_uses_per_chunk\": 1,\n     \"recipient_key\": \"%s\"}",
                 i ? "," : "", holder_names[i], key, h->port, id,
                 (unsigned long long)h->tokens, rkey);
        strncat(holders, one, sizeof holders - strlen(holders) - 1);
    }
    char doc[8192];
    snprintf(doc, sizeof doc,
             "{\n  \"version\": 1,\n  \"name\": \"gputravel-demo\",\n"
             "  \"model\": {\"layers\": 4, \"channels\": 128, \"heads\": 4, \"vocab\": 256, "
             "\"max_seq\": 64, \"init_seed\": 1337},\n"
             "  \"training\": {\"steps\": %u, \"batch\": 8, \"seq\": 64, "
             "\"learning_rate\": 0.001},\n"
             "  \"holders\": [%s\n  ],\n"
             "  \"trainer\": {},\n  \"device\": {},\n  \"allow_simulation\": true,\n"
             "  \"output\": {\"kind\": \"sealed_checkpoint\", \"recipients\": [\"%s\", \"%s\", "
             "\"%s\"]}\n}\n",
             d->steps, holders, holder_names[0], holder_names[1], holder_names[2]);
    GT_TRY(gt_file_write_atomic(d->agreement_path, doc, strlen(doc), 0644));
    GT_TRY(gt_agreement_load(&d->agreement, d->agreement_path));
    static const char policy[] = "{\"allow_simulation\": true}\n";
    GT_TRY(gt_file_write_atomic(d->policy, policy, sizeof policy - 1, 0644));
    char hash[2 * GT_SHA256_BYTES + 1];
    gt_hex_encode(hash, sizeof hash, d->agreement.hash, sizeof d->agreement.hash);
    say(d, "    %s: GPT-2 (4 layers, 128 channels, byte vocabulary), %u steps of 8 x 64\n"
           "    tokens; each holder's budget is its whole dataset, each chunk used once; the\n"
           "    trained model goes, sealed, to the three holders only (each holder's X25519\n"
           "    recipient_key from its key folder).\n"
           "    Agreement hash %s: bound into every evidence.\n"
           "    Simulated TEEs are allowed (allow_simulation): this demo has no TDX/SEV-SNP\n"
           "    hardware and no H100, and proves the protocol, not hardware isolation.\n",
        d->agreement_path, d->steps, hash);
    step_end(d);
    return GT_OK;
}

// ---- step 5: devd and the holder agents -----------------------------------------------------

static gt_err spawn(pid_t *pid, const char *log, char *const argv[])
{
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    GT_ENSURE(fd >= 0, GT_E_IO, "%s: %s", log, strerror(errno));
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);  // the demo's processes end with the demo
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd);
    GT_ENSURE(p > 0, GT_E_IO, "fork: %s", strerror(errno));
    *pid = p;
    return GT_OK;
}

// Waits until `log` contains `ready` (the process says it is serving) or the process exits.
static gt_err wait_ready(pid_t pid, const char *log, const char *ready, const char *what)
{
    for (int tries = 0; tries < 300; tries++) {
        gt_buf b = {0};
        if (gt_is_ok(gt_file_read_all(log, 1 << 20, &b))) {
            bool ok = gt_buf_append(&b, "", 1).code == GT_E_NONE &&
                      strstr((const char *)b.data, ready) != NULL;
            gt_buf_free_nowipe(&b);
            if (ok) {
                return GT_OK;
            }
        }
        int status = 0;
        GT_ENSURE(waitpid(pid, &status, WNOHANG) == 0, GT_E_PEER,
                  "%s exited before it was ready: see %s", what, log);
        usleep(50000);
    }
    return gt_errf(GT_E_TIMEOUT, "%s did not start within 15 s: see %s", what, log);
}

static gt_err step_start(demo *d)
{
    step_begin(d, 5, "The emulated confidential GPU and the holders' agents start");
    char *devd_argv[] = {d->self, "devd", "--socket", d->socket, "--mem-limit", "512MiB", NULL};
    GT_TRY(spawn(&d->devd, d->devd_log, devd_argv));
    GT_TRY(wait_ready(d->devd, d->devd_log, "serving", "devd"));
    say(d, "    devd (pid %d): 512 MiB of device memory reserved, identity key certified by the\n"
           "    simulated vendor root; reachable only through attested, encrypted sessions.\n",
        (int)d->devd);
    for (int i = 0; i < HOLDERS; i++) {
        demo_holder *h = &d->h[i];
        char *argv[] = {d->self, "holder", "--dataset", h->dataset, "--key", h->keys,
                        "--agreement", d->agreement_path, "--policy", d->policy,
                        "--ledger", h->ledger, "--root", d->root_pub, NULL};
        GT_TRY(spawn(&h->pid, h->log, argv));
        GT_TRY(wait_ready(h->pid, h->log, "serving", holder_names[i]));
        say(d, "    holder %-9s (pid %d) serves on 127.0.0.1:%d, ledger %s\n", holder_names[i],
            (int)h->pid, h->port, h->ledger);
    }
    step_end(d);
    return GT_OK;
}

static void stop_processes(demo *d)
{
    pid_t pids[HOLDERS + 1] = {d->devd};
    for (int i = 0; i < HOLDERS; i++) {
        pids[i + 1] = d->h[i].pid;
    }
    for (int i = 0; i <= HOLDERS; i++) {
        if (pids[i] > 0) {
            kill(pids[i], SIGTERM);
        }
    }
    for (int i = 0; i <= HOLDERS; i++) {
        if (pids[i] > 0) {
            waitpid(pids[i], NULL, 0);
        }
    }
    d->devd = 0;
    for (int i = 0; i < HOLDERS; i++) {
        d->h[i].pid = 0;
    }
}

// ---- step 6: training -----------------------------------------------------------------------

static void on_step(void *ctx, const gt_collab_step *s)
{
    demo *d = ctx;
    double *x = realloc(d->curve_x, (d->curve_n + 1) * sizeof *x);
    if (x != NULL) {
        d->curve_x = x;
    }
    double *y = realloc(d->curve_y, (d->curve_n + 1) * sizeof *y);
    if (y != NULL) {
        d->curve_y = y;
    }
    if (x != NULL && y != NULL) {
        x[d->curve_n] = s->step;
        y[d->curve_n++] = s->loss;
    }
    if (s->step == 1 || s->step % 50 == 0 || s->step == s->steps) {
        say(d, "      step %4u/%u  loss %.4f  (%s's chunk %u)\n", s->step, s->steps,
            (double)s->loss, holder_names[s->holder % HOLDERS], s->chunk);
    }
}

static void on_event(void *ctx, const char *line)
{
    demo *d = ctx;
    // Chunk-by-chunk events are many; the story keeps the first of each kind.
    static const char *const keep[] = {"attested", "resumed", "journal", "stopping", "sealed",
                                       "output", "signing key"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        if (strstr(line, keep[i]) != NULL) {
            say(d, "    %s\n", line);
        }
    }
}

static gt_err step_train(demo *d, gt_collab_report *rep)
{
    step_begin(d, 6, "The trainer attests to every holder and trains on all their data");
    gt_device *dev = NULL;
    gt_policy *policy = NULL;
    gt_buf root = {0};
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_policy_load_file(&policy, d->policy), out);
    GT_TRY_GOTO(err, gt_file_read_all(d->root_pub, 1 << 16, &root), out);
    gt_attest_file rf = {d->root_pub, gt_buf_span(&root)};
    gt_device_config dc = {.kind = GT_DEVICE_SIM, .socket_path = d->socket};
    gt_device_sim_options so = {.timeout_ms = 0};
    memcpy(so.agreement_hash, d->agreement.hash, sizeof so.agreement_hash);
    GT_TRY_GOTO(err, gt_device_open_sim(&dev, &dc, &so), out);
    say(d, "    The trainer opened an attested session with devd: the device's evidence\n"
           "    (insecure-simulation) verified against the simulated vendor root.\n");
    gt_tee_attestor att = {.collect = {.type = GT_TEE_SIM, .sim_root = d->sim_root},
                           .policy = policy, .roots = &rf, .root_count = 1,
                           .agreement = &d->agreement, .peer_role = GT_PEER_HOLDER};
    GT_TRY_GOTO(err, gt_mkdir_p(d->state, 0700), out);
    snprintf(d->sealed, sizeof d->sealed, "%s/model.sealed", d->dir);
    gt_collab_config cfg = {
        .agreement = &d->agreement, .dev = dev, .transfer = d->transfer,
        .attestor = gt_tee_attestor_bind(&att), .trainer_name = "demo-trainer",
        .state_dir = d->state, .on_step = on_step, .on_event = on_event, .ctx = d,
        .device_address = d->socket, .sealed_path = d->sealed,
    };
    if (d->transfer == GT_TRANSFER_TRAVEL) {
        say(d, "    GPU travelling: for each chunk the trainer lends the device to its holder;\n"
               "    the holder attaches with the ticket (sent over the attested channel),\n"
               "    appraises the device, streams the sealed chunk unchanged and releases only\n"
               "    its key to the device, which decrypts it once into protected memory; the\n"
               "    device returns. No dataset byte crosses the network. A holder's first trip\n"
               "    opens an attested session with the device; its later trips reattach that\n"
               "    session with the new ticket instead of a new handshake.\n");
    } else {
        say(d, "    Transfer: %s over the attested channel.\n", gt_transfer_mode_name(d->transfer));
    }
    say(d, "    Each chunk lands in device memory as a NO_READBACK buffer, is trained on once,\n"
           "    then erased; the use is checkpointed, journaled and confirmed to its holder.\n");
    GT_TRY_GOTO(err, gt_collab_train(&cfg, rep), out);
    say(d, "    %-9s %12s %12s %6s %12s\n", "holder", "tokens used", "budget", "chunks",
        "transfer s");
    for (int i = 0; i < HOLDERS; i++) {
        const gt_collab_holder_report *h = &rep->holders[i];
        say(d, "    %-9s %12llu %12llu %6u %12.3f\n", holder_names[i],
            (unsigned long long)h->tokens_used, (unsigned long long)h->token_budget, h->uses,
            h->transfer_seconds);
    }
out:
    gt_device_close(dev);
    gt_policy_free(policy);
    gt_buf_free_nowipe(&root);
    step_end(d);
    return err;
}

// ---- step 7: every decision checks out --------------------------------------------------------

static gt_err step_ledgers(demo *d, const gt_collab_report *rep)
{
    step_begin(d, 7, "Every holder checks its ledger; the plots are drawn");
    for (int i = 0; i < HOLDERS; i++) {
        gt_ledger_summary s;
        GT_TRY(gt_ledger_verify_file(d->h[i].ledger, d->h[i].k.holder_pub, NULL, &s));
        say(d, "    %-9s ledger verified: %llu signed, hash-chained entries "
               "(gputravel ledger show %s)\n",
            holder_names[i], (unsigned long long)s.entries, d->h[i].ledger);
    }
    char png[4200];
    snprintf(png, sizeof png, "%s/loss.png", d->dir);
    gt_plot_series ls = {"training loss", d->curve_x, d->curve_y, d->curve_n};
    gt_plot_style st = {.title = "gputravel demo: one GPT-2, three holders' data",
                        .xlabel = "step", .ylabel = "cross-entropy loss"};
    gt_err perr = d->curve_n ? gt_plot_lines(png, &st, &ls, 1) : gt_errf(GT_E_STATE, "no steps");
    if (gt_is_ok(perr)) {
        say(d, "    loss curve: %s\n", png);
    } else {
        say(d, "    (no loss plot: %s)\n", perr.msg);
    }
    const char *groups[HOLDERS];
    double mib[HOLDERS], rate[HOLDERS];
    for (int i = 0; i < HOLDERS; i++) {
        groups[i] = holder_names[i];
        const gt_collab_holder_report *h = &rep->holders[i];
        mib[i] = (double)h->bytes_moved / (1 << 20);
        rate[i] = h->transfer_seconds > 0 ? mib[i] / h->transfer_seconds : 0;
    }
    snprintf(png, sizeof png, "%s/transfer.png", d->dir);
    const char *series[] = {"MiB/s into device memory"};
    gt_plot_style ts = {.title = "chunk transfer rate by holder (loopback)", .xlabel = "holder",
                        .ylabel = "MiB/s"};
    perr = gt_plot_bars(png, &ts, groups, HOLDERS, series, 1, rate, NULL, NULL);
    if (gt_is_ok(perr)) {
        say(d, "    transfer plot: %s\n", png);
    }
    step_end(d);
    return GT_OK;
}

// ---- step 8: the model writes -----------------------------------------------------------------

static gt_err step_sample(demo *d)
{
    step_begin(d, 8, "A recipient opens the sealed model, and the model writes");
    // The trainer's checkpoint stays in its TEE; what left is the sealed file. The first
    // recipient opens it with its own recipient key, and the text below comes from that copy.
    const demo_holder *r = &d->h[0];
    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s/%s/model.bin", d->dir, holder_names[0]);
    gt_device *dev = NULL;
    gt_gpt2 *m = NULL;
    gt_tokenizer *tok = NULL;
    int32_t tokens[64] = {0};
    gt_recipient_keys rk;
    memset(&rk, 0, sizeof rk);
    gt_sckpt_header *hdr = calloc(1, sizeof *hdr);
    gt_err err = GT_OK;
    GT_ENSURE_GOTO(err, hdr != NULL, out, GT_E_NOMEM, "out of memory");
    GT_TRY_GOTO(err, gt_keydir_recipient_load(r->keys, &rk), out);
    uint32_t me = 0;
    // Who sealed it: the signer must be the trainer whose session the hospital's own ledger
    // recorded (the key its HELLO presented inside the channel the hospital appraised).
    GT_TRY_GOTO(err, gt_sckpt_read_header(d->sealed, hdr), out);
    gt_ledger_session ses;
    GT_TRY_GOTO(err, gt_ledger_find_session(r->ledger, r->k.holder_pub, hdr->signer_pub, &ses),
                out);
    GT_ENSURE_GOTO(err, gt_ct_equal(ses.agreement, hdr->agreement_hash, GT_SHA256_BYTES), out,
                   GT_E_STATE, "the signer served the hospital under another agreement");
    uint8_t signer[GT_ED25519_PUBLIC_BYTES];
    memcpy(signer, hdr->signer_pub, sizeof signer);
    GT_TRY_GOTO(err, gt_sckpt_open(d->sealed, &rk, signer, ckpt, hdr, &me), out);
    GT_ENSURE_GOTO(err, gt_ct_equal(hdr->agreement_hash, d->agreement.hash, GT_SHA256_BYTES), out,
                   GT_E_STATE, "the sealed checkpoint names another agreement");
    char signer_hex[2 * GT_ED25519_PUBLIC_BYTES + 1];
    gt_hex_encode(signer_hex, sizeof signer_hex, signer, sizeof signer);
    say(d, "    %s opened model.sealed with its own recipient key (recipient %u of %u; step\n"
           "    %llu, this agreement's hash; GCM tag verified) into %s/model.bin.\n",
        holder_names[0], me + 1, hdr->recipient_count, (unsigned long long)hdr->step,
        holder_names[0]);
    say(d, "    It was sealed by the trainer %s appraised: the signature verifies under\n"
           "    signing key %.16s..., which trainer '%s' presented inside the attested\n"
           "    channel and %s's own ledger recorded (entry %llu).\n",
        holder_names[0], signer_hex, ses.trainer, holder_names[0], (unsigned long long)ses.seq);
    if (ses.appraisal[0] != '\0') {
        say(d, "    %s appraised that trainer as: %s\n", holder_names[0], ses.appraisal);
    }
    say(d, "    The text below is sampled from that copy, not from the trainer's checkpoint:\n");
    gt_device_config dc = {.kind = GT_DEVICE_CPU};
    GT_TRY_GOTO(err, gt_device_open(&dev, &dc), out);
    GT_TRY_GOTO(err, gt_gpt2_load(&m, dev, ckpt), out);
    GT_TRY_GOTO(err, gt_tokenizer_byte_new(&tok), out);
    static const char prompt[] = "The ";
    for (size_t i = 0; i < sizeof prompt - 1; i++) {
        tokens[i] = (uint8_t)prompt[i];
    }
    gt_sampler s = {.temperature = 0.8f, .top_k = 40, .rng = 42};
    GT_TRY_GOTO(err, gt_gpt2_generate(m, &s, tokens, (int)sizeof prompt - 1, 64), out);
    say(d, "    \"");
    for (int i = 0; i < 64; i++) {
        gt_span piece = {0};
        if (gt_is_ok(gt_tokenizer_decode(tok, (uint32_t)tokens[i], &piece))) {
            char c = (char)piece.data[0];
            say(d, "%c", c == '\n' ? ' ' : (c >= 32 && c < 127 ? c : '?'));
        }
    }
    say(d, "\"\n");
out:
    gt_recipient_keys_wipe(&rk);
    free(hdr);
    gt_tokenizer_free(tok);
    gt_gpt2_free(m);
    gt_device_close(dev);
    step_end(d);
    return err;
}

int gt_cmd_demo(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const struct option opts[] = {{"out", required_argument, NULL, 'o'},
                                         {"steps", required_argument, NULL, 's'},
                                         {"transfer", required_argument, NULL, 't'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {0}};
    const char *out = NULL;
    demo *d = calloc(1, sizeof *d);
    if (d == NULL) {
        return gt_cli_fail("demo", gt_errf(GT_E_NOMEM, "out of memory"));
    }
    d->quiet = gt_cli.quiet;
    d->steps = 600;
    d->transfer = GT_TRANSFER_TRAVEL;
    int c;
    while ((c = getopt_long(argc, argv, "o:q", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'q': d->quiet = true; break;
        case 's': d->steps = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 't':
            if (!gt_is_ok(gt_transfer_mode_parse(optarg, &d->transfer))) {
                free(d);
                return gt_cli_usage("demo", "--transfer: travel, conventional or "
                                            "conventional-keyrelease");
            }
            break;
        default: free(d); return gt_cli_usage("demo", "unknown option");
        }
    }
    if (optind != argc || d->steps == 0 || d->steps > 100000) {
        free(d);
        return gt_cli_usage("demo", optind != argc ? "unexpected argument" : "--steps 1..100000");
    }
    signal(SIGPIPE, SIG_IGN);
    if (!gt_cli.verbose) {
        gt_log_set_level(GT_LOG_ERROR);  // the story says what the warnings would
    }
    d->t_total = gt_now_seconds();
    gt_collab_report rep;
    memset(&rep, 0, sizeof rep);
    gt_err err = prepare_dir(d, out);
    if (gt_is_ok(err)) {
        say(d, "gputravel demo: three data holders, one emulated confidential GPU, one model\n"
               "(work folder %s; simulated TEEs and device: insecure-simulation)\n", d->dir);
    }
    gt_err (*const before[])(demo *) = {step_corpus, step_seal, step_tamper, step_agreement,
                                        step_start};
    for (size_t i = 0; i < sizeof before / sizeof before[0] && gt_is_ok(err); i++) {
        err = before[i](d);
    }
    if (gt_is_ok(err)) {
        err = step_train(d, &rep);
    }
    stop_processes(d);  // holders write their last ledger entries as they stop
    if (gt_is_ok(err)) {
        err = step_ledgers(d, &rep);
    }
    if (gt_is_ok(err)) {
        err = step_sample(d);
    }
    for (int i = 0; i < HOLDERS; i++) {
        gt_holder_keys_wipe(&d->h[i].k);
        gt_buf_free(&d->h[i].text);
    }
    free(d->curve_x);
    free(d->curve_y);
    int rc = GT_EXIT_OK;
    if (!gt_is_ok(err)) {
        rc = gt_cli_fail("demo", err);
    } else {
        printf("%sdemo OK: %u steps on %d holders' data, final loss %.3f (%.1f s, in %s)\n",
               d->quiet ? "" : "\n", rep.steps_done, HOLDERS, (double)rep.final_loss,
               gt_now_seconds() - d->t_total, d->dir);
    }
    free(d);
    return rc;
}
