// gputravel train: GPT-2 training on a device over llm.c shards; one line per step, optional
// JSON-lines log, loss-curve PNG (gnuplot), checkpoints with resumable training state.
#include "cli.h"
#include "train_dist.h"

#include <gputravel/data.h>
#include <gputravel/device.h>
#include <gputravel/train.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CMD "train"
#define MAX_SHARDS 256

static void usage(void)
{
    printf(
        "usage: gputravel train [OPTIONS] --data SHARD (--init CKPT | --init-random | --resume CKPT)\n"
        "\n"
        "Trains GPT-2 (llm.c checkpoints and token shards) on a device. With --agreement A.json\n"
        "it trains collaboratively on the holders' data instead ('gputravel train --agreement\n"
        "A.json --help').\n"
        "\n"
        "model:\n"
        "  --init CKPT             start from an llm.c checkpoint (fp32 or bf16)\n"
        "  --init-random           start from GPT-2 init: --layers L --channels C --heads NH\n"
        "                          --vocab V (padded to a multiple of 128) --max-seq maxT\n"
        "  --resume CKPT           continue from CKPT (fp32 or bf16) and CKPT.state (optimizer,\n"
        "                          loader, step);\n"
        "                          refused when CKPT's weights are not those CKPT.state was\n"
        "                          saved with\n"
        "  --resume-reset-optimizer  then continue from CKPT's weights with fresh AdamW moments\n"
        "                          (step and data position from CKPT.state)\n"
        "  --seed S                init and shuffle seed (default 1337)\n"
        "data:\n"
        "  --data SHARD            training shard (repeat for several)\n"
        "  --val-data SHARD        validation shard (repeat for several)\n"
        "  --val-every N           validation loss every N steps and at the end (default: end)\n"
        "  --val-batches N         batches per validation (default 5)\n"
        "  --shuffle on|off        seeded shuffling of shards and samples (default on)\n"
        "  --batch B --seq T       micro-batch shape (default 4 x 64)\n"
        "  --grad-accum K          micro-batches per step (default 1)\n"
        "optimizer (AdamW as llm.c; weight decay applies to every parameter):\n"
        "  --steps N               total steps (a resumed run continues to N; default 10)\n"
        "  --lr F --beta1 F --beta2 F --eps F --weight-decay F   (defaults 3e-4 0.9 0.999 1e-8 0)\n"
        "  --schedule constant|cosine  --warmup N  --lr-final-frac F  (defaults cosine 0 0.1)\n"
        "  --grad-clip F           clip the global gradient norm (0: off, the default)\n"
        "  --update-in-backward    each tensor's AdamW inside the backward, once its gradient\n"
        "                          is final (after its layer's backward), which is then zeroed:\n"
        "                          the same parameters bit for bit; under a memory cap\n"
        "                          (--mem-limit, or devd's) less paging: the gradients need not\n"
        "                          go out and in again for the update (docs/train.md). Refused\n"
        "                          with --grad-clip, --grad-accum > 1 and --distributed (they\n"
        "                          need the whole, summed gradient first)\n"
        "device and output:\n"
        "  --device cpu|sim|cuda   (default cpu)   --threads N (default: all cores)\n"
        "  --device-socket PATH    sim: the socket of a running 'gputravel devd'\n"
        "  --mem-limit BYTES       cpu: device memory; past it allocations are refused, or with\n"
        "  --paging-store DIR      paged: buffers may total more, at most BYTES resident, cold\n"
        "                          pages sealed into DIR (docs/paging.md; sim: devd's own flags)\n"
        "  --page-size BYTES       paging unit (default 64KiB)\n"
        "  --prefetch              paged: a second thread loads pages ahead, from the step's op\n"
        "                          stream; OpenMP then waits passively (OMP_WAIT_POLICY, unless set)\n"
        "  --out CKPT              write CKPT (llm.c) and CKPT.state at the end\n"
        "  --save-every N          also write them every N steps\n"
        "  --out-bf16              CKPT as llm.c version 5 (bf16 weights, train_gpt2cu's\n"
        "                          format); CKPT.state keeps them exact for --resume\n"
        "  --log-json PATH         one JSON object per step\n"
        "  --plot PNG              loss curve (default CKPT.loss.png with --out; 'none' skips)\n"
        "  --config FILE           more options from FILE: a JSON object whose keys are these\n"
        "                          long options without -- (a string or number each, a list\n"
        "                          for --data and --val-data, true for a flag), e.g.\n"
        "                          {\"data\": [\"train.bin\"], \"steps\": 100}; unknown keys and\n"
        "                          wrong types are errors; the command line overrides it. A file\n"
        "                          with \"agreement\" is one of train --agreement's\n"
        "ranks (data-parallel on Open MPI; docs/collective.md \"Training across ranks\"):\n"
        "  --distributed           one rank of 'mpirun -np N gputravel train --distributed ...':\n"
        "                          rank r trains on batches r, r+N, r+2N, ... of the stream,\n"
        "                          the gradients are summed by the devices over an encrypted\n"
        "                          ring, every rank applies the same update; rank 0 prints and\n"
        "                          writes the outputs. N ranks with --batch B match one rank\n"
        "                          with --batch N*B (--shuffle off)\n"
        "  --peers A.json          with --distributed: the agreement that admits the ranks'\n"
        "                          devices (trainer.ranks = N, accepted trainer and device\n"
        "                          measurements, allow_simulation)\n"
        "                          (--device sim: --device-socket may hold %%r, the rank)\n"
        "  --zero 0|1              with --distributed: 1 shards the AdamW state across the\n"
        "                          ranks (ZeRO-1: reduce-scatter the gradients, update this\n"
        "                          rank's 1/N, all-gather the parameters); 0 (default)\n"
        "                          keeps it replicated (all-reduce, every rank updates all)\n"
        "\n"
        "Each step prints: step N/M | loss X | lr X | [norm X |] X ms | X tok/s\n"
        "and each validation: val N/M | val loss X\n");
}

