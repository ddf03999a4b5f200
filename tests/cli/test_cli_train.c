// cli/: `gputravel train` and `gputravel sample` end to end on the oracle's tiny model: the
// acceptance command line, its per-step lines (equal to the library's losses), the JSON log,
// checkpoints, resume through the CLI, and bad input refused before any step.
#include "testlib.h"

#include <sys/stat.h>

#include "gpt2_fixture.h"

#include <gputravel/data.h>
#include <gputravel/device.h>
#include <gputravel/train.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MODEL GT_SOURCE_DIR "/tests/oracle/gpt2_tiny_model.bin"

static char dir[256], shard[512];

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(shard, sizeof shard, dir, "train.bin"));
    uint16_t tok[3000];
    uint64_t rng = 11;
    for (int i = 0; i < 3000; i++) {
        tok[i] = (uint16_t)(gt_rng_u32(&rng) % 250);  // the tiny model's V
    }
    GT_ASSERT_OK(gt_shard_write(shard, tok, 3000));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gt_test_rmtree(dir);
    return 0;
}

// Parses "step N/M | loss X |" lines; returns how many were found.
static int parse_losses(const char *out, int first, float *losses, int cap)
{
    int n = 0;
    for (const char *p = out; (p = strstr(p, "step ")) != NULL; p++) {
        int s = 0, m = 0;
        float l = 0.0f;
        if ((p == out || p[-1] == '\n') && sscanf(p, "step %d/%d | loss %f |", &s, &m, &l) == 3) {
            assert_int_equal(s, first + n + 1);
            if (n < cap) {
                losses[n] = l;
            }
            n++;
        }
    }
    return n;
}

static void acceptance_command_matches_library(void **state)
{
    (void)state;
    char out[512], json[512];
    GT_ASSERT_OK(gt_path_join(out, sizeof out, dir, "out.bin"));
    GT_ASSERT_OK(gt_path_join(json, sizeof json, dir, "log.jsonl"));
    const char *args[] = {"train", "--device", "cpu", "--init", MODEL, "--data", shard,
                          "--val-data", shard, "--batch", "4", "--seq", "16", "--steps", "10",
                          "--lr", "1e-4", "--beta1", "0.9", "--beta2", "0.999", "--eps", "1e-8",
                          "--weight-decay", "0", "--schedule", "constant", "--warmup", "0",
                          "--grad-clip", "0", "--shuffle", "off", "--threads", "2", "--out", out,
                          "--log-json", json, NULL};
    gt_buf o = {0};
    int rc = gt_test_run_cli(&o, args);
    if (rc != 0) {
        fail_msg("exit %d: %s", rc, (char *)o.data);
    }
    float cli[10];
    assert_int_equal(parse_losses((char *)o.data, 0, cli, 10), 10);
    assert_non_null(strstr((char *)o.data, "\nval 10/10 | val loss "));
    assert_non_null(strstr((char *)o.data, " tok/s\n"));

    // the same run through the library: batch k = tokens [k*B*T, k*B*T + B*T]
    gt_device *dev = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_CPU, .threads = 2};
    GT_ASSERT_OK(gt_device_open(&dev, &dc));
    gt_gpt2 *m = NULL;
    gt_loader *l = NULL;
    gt_dbuf data = 0;
    uint64_t n = 0;
    GT_ASSERT_OK(gt_gpt2_load(&m, dev, MODEL));
    GT_ASSERT_OK(gt_shard_to_device(dev, shard, GT_DBUF_NO_READBACK, &data, &n));
    GT_ASSERT_OK(gt_loader_create(&l, dev, &data, &n, 1, 4, 16, 250, false, 0));
    gt_adamw opt = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    for (int s = 0; s < 10; s++) {
        float loss = 0.0f;
        char want[32], got[32];
        GT_ASSERT_OK(gt_gpt2_zero_grad(m));
        GT_ASSERT_OK(gt_loader_next(l));
        GT_ASSERT_OK(gt_gpt2_forward_backward(m, gt_loader_inputs(l), gt_loader_targets(l), 4,
                                              16, 1.0f, &loss));
        GT_ASSERT_OK(gt_gpt2_update(m, &opt, 1e-4f, NULL));
        snprintf(want, sizeof want, "%.6f", loss);
        snprintf(got, sizeof got, "%.6f", cli[s]);
        assert_string_equal(want, got);
    }
    // the checkpoint the CLI wrote is the library's model after 10 steps
    size_t np = gt_gpt2_num_params(m);
    float *p = malloc(np * 4);
    GT_ASSERT_OK(gt_gpt2_params_read(m, p, np));
    gt_buf ck = {0};
    GT_ASSERT_OK(gt_file_read_all(out, 16u << 20, &ck));
    assert_int_equal(ck.len, 1024 + np * 4);
    assert_memory_equal(ck.data + 1024, p, np * 4);
    char st[600];
    snprintf(st, sizeof st, "%s.state", out);
    assert_true(gt_path_exists(st));
    // one JSON object per step
    gt_buf js = {0};
    GT_ASSERT_OK(gt_file_read_all(json, 1u << 20, &js));
    int lines = 0;
    for (size_t i = 0; i < js.len; i++) {
        lines += js.data[i] == '\n';
    }
    assert_int_equal(lines, 10);
    assert_non_null(strstr((char *)js.data, "{\"step\": 10, \"loss\": "));
    assert_non_null(strstr((char *)js.data, "\"val_loss\": "));

    free(p);
    gt_buf_free(&ck);
    gt_buf_free(&js);
    gt_buf_free(&o);
    gt_loader_free(l);
    gt_gpt2_free(m);
    gt_device_close(dev);
}

