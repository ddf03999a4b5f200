// The world a holder benchmark runs in (bench_world.h).
#include "bench_world.h"

#include "netns.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

gt_err bench_world_dataset(world *w, uint64_t bytes, uint64_t chunk_bytes)
{
    char shard[2200];
    snprintf(shard, sizeof shard, "%s/in.bin", w->dir);
    uint64_t n = bytes / 2;
    uint16_t *tok = malloc(n * sizeof *tok);
    GT_ENSURE(tok != NULL, GT_E_NOMEM, "out of memory");
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        tok[i] = (uint16_t)(rng % 256);
    }
    gt_err err = gt_shard_write(shard, tok, n);
    free(tok);
    GT_TRY(err);
    GT_TRY(gt_keydir_generate(w->keys, false, &w->k));
    const char *shards[] = {shard};
    gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = w->ds,
                        .chunk_size = chunk_bytes, .vocab_size = 256,
                        .format = w->chunk_format};
    gt_seal_result r;
    GT_TRY(gt_seal(&p, &w->k, &r));
    unlink(shard);
    char key[65], id[33], doc[2048];
    gt_hex_encode(key, sizeof key, w->k.holder_pub, 32);
    gt_hex_encode(id, sizeof id, r.dataset_id, 16);
    snprintf(doc, sizeof doc,
             "{\"version\":1,\"name\":\"bench\",\"model\":{\"layers\":1,\"channels\":8,\"heads\":1,"
             "\"vocab\":256,\"max_seq\":8,\"init_seed\":1},\"training\":{\"steps\":1,\"batch\":1,"
             "\"seq\":8,\"learning_rate\":0.1},\"holders\":[{\"name\":\"holder\",\"identity_key\":"
             "\"%s\",\"endpoint\":\"%s\",\"dataset_id\":\"%s\",\"token_budget\":%llu,"
             "\"max_uses_per_chunk\":1000000}],\"trainer\":{},\"device\":{},"
             "\"allow_simulation\":true,\"transfer\":[\"conventional\",\"conventional-keyrelease\","
             "\"travel\"],\"output\":{\"kind\":\"loss_only\"}}",
             key, w->listen, id, (unsigned long long)(n * 1000000ull));
    GT_TRY(gt_file_write_atomic(w->agreement, doc, strlen(doc), 0644));
    return gt_agreement_load(&w->a, w->agreement);
}

static void *holder_main(void *p)
{
    world *w = p;
    w->serve_err = gt_holder_agent_serve(w->agent, w->listener, &w->stop);
    return NULL;
}

// The holder's listener on a free port (so concurrent benches never collide), opened inside the
// holder's namespace when there is one: a socket stays in the namespace it was made in.
gt_err bench_world_listener(world *w, const char *host, int self_ns, gt_listener **l,
                            char *addr_out, size_t cap)
{
    char addr[64];
    snprintf(addr, sizeof addr, "%s:0", host);
    if (w->netns != NULL) {
        GT_TRY(gt_netns_enter(w->netns));
    }
    gt_err err = gt_listener_open(l, addr);
    if (w->netns != NULL && setns(self_ns, CLONE_NEWNET) != 0 && gt_is_ok(err)) {
        err = gt_errf(GT_E_IO, "cannot return to this process's network namespace: %s",
                      strerror(errno));
    }
    GT_TRY(err);
    snprintf(addr_out, cap, "%s:%d", host, gt_listener_port(*l));
    return GT_OK;
}

gt_err bench_world_listen(world *w, const char *host, int self_ns)
{
    return bench_world_listener(w, host, self_ns, &w->listener, w->listen, sizeof w->listen);
}

gt_err bench_world_start(world *w, const gt_holder_agent_config *limits)
{
    GT_TRY(gt_ledger_open(&w->ledger_h, w->ledger, w->k.holder_sec));
    w->holder_att = (gt_tee_attestor){.collect = {.type = GT_TEE_SIM, .sim_root = w->sim_root},
                                      .policy = w->policy, .roots = &w->root, .root_count = 1,
                                      .agreement = &w->a, .peer_role = GT_PEER_TRAINER};
    gt_holder_agent_config cfg = {.dataset_dir = w->ds, .keys = &w->k, .agreement = &w->a,
                                  .name = "holder", .ledger = w->ledger_h,
                                  .ledger_path = w->ledger,
                                  .attestor = gt_tee_attestor_bind(&w->holder_att),
                                  .tee = &w->holder_att};
    if (limits != NULL) {
        cfg.handshake_deadline_ms = limits->handshake_deadline_ms;
        cfg.max_handshakes = limits->max_handshakes;
        cfg.max_handshakes_per_address = limits->max_handshakes_per_address;
        cfg.max_connections_per_trainer = limits->max_connections_per_trainer;
    }
    GT_TRY(gt_holder_agent_create(&w->agent, &cfg));
    w->stop = 0;
    GT_ENSURE(pthread_create(&w->th, NULL, holder_main, w) == 0, GT_E_IO,
              "cannot start the holder's thread");
    w->serving = true;
    return GT_OK;
}

void bench_world_stop(world *w)
{
    if (w->serving) {
        w->stop = 1;
        pthread_join(w->th, NULL);
        w->serving = false;
    }
    gt_listener_close(w->listener);
    gt_holder_agent_free(w->agent);
    gt_ledger_close(w->ledger_h);
    w->listener = NULL;
    w->agent = NULL;
    w->ledger_h = NULL;
}

int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}


// A world's scratch folder from an earlier run with the same --out (keys, dataset, ledger):
// replaced, not reused (keygen refuses to overwrite keys, and old ledgers would skew budgets).
gt_err bench_scratch_fresh(const char *dir, const char *root)
{
    gt_err e = gt_rmtree_below(dir, root);
    GT_ENSURE(gt_is_ok(e), e.code, "cannot remove the earlier run's %s: %s", dir, e.msg);
    return gt_mkdir_p(dir, 0700);
}