typedef struct {
    const char *init, *resume, *out, *log_json, *plot;
    bool init_random;
    int L, C, NH, V, maxT;
    uint64_t seed;
    const char *data[MAX_SHARDS], *val[MAX_SHARDS];
    int ndata, nval;
    int val_every, val_batches;
    bool shuffle;
    bool resume_reset;  // --resume-reset-optimizer
    bool out_bf16;      // --out-bf16: llm.c version 5 checkpoints
    int B, T, accum, steps, save_every, threads;
    gt_adamw opt;
    gt_lr_schedule sched;
    gt_device_kind device;
    const char *device_socket;  // sim: devd's socket
    uint64_t mem_limit;         // cpu: bytes (0: none)
    const char *paging_store;   // cpu: page beyond mem_limit into this directory
    uint64_t page_bytes;
    bool prefetch;              // cpu, paged: the pager's prefetch thread
    bool distributed;           // a rank of mpirun -np N
    const char *peers;          // --peers: the agreement admitting the ranks
    int zero;                   // --zero: ZeRO stage (0 replicated, 1 sharded AdamW state)
} train_opts;

// The message is train's own ("bad value ... for --FLAG"), so the flag is not named here.
static bool parse_int(const char *s, int lo, int hi, int *out)
{
    return gt_is_ok(gt_cli_parse_int("", s, lo, hi, out));
}

static bool parse_float(const char *s, float *out)
{
    char *end = NULL;
    errno = 0;
    float v = strtof(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v)) {
        return false;
    }
    *out = v;
    return true;
}

// long_opts lists the options in this order: a bad value's message finds the name by index.
enum {
    O_INIT = 1000, O_INIT_RANDOM, O_RESUME, O_LAYERS, O_CHANNELS, O_HEADS, O_VOCAB, O_MAXSEQ,
    O_SEED, O_DATA, O_VAL, O_VAL_EVERY, O_VAL_BATCHES, O_SHUFFLE, O_BATCH, O_SEQ, O_ACCUM,
    O_STEPS, O_LR, O_BETA1, O_BETA2, O_EPS, O_WD, O_SCHEDULE, O_WARMUP, O_FINAL, O_CLIP,
    O_DEVICE, O_DEVICE_SOCKET, O_THREADS, O_OUT, O_SAVE_EVERY, O_LOG_JSON, O_PLOT,
    O_RESUME_RESET, O_OUT_BF16, O_MEM_LIMIT, O_PAGING_STORE, O_PAGE_SIZE, O_PREFETCH,
    O_DISTRIBUTED, O_PEERS, O_ZERO, O_UPDATE_IN_BACKWARD,
};

static const struct option long_opts[] = {
    {"init", required_argument, NULL, O_INIT},
    {"init-random", no_argument, NULL, O_INIT_RANDOM},
    {"resume", required_argument, NULL, O_RESUME},
    {"layers", required_argument, NULL, O_LAYERS},
    {"channels", required_argument, NULL, O_CHANNELS},
    {"heads", required_argument, NULL, O_HEADS},
    {"vocab", required_argument, NULL, O_VOCAB},
    {"max-seq", required_argument, NULL, O_MAXSEQ},
    {"seed", required_argument, NULL, O_SEED},
    {"data", required_argument, NULL, O_DATA},
    {"val-data", required_argument, NULL, O_VAL},
    {"val-every", required_argument, NULL, O_VAL_EVERY},
    {"val-batches", required_argument, NULL, O_VAL_BATCHES},
    {"shuffle", required_argument, NULL, O_SHUFFLE},
    {"batch", required_argument, NULL, O_BATCH},
    {"seq", required_argument, NULL, O_SEQ},
    {"grad-accum", required_argument, NULL, O_ACCUM},
    {"steps", required_argument, NULL, O_STEPS},
    {"lr", required_argument, NULL, O_LR},
    {"beta1", required_argument, NULL, O_BETA1},
    {"beta2", required_argument, NULL, O_BETA2},
    {"eps", required_argument, NULL, O_EPS},
    {"weight-decay", required_argument, NULL, O_WD},
    {"schedule", required_argument, NULL, O_SCHEDULE},
    {"warmup", required_argument, NULL, O_WARMUP},
    {"lr-final-frac", required_argument, NULL, O_FINAL},
    {"grad-clip", required_argument, NULL, O_CLIP},
    {"device", required_argument, NULL, O_DEVICE},
    {"device-socket", required_argument, NULL, O_DEVICE_SOCKET},
    {"threads", required_argument, NULL, O_THREADS},
    {"out", required_argument, NULL, O_OUT},
    {"save-every", required_argument, NULL, O_SAVE_EVERY},
    {"log-json", required_argument, NULL, O_LOG_JSON},
    {"plot", required_argument, NULL, O_PLOT},
    {"resume-reset-optimizer", no_argument, NULL, O_RESUME_RESET},
    {"out-bf16", no_argument, NULL, O_OUT_BF16},
    {"mem-limit", required_argument, NULL, O_MEM_LIMIT},
    {"paging-store", required_argument, NULL, O_PAGING_STORE},
    {"page-size", required_argument, NULL, O_PAGE_SIZE},
    {"prefetch", no_argument, NULL, O_PREFETCH},
    {"distributed", no_argument, NULL, O_DISTRIBUTED},
    {"peers", required_argument, NULL, O_PEERS},
    {"zero", required_argument, NULL, O_ZERO},
    {"update-in-backward", no_argument, NULL, O_UPDATE_IN_BACKWARD},
    {NULL, 0, NULL, 0},
};

