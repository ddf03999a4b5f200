// gputravel demo (cmd_demo.c drives it): the shared state of its steps, one file per step
// (demo_<step>.c), and the story's printing. Private to cli/.
#ifndef GPUTRAVEL_CLI_DEMO_H
#define GPUTRAVEL_CLI_DEMO_H

#include "cli.h"

#include <gputravel/data.h>
#include <gputravel/holder.h>
#include <gputravel/net.h>
#include <gputravel/orchestr.h>
#include <gputravel/seal.h>
#include <gputravel/train.h>

#include <stdarg.h>
#include <stdio.h>

#define FORTUNE_DIR "/usr/share/games/fortunes"
#define DEMO_MARKER ".gputravel-demo"
#define HOLDERS 3
#define DEMO_ENCLAVE_HOLDER 0  // runs in enclave mode (with --transfer travel)
#define CHUNK_BYTES (48u << 10)  // small chunks, so that training visits every holder


static const char *const holder_names[HOLDERS] = {"hospital", "bank", "lab"};

typedef struct {
    char shard[4096], keys[4096], dataset[4096], ledger[4096], log[4096];
    gt_holder_keys k;
    uint8_t dataset_id[GT_DATASET_ID_BYTES];
    uint64_t tokens;
    uint32_t chunks;
    int port;
    gt_listener *listener;  // bound when the agreement names its port; the holder inherits it
    gt_proc proc;
    gt_proc tpm;          // its software TPM (the rollback guard's counter), when swtpm exists
    char tpm_spec[128];   // --rollback-guard for the holder ("none" without swtpm)
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
    gt_proc devd;
    uint32_t steps;
    gt_transfer_mode transfer;
    uint64_t mem_limit;   // devd's protected memory; 0: 512 MiB, no paging
    char paging[4200];    // with mem_limit: devd's paging store (untrusted host storage)
    gt_pager_stats paged; // what devd's pager did (its STAT reply), read after training
    double t_step, t_total;
    double *curve_x, *curve_y;
    size_t curve_n;
    bool attacked;  // the trainer tried to read a travelled chunk back (demo_train.c)
} demo;

static void say(const demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void say(const demo *d, const char *fmt, ...)
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

static inline void step_begin(demo *d, int n, const char *title)
{
    say(d, "\n[%d] %s\n", n, title);
    d->t_step = gt_now_seconds();
}

static inline void step_end(demo *d)
{
    say(d, "    (%.2f s)\n", gt_now_seconds() - d->t_step);
}

// The steps, in order; each prints its part of the story (unless quiet) and its time.
gt_err demo_prepare_dir(demo *d, const char *out);       // demo_prepare.c: the work folder
gt_err demo_step_corpus(demo *d);                         // demo_corpus.c:  1
gt_err demo_step_seal(demo *d);                           // demo_seal.c:    2
gt_err demo_step_tamper(demo *d);                         // demo_tamper.c:  3
gt_err demo_step_agreement(demo *d);                      // demo_agreement.c: 4
gt_err demo_step_start(demo *d);                          // demo_start.c:   5
void demo_stop_processes(demo *d);                        // demo_start.c (holders write their
                                                          // last ledger entries as they stop)
gt_err demo_step_train(demo *d, gt_collab_report *rep);   // demo_train.c:   6
gt_err demo_step_ledgers(demo *d, const gt_collab_report *rep);  // demo_ledgers.c: 7
gt_err demo_step_sample(demo *d);                         // demo_sample.c:  8

#endif
