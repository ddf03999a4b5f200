// Internal to cli/: the world a holder benchmark runs in (bench transfer, bench holder): a sealed
// dataset, its agreement, a holder agent serving it with simulated TEE evidence, on one thread.
#ifndef GT_CLI_BENCH_WORLD_H
#define GT_CLI_BENCH_WORLD_H

#include <gputravel/holder.h>

#include <pthread.h>

typedef struct {
    char dir[2048], ds[2100], keys[2100], ledger[2100], agreement[2100], sim_root[2100];
    char root_pub[2200], listen[64];
    gt_holder_keys k;
    int chunk_format;  // bench_world_dataset seals in it (gt_seal_params.format; 0: default)
    gt_agreement a;
    gt_policy *policy;
    gt_buf root_bytes;
    gt_attest_file root;
    gt_ledger *ledger_h;
    gt_holder_agent *agent;
    gt_listener *listener;
    gt_tee_attestor holder_att;
    const char *netns;  // the holder's namespace, or NULL
    volatile int stop;
    pthread_t th;
    gt_err serve_err;
    bool serving;  // th runs
} world;

// A holder key folder in w->keys, a dataset of `bytes` of random tokens sealed in chunks of
// chunk_bytes into w->ds, and its agreement (every transfer mode, uses and budget unbounded in
// practice) in w->agreement, loaded into w->a. w->listen must be set (bench_world_listen).
GT_MUST_USE gt_err bench_world_dataset(world *w, uint64_t bytes, uint64_t chunk_bytes);
// The holder's listener on a free port of host, opened inside w->netns when set.
GT_MUST_USE gt_err bench_world_listen(world *w, const char *host, int self_ns);
// Another listener on the holder's side the same way (*l, its "HOST:PORT" in addr_out).
GT_MUST_USE gt_err bench_world_listener(world *w, const char *host, int self_ns, gt_listener **l,
                                        char *addr_out, size_t cap);
// The ledger, the agent (its serving limits from limits when not NULL) and its serving thread.
GT_MUST_USE gt_err bench_world_start(world *w, const gt_holder_agent_config *limits);
void bench_world_stop(world *w);
// A scratch folder of an earlier run under root (same --out): replaced, not reused.
GT_MUST_USE gt_err bench_scratch_fresh(const char *dir, const char *root);
int bench_cmp_double(const void *a, const void *b);  // for qsort

// gputravel bench holder (cmd_bench_holder.c), dispatched by gputravel bench.
int gt_cmd_bench_holder(int argc, char **argv);
void gt_cmd_bench_holder_usage(void);
// gputravel bench allreduce (cmd_bench_allreduce.c), under mpirun.
int gt_cmd_bench_allreduce(int argc, char **argv);
void gt_cmd_bench_allreduce_usage(void);
// gputravel bench dtrain (cmd_bench_dtrain.c), under mpirun.
int gt_cmd_bench_dtrain(int argc, char **argv);
void gt_cmd_bench_dtrain_usage(void);

#endif