static void resume_through_cli(void **state)
{
    (void)state;
    char ck[512];
    GT_ASSERT_OK(gt_path_join(ck, sizeof ck, dir, "ck.bin"));
    const char *common[] = {"--data", shard, "--batch", "2", "--seq", "8", "--lr", "1e-3",
                            "--schedule", "cosine", "--warmup", "2", "--grad-clip", "1",
                            "--weight-decay", "0.1", "--grad-accum", "2", "--shuffle", "on",
                            "--seed", "5", "--threads", "2", "--plot", "none"};
    size_t nc = sizeof common / sizeof common[0];
    const char *full[40] = {"train", "--init", MODEL, "--steps", "6"};
    const char *part[40] = {"train", "--init", MODEL, "--steps", "3", "--out", ck};
    const char *rest[40] = {"train", "--resume", ck, "--steps", "6"};
    memcpy(full + 5, common, nc * sizeof *common);
    memcpy(part + 7, common, nc * sizeof *common);
    memcpy(rest + 5, common, nc * sizeof *common);
    gt_buf a = {0}, b = {0}, c = {0};
    assert_int_equal(gt_test_run_cli(&a, full), 0);
    assert_int_equal(gt_test_run_cli(&b, part), 0);
    assert_int_equal(gt_test_run_cli(&c, rest), 0);
    float la[6], lb[3], lc[3];
    assert_int_equal(parse_losses((char *)a.data, 0, la, 6), 6);
    assert_int_equal(parse_losses((char *)b.data, 0, lb, 3), 3);
    assert_int_equal(parse_losses((char *)c.data, 3, lc, 3), 3);
    assert_memory_equal(la, lb, sizeof lb);
    assert_memory_equal(la + 3, lc, sizeof lc);
    assert_non_null(strstr((char *)c.data, "step 4/6 | loss "));
    // resuming with another batch shape would misread the loader position: refused
    const char *other[40] = {"train", "--resume", ck, "--steps", "6"};
    memcpy(other + 5, common, nc * sizeof *common);
    other[5 + 3] = "4";  // --batch 4
    gt_buf d = {0};
    assert_int_not_equal(gt_test_run_cli(&d, other), 0);
    assert_non_null(strstr((char *)d.data, "B*T"));
    assert_null(strstr((char *)d.data, "step 4/6"));
    gt_buf_free(&d);
    gt_buf_free(&a);
    gt_buf_free(&b);
    gt_buf_free(&c);
}

// The literal kill-at-step-k: a real run saving every step is SIGKILLed at an arbitrary moment
// (possibly mid-save), resumed from whatever files exist, and its next steps' losses equal an
// uninterrupted run's.
static void kill_during_training_then_resume(void **state)
{
    (void)state;
    char ck[512], st[600], steps_s[32];
    GT_ASSERT_OK(gt_path_join(ck, sizeof ck, dir, "kill.bin"));
    snprintf(st, sizeof st, "%s.state", ck);
    gt_proc train;
    gt_proc_spec spec = {
        .argv = (char *[]){GT_CLI_PATH, "train", "--init", MODEL, "--data", shard, "--batch", "2",
                           "--seq", "8", "--lr", "1e-3", "--schedule", "constant", "--shuffle",
                           "on", "--seed", "9", "--threads", "1", "--plot", "none", "--steps",
                           "100000", "--save-every", "1", "--out", ck, NULL},
        .log_path = "/dev/null"};
    GT_ASSERT_OK(gt_proc_spawn(&train, &spec));
    gt_proc_ready ready = {.kind = GT_PROC_READY_FILE, .path = st, .timeout_ms = 20000,
                           .what = "gputravel train"};
    GT_ASSERT_OK(gt_proc_wait_ready(&train, &ready));
    struct timespec ts = {0, 40 * 1000 * 1000 + (long)(getpid() % 7) * 3000 * 1000};
    nanosleep(&ts, NULL);
    kill(train.pid, SIGKILL);
    int status = gt_proc_stop(&train, 1);  // reaps it
    assert_true(WIFSIGNALED(status));

    gt_buf raw = {0};
    GT_ASSERT_OK(gt_file_read_all(st, 64u << 20, &raw));
    gt_reader r = gt_reader_init(raw.data, raw.len);
    uint64_t k = 0;
    GT_ASSERT_OK(gt_reader_skip(&r, 32));
    GT_ASSERT_OK(gt_reader_u64le(&r, &k));
    gt_buf_free(&raw);
    assert_true(k >= 1 && k < 5000);
    print_message("killed after the checkpoint of step %llu\n", (unsigned long long)k);
    snprintf(steps_s, sizeof steps_s, "%llu", (unsigned long long)k + 3);
    const char *resume[] = {"train", "--resume", ck, "--data", shard, "--batch", "2", "--seq", "8",
                            "--lr", "1e-3", "--schedule", "constant", "--shuffle", "on", "--seed",
                            "9", "--threads", "2", "--plot", "none", "--steps", steps_s, NULL};
    const char *full[] = {"train", "--init", MODEL, "--data", shard, "--batch", "2", "--seq", "8",
                          "--lr", "1e-3", "--schedule", "constant", "--shuffle", "on", "--seed",
                          "9", "--threads", "1", "--plot", "none", "--steps", steps_s, NULL};
    gt_buf a = {0}, b = {0};
    assert_int_equal(gt_test_run_cli(&a, resume), 0);
    assert_int_equal(gt_test_run_cli(&b, full), 0);
    float la[3], *lb = calloc(k + 3, sizeof *lb);
    assert_int_equal(parse_losses((char *)a.data, (int)k, la, 3), 3);
    assert_int_equal(parse_losses((char *)b.data, 0, lb, (int)k + 3), (int)k + 3);
    assert_memory_equal(la, lb + k, sizeof la);
    free(lb);
    gt_buf_free(&a);
    gt_buf_free(&b);
}

