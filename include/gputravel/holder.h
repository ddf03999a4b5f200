// gputravel/holder.h: the data holder's side. The holder agent appraises trainers and devices,
// decides what to release, and records every decision in an append-only, hash-chained ledger
// signed with the holder's identity key.
//
// Ledger format (docs/ledger.md): one entry per line,
//     BODY ' ' HASH ' ' SIG '\n'
// BODY is one-line JSON {"seq":N,"time":UNIX,"prev":HEX64,"kind":STR,"detail":{...}};
// HASH = SHA-256(BODY bytes) in hex, where BODY names the previous entry's HASH in "prev" (the
// first entry's prev is 64 zeros); SIG = Ed25519(HASH bytes) by the holder key, in hex. Entry 0
// has kind "genesis" and detail {"holder_key": HEX}: the key every signature is checked with.
// Trusts nothing in a ledger file: verification re-derives every hash and signature.
#ifndef GPUTRAVEL_HOLDER_H
#define GPUTRAVEL_HOLDER_H

#include <gputravel/crypto.h>
#include <gputravel/data.h>
#include <gputravel/seal.h>
#include <gputravel/device.h>
#include <gputravel/enclave.h>
#include <gputravel/net.h>
#include <gputravel/travel.h>
#include <gputravel/util.h>

#include <stdio.h>

typedef struct gt_ledger gt_ledger;  // opaque; appends are serialised by an internal mutex
typedef struct gt_holder_enclave gt_holder_enclave;  // enclave mode (below)

typedef struct {
    uint64_t entries;                 // including genesis
    uint8_t head[GT_SHA256_BYTES];    // hash of the last entry
    uint8_t holder_key[GT_ED25519_PUBLIC_BYTES];
    bool anchored;                    // the last entry carries a rollback counter value
    uint64_t counter;                 // that value (0 when not anchored)
} gt_ledger_summary;

// ---- rollback guard (docs/ledger.md "Rollback guard") -----------------------------------------
// A monotonic counter outside the holder's disk that the ledger's head is anchored to: every
// append batch carries the counter value it belongs to ("counter" in the entry body) and bumps
// the counter once it is durable, so a ledger cut back, deleted, replaced or restored from an old
// copy no longer matches the counter and the holder refuses to start. Specs:
//   tpm:TCTI            a TPM 2.0 NV counter (TPMA_NV_COUNTER) at the default index
//                       GT_ROLLBACK_TPM_DEFAULT_INDEX, through tpm2-tss ESAPI; TCTI is a tctildr
//                       string: "device:/dev/tpmrm0" (a CVM's vTPM), "swtpm:host=H,port=P"
//   tpm@0xINDEX:TCTI    the same at NV index INDEX (owner range 0x01800000-0x01BFFFFF)
//   sim:PATH            a counter file: insecure-simulation, anchors nothing against anyone who
//                       can write PATH
//   none                no anchor (the ledger as before; `ledger verify` says so)
// The TPM index is defined on first increment (owner hierarchy, empty auth, counter of 8 bytes).
#define GT_ROLLBACK_TPM_DEFAULT_INDEX 0x01806774u

typedef struct gt_rollback_guard gt_rollback_guard;  // opaque; not thread-safe (the ledger locks)
typedef enum { GT_ROLLBACK_NONE, GT_ROLLBACK_SIM, GT_ROLLBACK_TPM } gt_rollback_kind;

// Opens the guard a spec names (above). Opening reads nothing and defines nothing: a TPM guard
// connects to its TPM. On failure *g is NULL.
GT_MUST_USE gt_err gt_rollback_guard_open(gt_rollback_guard **g, const char *spec);
// The counter's current value. *written is false (and *value 0) while the counter has never been
// incremented: no TPM index yet, or one never written; no counter file yet.
GT_MUST_USE gt_err gt_rollback_guard_read(gt_rollback_guard *g, uint64_t *value, bool *written);
// Adds one to the counter (defining the TPM index first when there is none) and returns the new
// value. A none guard refuses (GT_E_STATE).
GT_MUST_USE gt_err gt_rollback_guard_increment(gt_rollback_guard *g, uint64_t *value);
gt_rollback_kind gt_rollback_guard_kind(const gt_rollback_guard *g);
// For reports: "tpm swtpm:host=...,port=... nv 0x01806774", "sim PATH (insecure-simulation)",
// "none". A NULL guard is "none".
const char *gt_rollback_guard_name(const gt_rollback_guard *g);
// Tests only: called right before each increment, so a test can crash a process between an
// entry's write and its counter's increment. NULL clears it.
void gt_rollback_guard_set_test_hook(gt_rollback_guard *g, void (*hook)(void *ctx), void *ctx);
void gt_rollback_guard_close(gt_rollback_guard *g);  // NULL is fine