// One option into o; false when its value is bad, *unknown set for an option not in the table.
static bool parse_one(int c, train_opts *o, bool *unknown)
{
    bool ok = true;
    switch (c) {
    case O_INIT: o->init = optarg; break;
    case O_INIT_RANDOM: o->init_random = true; break;
    case O_RESUME: o->resume = optarg; break;
    case O_RESUME_RESET: o->resume_reset = true; break;
    case O_OUT_BF16: o->out_bf16 = true; break;
    case O_LAYERS: ok = parse_int(optarg, 1, 1024, &o->L); break;
    case O_CHANNELS: ok = parse_int(optarg, 1, 16384, &o->C); break;
    case O_HEADS: ok = parse_int(optarg, 1, 16384, &o->NH); break;
    case O_VOCAB: ok = parse_int(optarg, 1, 65536, &o->V); break;
    case O_MAXSEQ: ok = parse_int(optarg, 1, 65536, &o->maxT); break;
    case O_SEED: ok = gt_is_ok(gt_cli_parse_u64("--seed", optarg, 0, UINT64_MAX, &o->seed)); break;
    case O_DATA:
        ok = o->ndata < MAX_SHARDS;
        if (ok) {
            o->data[o->ndata++] = optarg;
        }
        break;
    case O_VAL:
        ok = o->nval < MAX_SHARDS;
        if (ok) {
            o->val[o->nval++] = optarg;
        }
        break;
    case O_VAL_EVERY: ok = parse_int(optarg, 0, INT32_MAX, &o->val_every); break;
    case O_VAL_BATCHES: ok = parse_int(optarg, 1, INT32_MAX, &o->val_batches); break;
    case O_SHUFFLE:
        ok = strcmp(optarg, "on") == 0 || strcmp(optarg, "off") == 0;
        o->shuffle = strcmp(optarg, "on") == 0;
        break;
    case O_BATCH: ok = parse_int(optarg, 1, 1 << 16, &o->B); break;
    case O_SEQ: ok = parse_int(optarg, 1, 65536, &o->T); break;
    case O_ACCUM: ok = parse_int(optarg, 1, 1 << 16, &o->accum); break;
    case O_STEPS: ok = parse_int(optarg, 0, INT32_MAX, &o->steps); break;
    case O_LR: ok = parse_float(optarg, &o->sched.lr) && o->sched.lr >= 0.0f; break;
    case O_BETA1: ok = parse_float(optarg, &o->opt.beta1); break;
    case O_BETA2: ok = parse_float(optarg, &o->opt.beta2); break;
    case O_EPS: ok = parse_float(optarg, &o->opt.eps); break;
    case O_WD: ok = parse_float(optarg, &o->opt.weight_decay); break;
    case O_SCHEDULE: ok = gt_is_ok(gt_lr_kind_parse(optarg, &o->sched.kind)); break;
    case O_WARMUP: ok = parse_int(optarg, 0, INT32_MAX, &o->sched.warmup); break;
    case O_FINAL: ok = parse_float(optarg, &o->sched.final_frac); break;
    case O_CLIP: ok = parse_float(optarg, &o->opt.grad_clip) && o->opt.grad_clip >= 0; break;
    case O_DEVICE: ok = gt_is_ok(gt_device_kind_parse(optarg, &o->device)); break;
    case O_DEVICE_SOCKET: o->device_socket = optarg; break;
    case O_THREADS: ok = parse_int(optarg, 0, 1024, &o->threads); break;
    case O_OUT: o->out = optarg; break;
    case O_SAVE_EVERY: ok = parse_int(optarg, 0, INT32_MAX, &o->save_every); break;
    case O_LOG_JSON: o->log_json = optarg; break;
    case O_PLOT: o->plot = optarg; break;
    case O_MEM_LIMIT: ok = gt_is_ok(gt_parse_size(optarg, &o->mem_limit)) && o->mem_limit; break;
    case O_PAGING_STORE: o->paging_store = optarg; break;
    case O_PAGE_SIZE:
        ok = gt_is_ok(gt_parse_size(optarg, &o->page_bytes)) && o->page_bytes <= (1u << 20);
        break;
    case O_PREFETCH: o->prefetch = true; break;
    case O_DISTRIBUTED: o->distributed = true; break;
    case O_PEERS: o->peers = optarg; break;
    case O_ZERO: ok = parse_int(optarg, 0, 1, &o->zero); break;
    case O_UPDATE_IN_BACKWARD: o->opt.update_in_backward = true; break;
    default: *unknown = true; break;
    }
    return ok;
}