// Ctrl-C (SIGINT) stops between steps: the checkpoint and its state are saved as at that step,
// the message says how to go on, the exit status is 128 + SIGINT, and --resume continues.
static void sigint_saves_and_says_how_to_resume(void **state)
{
    (void)state;
    char ck[512], st[600], log[600], steps_s[32];
    GT_ASSERT_OK(gt_path_join(ck, sizeof ck, dir, "int.bin"));
    snprintf(st, sizeof st, "%s.state", ck);
    snprintf(log, sizeof log, "%s.log", ck);
    gt_proc train;
    gt_proc_spec spec = {
        .argv = (char *[]){GT_CLI_PATH, "train", "--init", MODEL, "--data", shard, "--batch", "2",
                           "--seq", "8", "--threads", "1", "--plot", "none", "--steps", "100000",
                           "--out", ck, NULL},
        .log_path = log};
    GT_ASSERT_OK(gt_proc_spawn(&train, &spec));
    gt_proc_ready ready = {.kind = GT_PROC_READY_LOG_LINE, .path = log, .text = "step 3/",
                           .timeout_ms = 20000, .what = "gputravel train"};
    GT_ASSERT_OK(gt_proc_wait_ready(&train, &ready));
    assert_false(gt_path_exists(st));  // no --save-every: nothing saved yet
    kill(train.pid, SIGINT);
    int status = gt_test_proc_wait(&train, 20000);  // it stops by itself
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 128 + SIGINT);
    gt_buf out = {0};
    GT_ASSERT_OK(gt_file_read_all(log, 1 << 24, &out));
    GT_ASSERT_OK(gt_buf_append(&out, "", 1));
    const char *said = strstr((char *)out.data, "stopped by Interrupt at step ");
    if (said == NULL || strstr(said, "--resume") == NULL) {
        fail_msg("no stop message with the resume hint:\n%s", (char *)out.data);
    }
    int k = atoi(said + strlen("stopped by Interrupt at step "));
    assert_true(k >= 3);
    gt_buf_free(&out);
    assert_true(gt_path_exists(ck) && gt_path_exists(st));
    snprintf(steps_s, sizeof steps_s, "%d", k + 2);
    const char *resume[] = {"train", "--resume", ck, "--data", shard, "--batch", "2", "--seq", "8",
                            "--threads", "1", "--plot", "none", "--steps", steps_s, NULL};
    gt_buf a = {0};
    int rc = gt_test_run_cli(&a, resume);
    if (rc != 0) {
        fail_msg("resume after SIGINT failed (%d):\n%s", rc, (char *)a.data);
    }
    char want[32];
    snprintf(want, sizeof want, "step %d/%d", k + 1, k + 2);
    assert_non_null(strstr((char *)a.data, want));
    gt_buf_free(&a);
}