// A software TPM for a guard (Debian's swtpm: what tests and the demo use in place of a CVM's
// vTPM): started on state_dir (created if missing) with a command port P and control port P+1
// (bound here and inherited, so only P can be taken before swtpm binds it: then it is tried
// again on another pair), logging to log, ready once both ports accept. *proc is the process (stop it with
// gt_proc_stop: swtpm keeps its NV state in state_dir), spec the guard spec that reaches it
// ("tpm:swtpm:host=127.0.0.1,port=P"). GT_E_NOTFOUND when swtpm is not installed.
GT_MUST_USE gt_err gt_rollback_swtpm_start(const char *state_dir, const char *log, gt_proc *proc,
                                           int *port, char *spec, size_t spec_cap);

// What a ledger (summary s, or NULL when the file is missing or empty) and a counter (value,
// written) say together; gt_ledger_open_guarded acts on it and `ledger verify` reports it.
typedef enum {
    GT_ROLLBACK_MATCH,      // ledger's last counter == the counter's value
    GT_ROLLBACK_PENDING,    // ledger one ahead: a crash between a batch's write and increment
    GT_ROLLBACK_NEW,        // no ledger, counter never written: a new ledger may start
    GT_ROLLBACK_UNANCHORED, // a ledger without counters, counter never written: may be anchored
    GT_ROLLBACK_REFUSE,     // anything else: rolled back, replaced, or another counter
} gt_rollback_verdict;
// GT_OK with *v for every verdict but REFUSE; REFUSE is GT_E_STATE with a message saying which
// values disagree and what that means.
GT_MUST_USE gt_err gt_rollback_check(const gt_ledger_summary *s, uint64_t value, bool written,
                                     const char *guard_name, gt_rollback_verdict *v);

// Opens the ledger at path for appending, creating it (with a genesis entry) if absent. An
// existing ledger is verified first and must carry this holder's key. A torn last entry (no
// newline: a crash mid-append, nothing released for it) is moved aside to path.torn-<time> and
// cut off first; any other damage refuses to open.
GT_MUST_USE gt_err gt_ledger_open(gt_ledger **l, const char *path,
                                  const uint8_t holder_secret[GT_ED25519_SECRET_BYTES]);
// The same, anchored to a rollback guard (borrowed; NULL or a none guard: unanchored, as
// gt_ledger_open, which refuses a ledger whose head carries a counter). It checks the ledger
// against the counter (gt_rollback_check) and refuses (GT_E_STATE) to open a ledger rolled back,
// replaced or missing while the counter has a value; a ledger one batch ahead (a crash before
// the increment) is completed by incrementing. Every entry then carries "counter": the value
// its append batch moves the counter to.
GT_MUST_USE gt_err gt_ledger_open_guarded(gt_ledger **l, const char *path,
                                          const uint8_t holder_secret[GT_ED25519_SECRET_BYTES],
                                          gt_rollback_guard *guard);