// The options together: one model source, data, and an --out folder that can be written.
static int parse_check(int argc, char **argv, const train_opts *o)
{
    if (optind != argc) {
        return gt_cli_usage(CMD, "unexpected argument '%s'", argv[optind]);
    }
    int sources = (o->init != NULL) + o->init_random + (o->resume != NULL);
    if (sources != 1) {
        return gt_cli_usage(CMD, "give exactly one of --init, --init-random, --resume");
    }
    if (o->resume_reset && o->resume == NULL) {
        return gt_cli_usage(CMD, "--resume-reset-optimizer goes with --resume CKPT");
    }
    if (o->ndata == 0) {
        return gt_cli_usage(CMD, "--data is required");
    }
    if (o->device == GT_DEVICE_SIM && o->device_socket == NULL) {
        return gt_cli_usage(CMD, "--device sim needs --device-socket PATH (a running devd)");
    }
    if ((o->mem_limit || o->paging_store || o->page_bytes) && o->device != GT_DEVICE_CPU) {
        return gt_cli_usage(CMD, "--mem-limit, --paging-store and --page-size are the cpu "
                                 "device's (sim: give them to devd)");
    }
    if (o->paging_store != NULL && o->mem_limit == 0) {
        return gt_cli_usage(CMD, "--paging-store needs --mem-limit BYTES (the resident cap)");
    }
    if (o->prefetch && o->paging_store == NULL) {
        return gt_cli_usage(CMD, "--prefetch needs --paging-store DIR");
    }
    if (o->page_bytes != 0 && o->paging_store == NULL) {
        return gt_cli_usage(CMD, "--page-size needs --paging-store DIR");
    }
    if (o->distributed != (o->peers != NULL)) {
        return gt_cli_usage(CMD, "--distributed and --peers A.json go together");
    }
    if (o->zero != 0 && !o->distributed) {
        return gt_cli_usage(CMD, "--zero shards across ranks: it needs --distributed");
    }
    if (o->distributed && o->resume != NULL) {
        return gt_cli_usage(CMD, "--resume across ranks is not done yet (docs/collective.md)");
    }
    if (o->opt.update_in_backward && (o->opt.grad_clip > 0.0f || o->accum > 1 || o->distributed)) {
        return gt_cli_usage(CMD, "--update-in-backward updates each tensor as soon as its "
                                 "gradient is final: --grad-clip (the norm of the whole "
                                 "gradient), --grad-accum > 1 and --distributed (the sum over "
                                 "micro-batches or ranks) need every gradient first");
    }
    if (o->save_every > 0 && o->out == NULL) {
        return gt_cli_usage(CMD, "--save-every needs --out");
    }
    if (o->out != NULL) {
        // Found out now, not after the last step: the folder must exist and be writable.
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", o->out);
        char *slash = strrchr(dir, '/');
        const char *folder = slash == NULL ? "." : slash == dir ? "/" : (*slash = '\0', dir);
        if (access(folder, W_OK) != 0) {
            return gt_cli_fail(CMD, gt_errf(GT_E_IO, "--out %s: cannot write into %s: %s",
                                            o->out, folder, strerror(errno)));
        }
    }
    return 0;
}

// Returns 0 on success, else the exit status to return.
static int parse(int argc, char **argv, train_opts *o)
{
    *o = (train_opts){
        .L = 12, .C = 768, .NH = 12, .V = 50257, .maxT = 1024, .seed = 1337, .val_batches = 5,
        .shuffle = true, .B = 4, .T = 64, .accum = 1, .steps = 10, .threads = 0,
        .opt = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.0f},
        .sched = {.kind = GT_LR_COSINE, .lr = 3e-4f, .final_frac = 0.1f},
        .device = GT_DEVICE_CPU,
    };
    int c;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        bool unknown = false;
        bool ok = parse_one(c, o, &unknown);
        if (unknown) {
            return gt_cli_usage(CMD, "unknown option");
        }
        if (!ok) {
            return gt_cli_usage(CMD, "bad value '%s' for --%s", optarg ? optarg : "",
                                long_opts[c - O_INIT].name);
        }
    }
    int rc = parse_check(argc, argv, o);
    if (rc != 0) {
        return rc;
    }
    o->sched.total_steps = o->steps;
    return 0;
}

typedef struct {
    gt_dbuf bufs[MAX_SHARDS];
    uint64_t ntok[MAX_SHARDS];
    int n;
} shard_set;

// Each shard on its own first: an error names the file and the flag it came from, and a shard
// too small for one batch is an error (llm.c's loader would skip it without a word).
static gt_err load_shards(gt_device *dev, const char *flag, const char *const *paths, int n,
                          const train_opts *o, int V, shard_set *s)
{
    uint64_t need = (uint64_t)o->B * (uint64_t)o->T + 1;
    for (int i = 0; i < n; i++) {
        // Token data is holder data: the trainer never reads it back.
        GT_TRY(gt_err_wrap(gt_shard_to_device(dev, paths[i], GT_DBUF_NO_READBACK, &s->bufs[i],
                                              &s->ntok[i]),
                           "%s", flag));  // the reader's message names the file
        s->n = i + 1;
        GT_ENSURE(s->ntok[i] >= need, GT_E_ARG,
                  "%s %s: %llu tokens, fewer than one batch of --batch %d x --seq %d + 1 = %llu",
                  flag, paths[i], (unsigned long long)s->ntok[i], o->B, o->T,
                  (unsigned long long)need);
        gt_loader *one = NULL;
        GT_TRY(gt_err_wrap(gt_loader_create(&one, dev, &s->bufs[i], &s->ntok[i], 1, o->B, o->T, V,
                                            false, 0),
                           "%s %s", flag, paths[i]));
        gt_loader_free(one);
    }
    return GT_OK;
}

static gt_err save_all(gt_gpt2 *m, gt_loader *l, const char *out, bool bf16)
{
    char state[4200];
    GT_ENSURE(snprintf(state, sizeof state, "%s.state", out) < (int)sizeof state, GT_E_LIMIT,
              "path too long: %s", out);
    if (gt_gpt2_zero_sharded(m)) {  // this rank holds 1/N of the AdamW state: no state file
        return bf16 ? gt_gpt2_save_bf16(m, out) : gt_gpt2_save(m, out);
    }
    // The state first: killed in between, the state is one save ahead of the checkpoint and
    // says so (its "previous" hash), and a resume continues from the state (train.h).
    if (bf16) {
        GT_TRY(gt_train_state_save_bf16(m, gt_loader_tell(l), state));
        return gt_gpt2_save_bf16(m, out);
    }
    GT_TRY(gt_train_state_save(m, gt_loader_tell(l), state));
    return gt_gpt2_save(m, out);
}

