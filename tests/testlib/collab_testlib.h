// Fixtures for collaborative-training tests: sealed datasets of a few holders, an agreement that
// names them, holder agents served from threads or from child processes (which a test may
// SIGKILL), real TEE attestors on a throw-away sim root, and ledger tallies.
#ifndef GT_COLLAB_TESTLIB_H
#define GT_COLLAB_TESTLIB_H

#include "testlib.h"

#include <gputravel/holder.h>
#include <gputravel/orchestr.h>
#include <gputravel/travel.h>

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#define GT_TC_MAX_HOLDERS 4

// Token i of holder h's dataset.
typedef uint16_t (*gt_tc_token_fn)(void *ctx, int holder, uint32_t i);

typedef struct {
    char dir[256];            // the test's temporary folder (everything below it)
    char sim_root[320];       // dir/sim-root: GT_SIM_ROOT for this test, devd's and ours
    char sim_root_pub[400];   // its root-pub.pem
    gt_buf sim_root_bytes;
    gt_attest_file root;      // the trust root of every sim evidence in the test
    int holders;
    char ds[GT_TC_MAX_HOLDERS][512], ledgers[GT_TC_MAX_HOLDERS][512];
    gt_holder_keys keys[GT_TC_MAX_HOLDERS];
    uint8_t ds_id[GT_TC_MAX_HOLDERS][GT_DATASET_ID_BYTES];
} gt_tc_fixture;

// Creates dir, a sim root (GT_SIM_ROOT points at it), and for each holder a key folder and a
// dataset of `tokens` tokens sealed in chunks of chunk_tokens. gen NULL: the tokens test_collab
// uses ((i * (h + 3) + h) % 97). The plaintext shard is deleted once sealed.
void gt_tc_setup(gt_tc_fixture *f, int holders, uint32_t tokens, uint32_t chunk_tokens,
                 gt_tc_token_fn gen, void *gen_ctx);
void gt_tc_teardown(gt_tc_fixture *f);

typedef struct {
    const char *name;          // NULL: "collab"
    uint32_t steps;
    uint64_t token_budget;     // per holder (0: 3000)
    uint32_t max_uses;         // per chunk (0: 1)
    const char *trainer_json;  // members of "trainer":{...} (NULL: none)
    const char *device_json;   // members of "device":{...} (NULL: none)
} gt_tc_terms;

// The agreement naming every holder of f at 127.0.0.1:ports[h] (B=2, T=16, a 1-layer model).
void gt_tc_agreement(const gt_tc_fixture *f, gt_agreement *a, const int *ports,
                     const gt_tc_terms *t);

// The toy attestor of test_collab.c (a name and the binding; no TEE): holders accept any peer
// calling itself "trainer", the trainer accepts any holder.
gt_net_attestor gt_tc_toy_trainer(void);
gt_net_attestor gt_tc_toy_holder(void);

// A TEE attestor on the fixture's sim root for `role` peers, under agreement a; policy NULL:
// {"allow_simulation":true}. debug: this side's sim TEE runs in debug mode. The attestor keeps
// pointers to a and policy.
void gt_tc_tee(const gt_tc_fixture *f, gt_tee_attestor *t, const gt_agreement *a,
               gt_peer_role role, const gt_policy *policy, bool debug);
// {"allow_simulation":true} (shared, freed by gt_tc_teardown).
const gt_policy *gt_tc_sim_policy(void);

typedef struct {
    gt_listener *l;
    int port;
    // thread mode
    gt_holder_agent *agent;
    gt_ledger *ledger;
    pthread_t th;
    volatile int stop;
    bool threaded;
    // process mode
    pid_t pid;
} gt_tc_holder;

typedef struct {
    gt_net_attestor attestor;  // zero: the toy holder attestor
    void (*trip_hook)(void *ctx, const char *stage, uint32_t chunk);
    void *trip_hook_ctx;
    bool require_witnesses;    // serve only after co-holders witnessed the ledger head
} gt_tc_holder_opts;

// Opens every holder's listener (ports known before the agreement is written).
void gt_tc_listen(const gt_tc_fixture *f, gt_tc_holder *runs, int *ports);
// Serves holder h under a from a thread of this process.
void gt_tc_serve_thread(const gt_tc_fixture *f, gt_tc_holder *run, int h, const gt_agreement *a,
                        const gt_tc_holder_opts *o);
// Serves holder h under a from a child process (it dies with the test; SIGTERM stops it).
void gt_tc_serve_process(const gt_tc_fixture *f, gt_tc_holder *run, int h, const gt_agreement *a,
                         const gt_tc_holder_opts *o);
// Stops a holder (either mode; a killed child is reaped) and closes its listener unless
// keep_listener. Returns the child's wait status (0 for a thread).
int gt_tc_stop(gt_tc_holder *run, bool keep_listener);

// A trainer run: its own device (cpu, or the sim device at devd_socket), gt_collab_train, and
// the sim device's counters after training (when stat is not NULL and the device is sim).
typedef struct {
    const gt_agreement *a;
    const char *state_dir;
    bool resume;
    gt_transfer_mode transfer;   // ignored with devd_socket (always travel)
    const char *devd_socket;     // NULL: the cpu device
    gt_net_attestor attestor;    // zero: the toy trainer attestor
    gt_device_attester device_attester;  // the trainer's hooks with devd (zero: the defaults)
    void (*on_step)(void *ctx, const gt_collab_step *s);
    void *ctx;
} gt_tc_train_opts;
gt_err gt_tc_train(const gt_tc_train_opts *o, gt_collab_report *rep, gt_device_sim_stat *stat);

// A holder's ledger, verified with its pinned key, summed up.
typedef struct {
    uint64_t entries;
    uint32_t grants, refusals, travels, trip_failures;
    uint64_t use_tokens;        // sum of "use" entries' tokens (confirmed uses)
    uint32_t uses[64];          // per chunk (< 64)
    char last_refusal[512];     // reason of the last "refuse" entry
    char last_trip_failure[512];
    uint32_t sessions;          // "session" entries: trainers whose HELLO was accepted
    uint32_t witnesses;         // "witness" entries: co-holders' heads this holder witnessed
    uint8_t last_session_key[32];  // the signing key the last session recorded
} gt_tc_tally;
void gt_tc_ledger_tally(const gt_tc_fixture *f, int h, gt_tc_tally *t);

#endif