static void bad_input_before_training(void **state)
{
    (void)state;
    char badshard[512], bigvocab[512];
    GT_ASSERT_OK(gt_path_join(badshard, sizeof badshard, dir, "bad.bin"));
    GT_ASSERT_OK(gt_path_join(bigvocab, sizeof bigvocab, dir, "big.bin"));
    uint8_t junk[1024 + 64] = {1, 2, 3};
    GT_ASSERT_OK(gt_file_write_atomic(badshard, junk, sizeof junk, 0644));
    uint16_t tok[200];
    for (int i = 0; i < 200; i++) {
        tok[i] = (uint16_t)(i == 150 ? 300 : i);  // 300 >= V = 250
    }
    GT_ASSERT_OK(gt_shard_write(bigvocab, tok, 200));
    struct {
        const char *data, *seq, *init, *expect;
    } rows[] = {
        {shard, "64", MODEL, "max_seq_len"},     // T > maxT
        {badshard, "16", MODEL, "bad magic"},    // not a shard
        {bigvocab, "16", MODEL, "vocabulary"},   // config/shard mismatch
        {shard, "16", shard, "bad magic"},       // a shard given as checkpoint
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *args[] = {"train", "--init", rows[i].init, "--data", rows[i].data, "--batch",
                              "2", "--seq", rows[i].seq, "--steps", "2", "--threads", "1", NULL};
        gt_buf o = {0};
        int rc = gt_test_run_cli(&o, args);
        assert_int_not_equal(rc, 0);
        if (strstr((char *)o.data, rows[i].expect) == NULL) {
            fail_msg("row %zu: no '%s' in: %s", i, rows[i].expect, (char *)o.data);
        }
        assert_null(strstr((char *)o.data, "step 1/"));  // nothing trained
        gt_buf_free(&o);
    }
    const char *usage1[] = {"train", "--data", shard, NULL};  // no model source
    assert_int_equal(gt_test_run_cli(NULL, usage1), 64);
    const char *usage2[] = {"train", "--init", MODEL, "--data", shard, "--lr", "fast", NULL};
    assert_int_equal(gt_test_run_cli(NULL, usage2), 64);
    const char *help[] = {"train", "--help", NULL};
    gt_buf h = {0};
    assert_int_equal(gt_test_run_cli(&h, help), 0);
    assert_non_null(strstr((char *)h.data, "--init-random"));
    assert_non_null(strstr((char *)h.data, "--update-in-backward"));
    gt_buf_free(&h);
}

static void init_random_and_sample(void **state)
{
    (void)state;
    char ck[512];
    GT_ASSERT_OK(gt_path_join(ck, sizeof ck, dir, "rand.bin"));
    const char *args[] = {"train", "--init-random", "--layers", "1", "--channels", "16",
                          "--heads", "2", "--vocab", "250", "--max-seq", "16", "--seed", "3",
                          "--data", shard, "--batch", "2", "--seq", "8", "--steps", "3",
                          "--threads", "1", "--out", ck, "--plot", "none", NULL};
    gt_buf o = {0};
    int rc = gt_test_run_cli(&o, args);
    if (rc != 0) {
        fail_msg("exit %d: %s", rc, (char *)o.data);
    }
    assert_non_null(strstr((char *)o.data, "step 3/3 | loss "));
    gt_buf_free(&o);
    // model data in plaintext: only its owner may read it
    gt_test_assert_mode(ck, 0600);
    char state_path[600];
    snprintf(state_path, sizeof state_path, "%s.state", ck);
    gt_test_assert_mode(state_path, 0600);
    const char *s1[] = {"sample", ck, "--tokens", "12", "--seed", "4", "--prompt", "1,2,3", NULL};
    gt_buf a = {0}, b = {0};
    assert_int_equal(gt_test_run_cli(&a, s1), 0);
    assert_int_equal(gt_test_run_cli(&b, s1), 0);
    assert_string_equal((char *)a.data, (char *)b.data);  // seeded
    int ids = 0, v = 0, used = 0;
    for (const char *p = (char *)a.data; sscanf(p, "%d%n", &v, &used) == 1; p += used) {
        assert_true(v >= 0 && v < 250);
        ids++;
    }
    assert_int_equal(ids, 12);
    const char *s2[] = {"sample", ck, "--prompt", "1,999", NULL};
    assert_int_not_equal(gt_test_run_cli(NULL, s2), 0);
    gt_buf_free(&a);
    gt_buf_free(&b);
}