// Appends one entry (kind: "grant", "refuse", "erase", ...; detail: any JSON object, may be
// NULL). Written with O_APPEND and fsynced before returning, then (guarded) the counter is
// incremented; an entry written whose increment failed stays (the next batch retries) and the
// call fails. Safe from several threads.
GT_MUST_USE gt_err gt_ledger_append(gt_ledger *l, const char *kind, const cJSON *detail);
// The same, but the entry is only written (a crash of this process loses nothing), not fsynced:
// the next gt_ledger_append, gt_ledger_sync or gt_ledger_close makes it durable. For entries no
// later decision needs on disk first (a confirmed use: a release is decided on durable grants).
// Guarded, it joins the next durable append's batch: same counter value, one increment.
GT_MUST_USE gt_err gt_ledger_append_lazy(gt_ledger *l, const char *kind, const cJSON *detail);
// Fsyncs lazy entries and, guarded, increments the counter for their batch; cheap when there
// are none.
GT_MUST_USE gt_err gt_ledger_sync(gt_ledger *l);
// The ledger's current head: its entry count and the last entry's hash (witnesses, holder.h).
void gt_ledger_head(gt_ledger *l, uint64_t *entries, uint8_t head[GT_SHA256_BYTES]);
// The head of the ledger at path after its first `entries` entries (verified under key):
// GT_E_NOTFOUND when it has fewer.
GT_MUST_USE gt_err gt_ledger_prefix_head(const char *path, const uint8_t *key, uint64_t entries,
                                         uint8_t head[GT_SHA256_BYTES]);
void gt_ledger_close(gt_ledger *l);  // syncs as gt_ledger_sync; wipes the key copy; not the guard

// Verifies a whole ledger. expected_key (may be NULL) pins the holder key; show (may be NULL)
// receives one human-readable line per verified entry. The first failure is returned with its
// line number; entries before it were verified.
GT_MUST_USE gt_err gt_ledger_verify_bytes(const uint8_t *data, size_t len,
                                          const uint8_t *expected_key, FILE *show,
                                          gt_ledger_summary *out);
GT_MUST_USE gt_err gt_ledger_verify_file(const char *path, const uint8_t *expected_key,
                                         FILE *show, gt_ledger_summary *out);
// Verifies the ledger like gt_ledger_verify_file and calls visit(ctx, kind, detail) for each
// entry, in order, after it verified (a missing file is an empty ledger: no calls, GT_OK).
typedef void (*gt_ledger_visit_fn)(void *ctx, const char *kind, const cJSON *detail);
GT_MUST_USE gt_err gt_ledger_replay(const char *path, const uint8_t *expected_key,
                                    gt_ledger_visit_fn visit, void *ctx);

// A "session" entry (holder.h, HELLO): the trainer that presented a signing key to this holder
// inside a channel whose evidence the holder accepted.
typedef struct {
    uint64_t seq;                          // the entry's sequence number
    char trainer[64];
    uint8_t agreement[GT_SHA256_BYTES];    // the agreement the trainer ran under
    char appraisal[192];                   // "" when the entry has none
} gt_ledger_session;
// Verifies the whole ledger at path with its holder key pinned to holder_key (another holder's
// ledger: GT_E_AUTH; a tampered one: the verification's code), then finds the first "session"
// entry whose signing key is signing_key. GT_E_NOTFOUND when the file is missing or the ledger
// holds no such entry. On failure *out is zeroed.
GT_MUST_USE gt_err gt_ledger_find_session(const char *path,
                                          const uint8_t holder_key[GT_ED25519_PUBLIC_BYTES],
                                          const uint8_t signing_key[GT_ED25519_PUBLIC_BYTES],
                                          gt_ledger_session *out);