static gt_err validate(gt_gpt2 *m, gt_loader *val, int batches, int B, int T, float *loss)
{
    // Every validation pass reads the same batches: rewind first.
    GT_TRY(gt_loader_seek(val, (gt_loader_pos){.epoch = 0}));
    double sum = 0.0;
    for (int i = 0; i < batches; i++) {
        float l = 0.0f;
        GT_TRY(gt_loader_next(val));
        GT_TRY(gt_gpt2_forward(m, gt_loader_inputs(val), gt_loader_targets(val), B, T, &l));
        sum += l;
    }
    *loss = (float)(sum / batches);
    return GT_OK;
}

static void plot(const char *png, const float *train, const float *val, int first, int n)
{
    double *x = calloc((size_t)n, sizeof *x), *y = calloc((size_t)n, sizeof *y);
    double *vx = calloc((size_t)n, sizeof *vx), *vy = calloc((size_t)n, sizeof *vy);
    size_t nv = 0;
    gt_err e = GT_OK;
    if (x == NULL || y == NULL || vx == NULL || vy == NULL) {
        e = gt_errf(GT_E_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        x[i] = first + i + 1;
        y[i] = train[i];
        if (!isnan(val[i])) {
            vx[nv] = x[i];
            vy[nv++] = val[i];
        }
    }
    gt_plot_series series[2] = {{"train", x, y, (size_t)n}, {"val", vx, vy, nv}};
    gt_plot_style style = {.title = "gputravel train", .xlabel = "step", .ylabel = "loss"};
    e = gt_plot_lines(png, &style, series, nv > 0 ? 2 : 1);
out:
    if (e.code == GT_E_UNSUPPORTED) {
        fprintf(stderr, "gputravel train: no loss plot (%s)\n", e.msg);
    } else if (e.code != GT_E_NONE) {
        fprintf(stderr, "gputravel train: loss plot failed: %s\n", e.msg);
    } else if (!gt_cli.quiet) {
        fprintf(stderr, "loss curve: %s\n", png);
    }
    free(x);
    free(y);
    free(vx);
    free(vy);
}

// What a training run holds until it ends (freed by train_free).
typedef struct {
    gt_device *dev;
    gt_gpt2 *m;
    gt_loader *train, *val;
    shard_set data, vdata;
    FILE *log;
    float *curve, *vcurve;  // per step done: training loss, validation loss (NaN: none)
    int first, done;        // the step training starts from; steps done in this run
    bool interrupted;       // stopped by a signal, saved (interrupted())
    train_dist *dist;       // --distributed: this rank's part (NULL: one trainer)
} train_run;

static gt_err open_model(const train_opts *o, train_run *r)
{
    gt_device_config dc = {.kind = o->device, .threads = o->threads,
                           .socket_path = o->device_socket, .mem_limit = o->mem_limit,
                           .paging_store = o->paging_store, .page_bytes = (uint32_t)o->page_bytes,
                           .paging_prefetch = o->prefetch};
    if (r->dist != NULL) {
        GT_TRY(gt_train_dist_open_device(r->dist, &dc, o->device_socket, &r->dev));
    } else {
        GT_TRY(gt_device_open(&r->dev, &dc));
    }
    if (o->init_random) {
        gt_gpt2_config cfg = {.max_seq_len = o->maxT, .vocab_size = o->V,
                              .padded_vocab_size = gt_gpt2_pad_vocab(o->V), .num_layers = o->L,
                              .num_heads = o->NH, .channels = o->C};
        GT_TRY(gt_gpt2_create(&r->m, r->dev, &cfg));
        return gt_gpt2_init_random(r->m, o->seed);
    }
    return gt_gpt2_load(&r->m, r->dev, o->resume ? o->resume : o->init);
}

// --resume: CKPT.state over the model loaded from CKPT, saying what was taken from where.
static gt_err resume_state(const train_opts *o, train_run *r, const char *state,
                           gt_loader_pos *pos)
{
    gt_resume_info info;
    gt_err e = gt_train_resume(r->m, pos, state,
                               o->resume_reset ? GT_RESUME_RESET_OPTIMIZER : GT_RESUME_STRICT,
                               &info);
    if (e.code == GT_E_STATE) {
        // The paths make the error long: the way out goes on a line of its own.
        fprintf(stderr, "gputravel train: restore %s, or give --resume-reset-optimizer to "
                        "continue from its weights with fresh AdamW moments\n",
                o->resume);
        return gt_errf(GT_E_STATE, "%s was changed after %s was saved", o->resume, state);
    }
    GT_TRY(e);
    switch (info.outcome) {
    case GT_RESUME_MATCHED: break;
    case GT_RESUME_STATE_AHEAD:
        fprintf(stderr, "gputravel train: %s is one save behind %s (the run stopped between "
                        "the two writes): continuing from %s's step %llu\n",
                o->resume, state, state, (unsigned long long)info.step);
        break;
    case GT_RESUME_OPTIMIZER_RESET:
        fprintf(stderr, "gputravel train: %s's weights differ from those %s was saved with: "
                        "continuing from %s's weights, AdamW moments reset, at step %llu\n",
                o->resume, state, o->resume, (unsigned long long)info.step);
        break;
    case GT_RESUME_LEGACY:
        fprintf(stderr, "gputravel train: warning: %s (version 1) records no weights hash; the "
                        "weights are those it holds, not %s's\n",
                state, o->resume);
        break;
    default: break;
    }
    return GT_OK;
}

// Device, model, data and loaders; with --resume the optimizer, loader and step as saved.
static gt_err setup(const train_opts *o, train_run *r)
{
    GT_TRY(open_model(o, r));
    const gt_gpt2_config *cfg = gt_gpt2_get_config(r->m);
    GT_ENSURE(o->T <= cfg->max_seq_len, GT_E_ARG, "--seq %d exceeds the model's max_seq_len %d",
              o->T, cfg->max_seq_len);
    GT_TRY(load_shards(r->dev, "--data", o->data, o->ndata, o, cfg->vocab_size, &r->data));
    GT_TRY(gt_loader_create(&r->train, r->dev, r->data.bufs, r->data.ntok, (size_t)r->data.n,
                            o->B, o->T, cfg->vocab_size, o->shuffle, o->seed));
    if (o->nval > 0) {
        GT_TRY(load_shards(r->dev, "--val-data", o->val, o->nval, o, cfg->vocab_size, &r->vdata));
        GT_TRY(gt_loader_create(&r->val, r->dev, r->vdata.bufs, r->vdata.ntok,
                                (size_t)r->vdata.n, o->B, o->T, cfg->vocab_size, false, 0));
    }
    if (o->resume) {
        char state[4200];
        snprintf(state, sizeof state, "%s.state", o->resume);
        gt_loader_pos pos = {0};
        GT_TRY(resume_state(o, r, state, &pos));
        GT_TRY(gt_loader_seek(r->train, pos));
        r->first = (int)gt_gpt2_step(r->m);
        GT_ENSURE(r->first <= o->steps, GT_E_ARG,
                  "--steps %d: the checkpoint is already at step %d", o->steps, r->first);
    }
    if (r->dist != NULL) {
        gt_dbuf grads = 0;
        GT_TRY(gt_gpt2_grads_buf(r->m, &grads));
        GT_TRY(gt_train_dist_start(r->dist, r->dev, grads));
        GT_TRY(o->zero ? gt_train_dist_zero_start(r->dist, r->m) : GT_OK);
    }
    if (o->log_json) {
        r->log = fopen(o->log_json, o->resume ? "a" : "w");
        GT_ENSURE(r->log != NULL, GT_E_IO, "%s: %s", o->log_json, strerror(errno));
    }
    r->curve = calloc((size_t)(o->steps - r->first) + 1, sizeof *r->curve);
    r->vcurve = calloc((size_t)(o->steps - r->first) + 1, sizeof *r->vcurve);
    GT_ENSURE(r->curve && r->vcurve, GT_E_NOMEM, "out of memory");
    if (!gt_cli.quiet) {
        fprintf(stderr,
                "model: L=%d C=%d NH=%d V=%d (Vp %d) maxT=%d, %zu parameters; data: %llu "
                "samples of %d x %d; device %s; AdamW %s\n",
                cfg->num_layers, cfg->channels, cfg->num_heads, cfg->vocab_size,
                cfg->padded_vocab_size, cfg->max_seq_len, gt_gpt2_num_params(r->m),
                (unsigned long long)gt_loader_num_samples(r->train), o->B, o->T,
                gt_device_kind_name(o->device),
                o->opt.update_in_backward ? "in the backward, per tensor (--update-in-backward)"
                                          : "after the backward");
    }
    return GT_OK;
}

// What one step measured, for its printed line and its JSON line.
typedef struct {
    int step;  // 1-based
    float loss, lr, norm, vloss;  // norm, vloss: NaN when not computed
    double ms, tokens_per_s;
} step_result;

static void print_step(const train_opts *o, const step_result *s)
{
    printf("step %d/%d | loss %.6f | lr %.3e | ", s->step, o->steps, s->loss, s->lr);
    if (!isnan(s->norm)) {
        printf("norm %.4f | ", s->norm);
    }
    printf("%.1f ms | %.0f tok/s\n", s->ms, s->tokens_per_s);
    fflush(stdout);
}

static void log_step(FILE *log, const step_result *s)
{
    if (log == NULL) {
        return;
    }
    fprintf(log, "{\"step\": %d, \"loss\": %.9g, \"lr\": %.9g, \"ms\": %.3f, "
            "\"tokens_per_s\": %.1f", s->step, s->loss, s->lr, s->ms, s->tokens_per_s);
    if (!isnan(s->norm)) {
        fprintf(log, ", \"grad_norm\": %.9g", s->norm);
    }
    if (!isnan(s->vloss)) {
        fprintf(log, ", \"val_loss\": %.9g", s->vloss);
    }
    fprintf(log, "}\n");
    fflush(log);
}

// The next batch of this trainer: with N ranks, rank r takes batches r, r+N, r+2N, ... of the
// one stream (the skipped ones are the other ranks'), so that the N batches of one micro-step
// are, in rank order, the batch of one rank with N times the batch size.
static gt_err next_batch(train_run *r)
{
    for (int i = 0; i <= (r->dist ? r->dist->rank : 0); i++) {  // the last one is this rank's
        GT_TRY(gt_loader_next(r->train));
    }
    return GT_OK;
}

// After the micro-step: the batches of the ranks after this one are skipped.
static gt_err skip_rest(train_run *r)
{
    for (int i = r->dist ? r->dist->rank + 1 : 1; r->dist && i < r->dist->nranks; i++) {
        GT_TRY(gt_loader_next(r->train));
    }
    return GT_OK;
}

// The micro-batches of one step; with ranks, the gradients summed over them on the devices and
// the loss the mean of the ranks' released losses.
static gt_err step_grads(const train_opts *o, train_run *r, int step, float *loss)
{
    // Every rank's gradient carries 1/N (on the device, through dloss), so the sum the ring
    // makes is the mean: nothing is scaled on the host, nothing copied out.
    int nranks = r->dist ? r->dist->nranks : 1;
    GT_TRY(gt_gpt2_zero_grad(r->m));
    double loss_sum = 0.0;
    for (int k = 0; k < o->accum; k++) {
        float l = 0.0f;
        GT_TRY(next_batch(r));
        GT_TRY(gt_gpt2_forward_backward(r->m, gt_loader_inputs(r->train),
                                        gt_loader_targets(r->train), o->B, o->T,
                                        1.0f / ((float)o->accum * (float)nranks), &l));
        GT_TRY(skip_rest(r));
        loss_sum += l;
    }
    *loss = (float)(loss_sum / o->accum);
    if (r->dist == NULL) {
        return GT_OK;
    }
    GT_TRY(gt_train_dist_sum_grads(r->dist, r->m, (uint64_t)step, o->opt.grad_clip > 0.0f));
    return gt_train_dist_mean(r->dist, *loss, loss);
}

// The gradients and the update of one step: grad-accum micro-batches, then the update; or
// (--update-in-backward, one micro-batch, one rank) the update inside the backward.
static gt_err step_update(const train_opts *o, train_run *r, int step, float lr, float *loss,
                          float *norm)
{
    if (o->opt.update_in_backward) {
        GT_TRY(next_batch(r));
        return gt_gpt2_step_in_backward(r->m, gt_loader_inputs(r->train),
                                        gt_loader_targets(r->train), o->B, o->T, 1.0f, &o->opt,
                                        lr, loss);
    }
    GT_TRY(step_grads(o, r, step, loss));
    GT_TRY(gt_gpt2_update(r->m, &o->opt, lr, o->opt.grad_clip > 0.0f ? norm : NULL));
    return r->dist ? gt_train_dist_after_update(r->dist, (uint64_t)step) : GT_OK;
}

// One optimizer step (step is 0-based).
static gt_err train_step(const train_opts *o, train_run *r, int step, step_result *out)
{
    double t0 = gt_now_seconds();
    float loss = 0.0f;
    float lr = gt_lr_at(&o->sched, step), norm = NAN;
    GT_TRY(step_update(o, r, step, lr, &loss, &norm));
    double ms = (gt_now_seconds() - t0) * 1000.0;
    double tokens_per_step = (double)o->B * o->T * o->accum * (r->dist ? r->dist->nranks : 1);
    *out = (step_result){.step = step + 1, .loss = loss, .lr = lr, .norm = norm, .vloss = NAN,
                         .ms = ms, .tokens_per_s = tokens_per_step / (ms / 1000.0)};
    r->curve[r->done] = loss;
    r->vcurve[r->done] = NAN;
    r->done++;
    return GT_OK;
}

// One trainer, or rank 0 of several: who prints the progress.
static bool speaks(const train_run *r) { return r->dist == NULL || r->dist->rank == 0; }

// The validation loss after step s->step when it is due (every --val-every, and the last).
static gt_err validate_if_due(const train_opts *o, train_run *r, step_result *s)
{
    bool last = s->step == o->steps;
    if (r->val == NULL || !(last || (o->val_every > 0 && s->step % o->val_every == 0))) {
        return GT_OK;
    }
    GT_TRY(validate(r->m, r->val, o->val_batches, o->B, o->T, &s->vloss));
    r->vcurve[r->done - 1] = s->vloss;
    if (!speaks(r)) {
        return GT_OK;
    }
    printf("val %d/%d | val loss %.6f\n", s->step, o->steps, s->vloss);
    fflush(stdout);
    return GT_OK;
}

// Ctrl-C or SIGTERM between steps: the checkpoint and its state as at this step (with --out),
// and how to go on.
static gt_err interrupted(const train_opts *o, train_run *r, int step)
{
    const char *sig = strsignal(gt_interrupted());
    if (o->out == NULL) {
        return gt_errf(GT_E_STATE, "stopped by %s at step %d of %d; nothing saved (no --out)",
                       sig, step, o->steps);
    }
    GT_TRY(save_all(r->m, r->train, o->out, o->out_bf16));
    fprintf(stderr, "gputravel train: stopped by %s at step %d of %d; saved %s and %s.state: "
                    "continue with the same options and --resume %s (instead of --init)\n",
            sig, step, o->steps, o->out, o->out, o->out);
    r->interrupted = true;
    return GT_OK;
}

// Every step from r->first to --steps, then the checkpoint and the loss plot.
static gt_err run(const train_opts *o, train_run *r)
{
    GT_TRY(setup(o, r));
    for (int step = r->first; step < o->steps; step++) {
        if (gt_interrupted()) {
            return interrupted(o, r, step);
        }
        step_result s;
        GT_TRY(train_step(o, r, step, &s));
        if (speaks(r)) {
            print_step(o, &s);
        }
        GT_TRY(validate_if_due(o, r, &s));
        log_step(r->log, &s);
        if (o->save_every > 0 && (step + 1) % o->save_every == 0 && step + 1 != o->steps) {
            GT_TRY(save_all(r->m, r->train, o->out, o->out_bf16));
        }
    }
    if (r->dist != NULL && !r->interrupted) {
        char hex[17];
        GT_TRY(gt_train_dist_same_params(r->dist, r->m, hex));
        if (speaks(r)) {
            printf("ranks %d | parameters identical on every rank (sha256 %s...) | collectives "
                   "%.3f s in all\n", r->dist->nranks, hex, r->dist->ring_s);
        }
    }
    if (o->out != NULL && !r->interrupted) {
        GT_TRY(save_all(r->m, r->train, o->out, o->out_bf16));
        if (!gt_cli.quiet) {
            fprintf(stderr, gt_gpt2_zero_sharded(r->m)
                                ? "wrote %s (ZeRO-1: no %s.state; resume across ranks is not done)\n"
                                : "wrote %s and %s.state\n", o->out, o->out);
        }
    }
    if (r->done > 0) {
        char png[4200] = "";
        if (o->plot != NULL && strcmp(o->plot, "none") != 0) {
            snprintf(png, sizeof png, "%s", o->plot);
        } else if (o->plot == NULL && o->out != NULL) {
            snprintf(png, sizeof png, "%s.loss.png", o->out);
        }
        if (png[0] != '\0') {
            plot(png, r->curve, r->vcurve, r->first, r->done);
        }
    }
    return GT_OK;
}

// What paging did, said plainly at the end (docs/paging.md).
static void paging_report(gt_device *dev)
{
    gt_pager_stats st = {0};
    gt_device_sim_stat sim;
    if (dev == NULL) {
        return;
    }
    if (gt_device_get_kind(dev) == GT_DEVICE_SIM) {  // devd's pager, through its STAT reply
        if (gt_is_ok(gt_device_sim_stat_get(dev, &sim))) {
            st = sim.paging;
        }
    } else if (!gt_is_ok(gt_device_paging_stats(dev, &st))) {
        return;
    }
    if (st.page_bytes == 0) {
        return;
    }
    char cap[32], peak[32];
    gt_format_size(cap, sizeof cap, st.cap);
    gt_format_size(peak, sizeof peak, st.peak_resident);
    printf("paging: memory capped at %s (peak resident %s), %llu page-outs, %llu unchanged "
           "pages dropped, %llu fault-ins, %llu pages discarded unread (zeroed or overwritten "
           "whole), %llu mmap calls, %llu ops run in parts\n", cap,
           peak, (unsigned long long)st.page_outs, (unsigned long long)st.clean_drops,
           (unsigned long long)st.fault_ins, (unsigned long long)st.discards,
           (unsigned long long)st.map_calls,
           (unsigned long long)st.ops_in_parts);
    if (st.prefetch) {
        printf("paging: prefetch: %llu pages loaded ahead, %llu of them used (hit), %llu wasted, "
               "%llu loaded beside the caller, %llu demand faults, %llu mispredicted launches\n",
               (unsigned long long)st.prefetch_issued, (unsigned long long)st.prefetch_hits,
               (unsigned long long)st.prefetch_wasted, (unsigned long long)st.assist_faults,
               (unsigned long long)st.demand_faults, (unsigned long long)st.mispredicts);
    }
}

static void train_free(train_run *r)
{
    paging_report(r->dev);
    if (r->log != NULL) {
        fclose(r->log);
    }
    free(r->curve);
    free(r->vcurve);
    gt_loader_free(r->train);
    gt_loader_free(r->val);
    gt_gpt2_free(r->m);
    gt_device_close(r->dev);  // frees (wipes) the shard buffers too
}

// One rank of mpirun -np N: rank 0 prints and writes the outputs; a rank that fails says so with
// its rank and ends the whole job (MPI_Abort), so no rank waits on it.
static gt_err run_distributed(train_opts *o, train_run *r, int *argc, char ***argv)
{
    static train_dist dist;
    MPI_Init(argc, argv);
    r->dist = &dist;
    gt_err err = gt_train_dist_init(&dist, o->peers);
    if (dist.rank != 0) {
        gt_cli.quiet = true;
        o->out = NULL;
        o->save_every = 0;
        o->log_json = NULL;
        o->plot = "none";
        if (!gt_cli.verbose) {
            gt_log_set_level(GT_LOG_WARN);
        }
    }
    if (gt_is_ok(err)) {
        err = run(o, r);
    }
    if (!gt_is_ok(err)) {
        fprintf(stderr, "gputravel %s: rank %d of %d: error: %s\n", CMD, dist.rank,
                dist.nranks, err.msg);
        fflush(stderr);
        gt_train_dist_abort(GT_EXIT_FAIL);
    }
    gt_train_dist_free(&dist);
    r->dist = NULL;
    MPI_Finalize();
    return err;
}

int gt_cmd_train(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--agreement") == 0 || strncmp(argv[i], "--agreement=", 12) == 0) {
            return gt_cli_train_agreement(argc, argv);  // collaborative mode: its own options
        }
    }
    if (gt_cli_config_has(argc, argv, "agreement")) {
        return gt_cli_train_agreement(argc, argv);  // the agreement named in --config
    }
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    static const char *const repeatable[] = {"data", "val-data", NULL};
    gt_cli_config conf;
    int rc = gt_cli_config_expand(CMD, long_opts, repeatable, &argc, &argv, &conf);
    if (rc != 0) {
        return rc;
    }
    train_opts o;
    rc = parse(argc, argv, &o);
    train_run *r = rc == 0 ? calloc(1, sizeof *r) : NULL;
    if (r == NULL) {
        gt_cli_config_free(&conf);
        return rc != 0 ? rc : gt_cli_fail(CMD, gt_errf(GT_E_NOMEM, "out of memory"));
    }
    if (o.distributed && !gt_train_dist_under_mpirun()) {
        free(r);
        gt_cli_config_free(&conf);
        return gt_cli_usage(CMD, "--distributed must be started under mpirun, e.g. mpirun -np 2 "
                                 "gputravel train --distributed --peers A.json ...");
    }
    gt_interrupt_install();  // Ctrl-C saves and says how to resume (a second one kills)
    gt_err err = o.distributed ? run_distributed(&o, r, &argc, &argv) : run(&o, r);
    bool stopped = r->interrupted;
    train_free(r);
    free(r);
    gt_cli_config_free(&conf);  // o's strings may be the file's
    if (stopped) {
        return 128 + gt_interrupted();
    }
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail(CMD, err);
}