// train --config FILE: the file's options train as the same ones on the command line would, the
// command line overrides the file, an unknown key or a wrong type stops before training and
// names the key; a file with "agreement" is the collaborative trainer's.
static void config_file_options(void **state)
{
    (void)state;
    char conf[512], ck[512], doc[2048];
    GT_ASSERT_OK(gt_path_join(conf, sizeof conf, dir, "train.json"));
    GT_ASSERT_OK(gt_path_join(ck, sizeof ck, dir, "conf.bin"));
    snprintf(doc, sizeof doc,
             "{\"init\": \"%s\", \"data\": [\"%s\"], \"batch\": 2, \"seq\": 8, \"steps\": 2,"
             " \"threads\": 1, \"plot\": \"none\", \"out\": \"%s\", \"shuffle\": \"off\"}",
             MODEL, shard, ck);
    GT_ASSERT_OK(gt_file_write_atomic(conf, doc, strlen(doc), 0600));
    gt_buf a = {0}, b = {0};
    assert_int_equal(gt_test_run_cli(&a, (const char *[]){"train", "--config", conf, "--steps",
                                                          "3", NULL}), 0);
    const char *same[] = {"train", "--init", MODEL, "--data", shard, "--batch", "2", "--seq", "8",
                          "--steps", "3", "--threads", "1", "--plot", "none", "--shuffle", "off",
                          NULL};
    assert_int_equal(gt_test_run_cli(&b, same), 0);
    float la[3], lb[3];
    assert_int_equal(parse_losses((char *)a.data, 0, la, 3), 3);  // --steps 3 won over 2
    assert_int_equal(parse_losses((char *)b.data, 0, lb, 3), 3);
    assert_memory_equal(la, lb, sizeof la);
    assert_true(gt_path_exists(ck));
    gt_buf_free(&a);
    gt_buf_free(&b);
    static const struct {
        const char *doc, *says;
    } bad[] = {
        {"{\"stpes\": 3}", "--config %s: config: unknown key \"stpes\""},
        {"{\"steps\": [3]}", "--config %s: config: \"steps\" takes one value, not a list"},
        {"{\"init-random\": \"yes\"}", "config: \"init-random\" is a flag: true or false"},
        {"{\"agreement\": \"no-such-agreement.json\", \"state\": \"st\"}",
         "no-such-agreement.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        GT_ASSERT_OK(gt_file_write_atomic(conf, bad[i].doc, strlen(bad[i].doc), 0600));
        gt_buf o = {0};
        int rc = gt_test_run_cli(&o, (const char *[]){"train", "--config", conf, NULL});
        char says[700];
        snprintf(says, sizeof says, bad[i].says, conf);
        if (rc == 0 || strstr((char *)o.data, says) == NULL || strstr((char *)o.data, "step 1/")) {
            fail_msg("%s: rc %d, expected '%s':\n%s", bad[i].doc, rc, says, (char *)o.data);
        }
        gt_buf_free(&o);
    }
    assert_int_not_equal(gt_test_run_cli(NULL, (const char *[]){"train", "--config", NULL}), 0);
}

// The losses printed, one "loss X" per step, without the timings around them.
static void losses_of(const char *out, char *losses, size_t cap)
{
    losses[0] = '\0';
    for (const char *p = out; (p = strstr(p, "| loss ")) != NULL; p += 7) {
        char one[32] = "";
        sscanf(p + 7, "%31s", one);
        snprintf(losses + strlen(losses), cap - strlen(losses), "%s ", one);
    }
}

// --mem-limit with --paging-store: the same run under a cap on resident memory prints the same
// losses as without, and says what paging did; without --paging-store the cap refuses.
static void train_under_memory_cap(void **state)
{
    (void)state;
    char store[512];
    GT_ASSERT_OK(gt_path_join(store, sizeof store, dir, "pages"));
    assert_int_equal(mkdir(store, 0700), 0);
    const char *base[] = {"train", "--init-random", "--layers", "1", "--channels", "16",
                          "--heads", "2", "--vocab", "250", "--max-seq", "16", "--seed", "3",
                          "--data", shard, "--batch", "2", "--seq", "8", "--steps", "3",
                          "--threads", "1", "--plot", "none"};
    enum { NB = sizeof base / sizeof base[0] };
    const char *plain[NB + 1], *capped[NB + 7], *refused[NB + 3], *ahead[NB + 8];
    memcpy(plain, base, sizeof base);
    plain[NB] = NULL;
    memcpy(capped, base, sizeof base);
    const char *extra[] = {"--mem-limit", "80KiB", "--paging-store", store, "--page-size",
                           "4KiB", NULL};
    memcpy(capped + NB, extra, sizeof extra);
    memcpy(refused, capped, (NB + 2) * sizeof *refused);
    refused[NB + 2] = NULL;
    memcpy(ahead, capped, (NB + 6) * sizeof *ahead);
    ahead[NB + 6] = "--prefetch";
    ahead[NB + 7] = NULL;
    gt_buf a = {0}, b = {0}, c = {0}, d = {0};
    assert_int_equal(gt_test_run_cli(&a, plain), 0);
    int rc = gt_test_run_cli(&b, capped);
    if (rc != 0) {
        fail_msg("exit %d: %s", rc, (char *)b.data);
    }
    char la[256], lb[256];
    losses_of((char *)a.data, la, sizeof la);
    losses_of((char *)b.data, lb, sizeof lb);
    assert_true(strlen(la) > 10);
    assert_string_equal(la, lb);
    assert_non_null(strstr((char *)b.data, "paging: memory capped at 80.0 KiB"));
    rc = gt_test_run_cli(&d, ahead);  // with the prefetcher: the same losses, and its counts
    if (rc != 0) {
        fail_msg("exit %d: %s", rc, (char *)d.data);
    }
    char ld[256];
    losses_of((char *)d.data, ld, sizeof ld);
    assert_string_equal(la, ld);
    assert_non_null(strstr((char *)d.data, "paging: prefetch: "));
    gt_buf_free(&d);
    assert_int_not_equal(gt_test_run_cli(&c, refused), 0);
    assert_non_null(strstr((char *)c.data, "--paging-store"));
    assert_int_equal(gt_test_count_files(store), 0);  // the store goes with the device
    gt_buf_free(&a);
    gt_buf_free(&b);
    gt_buf_free(&c);
}

// train/devd --prefetch restart once with OMP_WAIT_POLICY=PASSIVE (so idle OpenMP threads do not
// spin on the pager worker's core) and say so; not without --prefetch, nor over a user's value.
static void prefetch_waits_passively(void **state)
{
    (void)state;
    const char *said = "OMP_WAIT_POLICY=PASSIVE set by gputravel";
    const char *ahead[] = {"train", "--prefetch", "--help", NULL};
    const char *devd[] = {"devd", "--prefetch", "--help", NULL};
    const char *plain[] = {"train", "--help", NULL};
    char kept[64] = "";
    const char *user = getenv("OMP_WAIT_POLICY");
    bool had = user != NULL;
    snprintf(kept, sizeof kept, "%s", had ? user : "");
    unsetenv("OMP_WAIT_POLICY");
    gt_buf out = {0};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(gt_test_run_cli(&out, k ? devd : ahead), 0);
        if (strstr((char *)out.data, said) == NULL) {
            gt_test_fail_log(&out, NULL, "no passive wait said for --prefetch");
        }
        gt_buf_free(&out);
    }
    assert_int_equal(gt_test_run_cli(&out, plain), 0);
    assert_null(strstr((char *)out.data, said));
    gt_buf_free(&out);
    setenv("OMP_WAIT_POLICY", "ACTIVE", 1);  // the user's: left alone
    assert_int_equal(gt_test_run_cli(&out, ahead), 0);
    assert_null(strstr((char *)out.data, said));
    gt_buf_free(&out);
    if (had) {
        setenv("OMP_WAIT_POLICY", kept, 1);
    } else {
        unsetenv("OMP_WAIT_POLICY");
    }
}