typedef struct {
    const char *dataset_dir;
    const gt_holder_keys *keys;
    const gt_agreement *agreement;
    const char *name;          // this holder's name in the agreement (read at create only)
    gt_ledger *ledger;         // decisions are appended here (borrowed)
    const char *ledger_path;   // replayed at create to restore release counts
    gt_net_attestor attestor;  // proves this holder, appraises trainers (borrowed; used when
                               // tee is NULL, then from several threads at once)
    // May be NULL. The TEE attestor to prove and appraise with: each handshake runs on its own
    // copy, whose peer_summary goes into that connection's "session" entry as "appraisal".
    const gt_tee_attestor *tee;
    int idle_timeout_ms;       // a connection silent this long is closed (0: 5 minutes)
    // Limits of gt_holder_agent_serve against slow and flooding peers (0: the default).
    // Handshakes (TLS + evidence exchange) run on worker threads, each within the deadline.
    int handshake_deadline_ms;             // 0: 10 s
    unsigned max_handshakes;               // unattested connections at once (0: 32)
    unsigned max_handshakes_per_address;   // of those, from one source address (0: 4)
    unsigned max_connections_per_trainer;  // attested ones per trainer name (0: 8)
    // Serve chunks only in sessions whose co-holders witnessed this holder's ledger head
    // (travel.h "Co-holder witnesses"): a ledger rolled back behind a head they witnessed is
    // caught without a TPM. Needs ledger and ledger_path.
    bool require_witnesses;
    // Tests only (NULL otherwise), in the spirit of gt_tsm_params.hook: called during a trip
    // once the device is attached and accepted ("attached", chunk UINT32_MAX) and once the chunk
    // is loaded, before the device is returned ("loaded"), so a test can kill a holder mid-trip.
    void (*trip_hook)(void *ctx, const char *stage, uint32_t chunk);
    void *trip_hook_ctx;
    // Enclave mode (borrowed; NULL: plain). Its dataset key already opened (enclave_mode.c):
    // keys->dataset_key is then never read (zero). The agent fixes the agreement's terms and the
    // ledger's counts in it at create; every release is the enclave's decision and goes to devd
    // wrapped (LOAD_SEALED_WRAPPED). FETCH (plain, sealed key) and trips the trainer serves
    // itself are refused: they would put K_i or plaintext in this process.
    gt_holder_enclave *enclave;
} gt_holder_agent_config;

typedef struct gt_holder_agent gt_holder_agent;  // opaque; safe to use from several threads
// Loads the manifest, checks it is the agreement's dataset and this holder's key, verifies every
// chunk (keyless), and restores release counts from the ledger.
GT_MUST_USE gt_err gt_holder_agent_create(gt_holder_agent **a, const gt_holder_agent_config *cfg);
// Serves one attested connection until BYE, close or error (the channel stays the caller's).
GT_MUST_USE gt_err gt_holder_agent_handle(gt_holder_agent *a, gt_channel *ch);
// Accepts connections on l until *stop becomes non-zero: each on a thread of its own, which
// handshakes within the deadline and then serves; threads are joined as they finish, and all of
// them before this returns. A peer that never attested (a failed or stalled handshake, refused
// evidence, a connection over a limit) is refused with a rate-limited log line, counted in
// handshake_failures, and never reaches the ledger.
GT_MUST_USE gt_err gt_holder_agent_serve(gt_holder_agent *a, gt_listener *l,
                                         const volatile int *stop);
typedef struct {
    uint64_t grants;
    uint64_t refusals;            // decisions refused to attested trainers (all in the ledger)
    uint64_t handshake_failures;  // connections that never attested (not in the ledger)
    // At create: sessions in the ledger under other agreements. Their releases count against
    // this agreement's budget and uses too (they are the dataset's), and the agent warns.
    uint64_t sessions_other_agreements;
    uint64_t tokens_released;
    uint64_t bytes_sent;
} gt_holder_agent_stats;
void gt_holder_agent_get_stats(gt_holder_agent *a, gt_holder_agent_stats *out);
void gt_holder_agent_free(gt_holder_agent *a);

// ---- enclave mode (src/holder/enclave_mode.c, docs/holder-enclave.md) ------------------------
// The dataset key and the release decision in the holder enclave (enclaves/holder/, built with
// the SDK and run by gputravel-enclave-process, INSECURE SIMULATION outside a TEE). The host side
// never holds the dataset key, a chunk key or plaintext: the key is sealed in the enclave under
// its MRSIGNER policy, and a release comes back as K_i wrapped to the device (travel.h).
#define GT_HOLDER_ENCLAVE_SEALED_KEY "dataset.key.sealed"  // in the key folder, in place of
                                                           // dataset.key