// The two files' bytes are equal.
static void assert_same_file(const char *a, const char *b)
{
    gt_buf x = {0}, y = {0};
    GT_ASSERT_OK(gt_file_read_all(a, 1u << 24, &x));
    GT_ASSERT_OK(gt_file_read_all(b, 1u << 24, &y));
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.data, y.data, x.len);
    gt_buf_free(&x);
    gt_buf_free(&y);
}

// --update-in-backward: the same printed losses, checkpoint and state bytes as the standard
// schedule (2 layers of 12 channels: slices off the 16-float blocks), said in the startup line;
// refused with what needs the whole gradient first.
static void update_in_backward_through_cli(void **state)
{
    (void)state;
    char ck[2][512], st[2][600];
    const char *base[] = {"train", "--init-random", "--layers", "2", "--channels", "12",
                          "--heads", "2", "--vocab", "250", "--max-seq", "16", "--seed", "3",
                          "--data", shard, "--batch", "2", "--seq", "8", "--steps", "4",
                          "--weight-decay", "0.1", "--threads", "1", "--plot", "none"};
    enum { NB = sizeof base / sizeof base[0] };
    const char *args[NB + 4];
    gt_buf out[2] = {{0}};
    char losses[2][256];
    for (int ib = 0; ib < 2; ib++) {
        GT_ASSERT_OK(gt_path_join(ck[ib], sizeof ck[ib], dir, ib ? "ib.bin" : "std.bin"));
        snprintf(st[ib], sizeof st[ib], "%s.state", ck[ib]);
        memcpy(args, base, sizeof base);
        args[NB] = "--out";
        args[NB + 1] = ck[ib];
        args[NB + 2] = ib ? "--update-in-backward" : NULL;
        args[NB + 3] = NULL;
        int rc = gt_test_run_cli(&out[ib], args);
        if (rc != 0) {
            fail_msg("exit %d: %s", rc, (char *)out[ib].data);
        }
        losses_of((char *)out[ib].data, losses[ib], sizeof losses[ib]);
    }
    assert_true(strlen(losses[0]) > 10);
    assert_string_equal(losses[0], losses[1]);
    assert_non_null(strstr((char *)out[0].data, "AdamW after the backward"));
    assert_non_null(strstr((char *)out[1].data, "AdamW in the backward"));
    assert_same_file(ck[0], ck[1]);
    assert_same_file(st[0], st[1]);
    const char *flags[][2] = {{"--grad-clip", "1"}, {"--grad-accum", "2"}};
    for (int i = 0; i < 2; i++) {
        memcpy(args, base, sizeof base);
        args[NB] = "--update-in-backward";
        args[NB + 1] = flags[i][0];
        args[NB + 2] = flags[i][1];
        args[NB + 3] = NULL;
        gt_buf o = {0};
        assert_int_equal(gt_test_run_cli(&o, args), 64);
        assert_non_null(strstr((char *)o.data, "need every gradient first"));
        assert_null(strstr((char *)o.data, "step 1/"));
        gt_buf_free(&o);
    }
    gt_buf_free(&out[0]);
    gt_buf_free(&out[1]);
}