typedef struct {
    const char *image_path;        // the holder enclave's flat image (holder.bin)
    const char *sigstruct_path;    // its SIGSTRUCT (holder.sig)
    const char *process_path;      // NULL: gt_enclave_spec's default
    // One of: the platform folder (gt_sgx_platform_open) or a platform the caller holds.
    const char *platform_dir;
    const gt_sgx_platform_options *platform_options;
    const gt_sgx_platform *platform;
    // The virtual QE that quotes this enclave for trainers (a holder the agreement names by
    // enclave, travel.h): its key folder (NULL: platform_dir; neither: no quotes) and how it
    // collects the host TEE's evidence (NULL: platform_options' host and sim root, or sim with
    // the process-wide sim root for a caller-held platform).
    const char *vqe_dir;
    const gt_collect_params *vqe_host;
} gt_holder_enclave_config;
GT_MUST_USE gt_err gt_holder_enclave_start(gt_holder_enclave **out,
                                           const gt_holder_enclave_config *cfg);
void gt_holder_enclave_stop(gt_holder_enclave *he);
const gt_sgx_identity *gt_holder_enclave_identity(const gt_holder_enclave *he);
int gt_holder_enclave_pid(const gt_holder_enclave *he);
// IMPORT: the caller's plain key goes in once (the caller wipes it); *sealed = the blob sealed
// under the enclave's MRSIGNER policy.
GT_MUST_USE gt_err gt_holder_enclave_import(gt_holder_enclave *he,
                                            const uint8_t dataset_key[GT_DATASET_KEY_BYTES],
                                            gt_buf *sealed);
// GT_E_AUTH: not this signer's enclave, another platform, or a changed byte.
GT_MUST_USE gt_err gt_holder_enclave_open_key(gt_holder_enclave *he, const uint8_t *sealed,
                                              size_t len);
typedef struct {
    uint8_t agreement_hash[GT_SHA256_BYTES];
    uint8_t dataset_id[GT_DATASET_ID_BYTES];
    uint32_t max_uses_per_chunk;
    uint64_t token_budget;
    uint32_t chunk_count;
    const uint64_t *tokens;    // per chunk
    const uint32_t *releases;  // per chunk, from the ledger (NULL: none)
    const uint32_t *uses;      // per chunk, from the ledger (NULL: none)
    uint64_t tokens_released;
} gt_holder_enclave_terms;
// Fixed once per enclave run: a second call is refused (GT_E_STATE).
GT_MUST_USE gt_err gt_holder_enclave_set_terms(gt_holder_enclave *he,
                                               const gt_holder_enclave_terms *t);
// What the enclave's wrap leaf appraises the device from (travel.h gt_release_wrap_appraise):
// the agreement document (its hash must be TERMS's) and devd's session hellos as they crossed
// (gt_device_sim_session_hellos).
typedef struct {
    gt_span agreement, client_hello, server_hello;
} gt_holder_enclave_appraisal;
// The release decision in the enclave: GT_E_POLICY with the reason on a refusal; on a grant the
// wrap leaf appraises the device (GT_E_POLICY "the device is refused" when the agreement bytes,
// hellos, device_pub or device_id do not hold together or the device is not accepted), then
// wrapped = K_chunk wrapped to device_pub under gt_release_aad_build(agreement, dataset, chunk,
// trip_id, device_id).
GT_MUST_USE gt_err gt_holder_enclave_release(gt_holder_enclave *he, uint32_t chunk,
                                             const uint8_t device_pub[GT_X25519_BYTES],
                                             const uint8_t trip_id[GT_SHA256_BYTES],
                                             const uint8_t device_id[GT_SHA256_BYTES],
                                             const gt_holder_enclave_appraisal *appraisal,
                                             uint8_t wrapped[GT_KEYWRAP_BYTES]);
GT_MUST_USE gt_err gt_holder_enclave_used(gt_holder_enclave *he, uint32_t chunk);
// A vsgx quote (the evidence envelope appended to evidence) of the enclave's own EREPORT for the
// vQE, REPORTDATA = the agreement hash its TERMS fixed | session (gt_holder_quote_session).
// GT_E_STATE without a vQE (gt_holder_enclave_config.vqe_dir) or before TERMS.
GT_MUST_USE gt_err gt_holder_enclave_quote(gt_holder_enclave *he,
                                           const uint8_t session[GT_SHA256_BYTES],
                                           gt_buf *evidence);

#endif