// sample --text: GPT-2 BPE with --tokenizer (the committed subset), a warning without one.
static void sample_text_through_bpe(void **state)
{
    (void)state;
    char ck[512], tok[512];
    GT_ASSERT_OK(gt_path_join(ck, sizeof ck, dir, "gpt2v.bin"));
    GT_ASSERT_OK(gt_path_join(tok, sizeof tok, dir, "gpt2_tokenizer.bin"));
    gt_tokenizer *t = gt_test_gpt2_subset();
    GT_ASSERT_OK(gt_tokenizer_write(t, tok, 0644));
    gt_tokenizer_free(t);
    const char *args[] = {"train", "--init-random", "--layers", "1", "--channels", "8",
                          "--heads", "1", "--vocab", "50257", "--max-seq", "16", "--seed", "3",
                          "--data", shard, "--batch", "1", "--seq", "8", "--steps", "1",
                          "--threads", "1", "--out", ck, "--plot", "none", NULL};
    gt_buf o = {0};
    int rc = gt_test_run_cli(&o, args);
    if (rc != 0) {
        fail_msg("exit %d: %s", rc, (char *)o.data);
    }
    gt_buf_free(&o);
    const char *bpe[] = {"sample", ck, "--tokens", "2", "--text", " Hello, world!",
                         "--tokenizer", tok, "--threads", "1", NULL};
    assert_int_equal(gt_test_run_cli(&o, bpe), 0);
    assert_non_null(strstr((char *)o.data, "prompt: 4 tokens: 18435 11 995 0\n"));
    assert_null(strstr((char *)o.data, "warning"));
    gt_buf_free(&o);
    const char *bytes[] = {"sample", ck, "--tokens", "2", "--text", "hi", "--threads", "1", NULL};
    assert_int_equal(gt_test_run_cli(&o, bytes), 0);
    assert_non_null(strstr((char *)o.data, "warning: --text without --tokenizer"));
    assert_non_null(strstr((char *)o.data, "prompt: 2 tokens: 104 105\n"));
    gt_buf_free(&o);
}
// --resume refuses a checkpoint changed since its .state was saved, naming both files, and
// --resume-reset-optimizer continues from it.
static void resume_refuses_changed_checkpoint(void **state)
{
    (void)state;
    char ck[512];
    GT_ASSERT_OK(gt_path_join(ck, sizeof ck, dir, "edit.bin"));
    const char *first[] = {"train", "--init", MODEL, "--data", shard, "--batch", "2", "--seq",
                           "8", "--steps", "2", "--threads", "1", "--plot", "none", "--out", ck,
                           NULL};
    assert_int_equal(gt_test_run_cli(NULL, first), 0);
    gt_test_assert_mode(ck, 0600);
    gt_buf f = {0};
    GT_ASSERT_OK(gt_file_read_all(ck, 64u << 20, &f));
    f.data[1024 + 40] ^= 0x01;  // one weight's lowest bit
    GT_ASSERT_OK(gt_file_write_atomic(ck, f.data, f.len, 0644));
    gt_buf_free(&f);
    const char *again[] = {"train", "--resume", ck, "--data", shard, "--batch", "2", "--seq",
                           "8", "--steps", "3", "--threads", "1", "--plot", "none", NULL};
    gt_buf o = {0};
    assert_int_equal(gt_test_run_cli(&o, again), 1);
    assert_non_null(strstr((char *)o.data, "edit.bin was changed after"));
    assert_non_null(strstr((char *)o.data, "edit.bin.state was saved"));
    assert_non_null(strstr((char *)o.data, "--resume-reset-optimizer"));
    gt_buf_free(&o);
    const char *reset[] = {"train", "--resume", ck, "--resume-reset-optimizer", "--data", shard,
                           "--batch", "2", "--seq", "8", "--steps", "3", "--threads", "1",
                           "--plot", "none", NULL};
    assert_int_equal(gt_test_run_cli(&o, reset), 0);
    assert_non_null(strstr((char *)o.data, "AdamW moments reset, at step 2"));
    assert_non_null(strstr((char *)o.data, "step 3/3"));
    gt_buf_free(&o);
    const char *alone[] = {"train", "--init", MODEL, "--resume-reset-optimizer", "--data", shard,
                           NULL};
    assert_int_equal(gt_test_run_cli(NULL, alone), 64);
}
// --out-bf16: llm.c's version 5 file (half the payload), and a resume from it continues with
// the losses of an uninterrupted run (the state keeps the exact weights).
static void bf16_checkpoint_and_resume(void **state)
{
    (void)state;
    char ck[512];
    GT_ASSERT_OK(gt_path_join(ck, sizeof ck, dir, "half.bin"));
    const char *first[] = {"train", "--init", MODEL, "--data", shard, "--batch", "2", "--seq",
                           "8", "--steps", "2", "--threads", "1", "--plot", "none", "--out", ck,
                           "--out-bf16", "--shuffle", "on", "--seed", "5", "--schedule", "constant", NULL};
    assert_int_equal(gt_test_run_cli(NULL, first), 0);
    gt_test_assert_mode(ck, 0600);
    gt_buf f = {0};
    GT_ASSERT_OK(gt_file_read_all(ck, 64u << 20, &f));
    gt_buf g = {0};
    GT_ASSERT_OK(gt_file_read_all(MODEL, 64u << 20, &g));
    assert_int_equal(f.data[4], 5);  // version 5
    assert_int_equal(f.len - 1024, (g.len - 1024) / 2);
    gt_buf_free(&f);
    gt_buf_free(&g);
    const char *resume[] = {"train", "--resume", ck, "--data", shard, "--batch", "2", "--seq",
                            "8", "--steps", "4", "--threads", "1", "--plot", "none",
                            "--shuffle", "on", "--seed", "5", "--schedule", "constant", NULL};
    const char *full[] = {"train", "--init", MODEL, "--data", shard, "--batch", "2", "--seq",
                          "8", "--steps", "4", "--threads", "1", "--plot", "none", "--shuffle",
                          "on", "--seed", "5", "--schedule", "constant", NULL};
    gt_buf a = {0}, b = {0};
    assert_int_equal(gt_test_run_cli(&a, resume), 0);
    assert_null(strstr((char *)a.data, "warning"));
    assert_int_equal(gt_test_run_cli(&b, full), 0);
    float la[2], lb[4];
    assert_int_equal(parse_losses((char *)a.data, 2, la, 2), 2);
    assert_int_equal(parse_losses((char *)b.data, 0, lb, 4), 4);
    assert_memory_equal(la, lb + 2, sizeof la);
    gt_buf_free(&a);
    gt_buf_free(&b);
}
// Shard errors name the file and its flag; a shard too small for one batch is an error, not
// skipped, for --data among others and for --val-data; other llm.c files are named.
static void shard_errors_name_file_and_flag(void **state)
{
    (void)state;
    char tiny[512], eval[512];
    GT_ASSERT_OK(gt_path_join(tiny, sizeof tiny, dir, "tiny.bin"));
    GT_ASSERT_OK(gt_path_join(eval, sizeof eval, dir, "hellaswag_val.bin"));
    uint16_t tok[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    GT_ASSERT_OK(gt_shard_write(tiny, tok, 10));
    uint8_t hdr[1024] = {0};
    gt_store_u32le(hdr, 20240522);
    gt_store_u32le(hdr + 4, 1);
    GT_ASSERT_OK(gt_file_write_atomic(eval, hdr, sizeof hdr, 0644));
    struct {
        const char *flag, *file, *expect;
    } rows[] = {
        {"--data", tiny, "--data %s: 10 tokens, fewer than one batch of --batch 2 x --seq 8 + 1"},
        {"--val-data", tiny, "--val-data %s: 10 tokens"},
        {"--data", eval, "--data: %s: shard: bad magic 20240522: an llm.c evaluation file"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        bool val = strcmp(rows[i].flag, "--val-data") == 0;
        const char *args[] = {"train", "--init", MODEL, "--data", shard, val ? "--val-data" : "--data",
                              rows[i].file, "--batch", "2", "--seq", "8", "--steps", "1",
                              "--threads", "1", "--plot", "none", NULL};
        gt_buf o = {0};
        assert_int_equal(gt_test_run_cli(&o, args), 1);
        char want[1200];
        snprintf(want, sizeof want, rows[i].expect, rows[i].file);
        if (strstr((char *)o.data, want) == NULL) {
            fail_msg("row %zu: expected '%s' in: %s", i, want, (char *)o.data);
        }
        gt_buf_free(&o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(acceptance_command_matches_library, setup, teardown),
        cmocka_unit_test_setup_teardown(resume_through_cli, setup, teardown),
        cmocka_unit_test_setup_teardown(kill_during_training_then_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(sigint_saves_and_says_how_to_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_input_before_training, setup, teardown),
        cmocka_unit_test_setup_teardown(init_random_and_sample, setup, teardown),
        cmocka_unit_test_setup_teardown(sample_text_through_bpe, setup, teardown),
        cmocka_unit_test_setup_teardown(resume_refuses_changed_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(bf16_checkpoint_and_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(shard_errors_name_file_and_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(config_file_options, setup, teardown),
        cmocka_unit_test_setup_teardown(train_under_memory_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(prefetch_waits_passively, setup, teardown),
        cmocka_unit_test_setup_teardown(update_in_backward_through_cli, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
