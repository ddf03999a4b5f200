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
#include <gputravel/net.h>
#include <gputravel/travel.h>
#include <gputravel/util.h>

#include <stdio.h>

typedef struct gt_ledger gt_ledger;  // opaque; appends are serialised by an internal mutex

typedef struct {
    uint64_t entries;                 // including genesis
    uint8_t head[GT_SHA256_BYTES];    // hash of the last entry
    uint8_t holder_key[GT_ED25519_PUBLIC_BYTES];
} gt_ledger_summary;

// Opens the ledger at path for appending, creating it (with a genesis entry) if absent. An
// existing ledger is verified first and must carry this holder's key. A torn last entry (no
// newline: a crash mid-append, nothing released for it) is moved aside to path.torn-<time> and
// cut off first; any other damage refuses to open.
GT_MUST_USE gt_err gt_ledger_open(gt_ledger **l, const char *path,
                                  const uint8_t holder_secret[GT_ED25519_SECRET_BYTES]);
// Appends one entry (kind: "grant", "refuse", "erase", ...; detail: any JSON object, may be
// NULL). Written with O_APPEND and fsynced before returning. Safe from several threads.
GT_MUST_USE gt_err gt_ledger_append(gt_ledger *l, const char *kind, const cJSON *detail);
// The same, but the entry is only written (a crash of this process loses nothing), not fsynced:
// the next gt_ledger_append, gt_ledger_sync or gt_ledger_close makes it durable. For entries no
// later decision needs on disk first (a confirmed use: a release is decided on durable grants).
GT_MUST_USE gt_err gt_ledger_append_lazy(gt_ledger *l, const char *kind, const cJSON *detail);
GT_MUST_USE gt_err gt_ledger_sync(gt_ledger *l);  // fsyncs lazy entries; cheap when there are none
void gt_ledger_close(gt_ledger *l);  // wipes the key copy

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
    // Tests only (NULL otherwise), in the spirit of gt_tsm_params.hook: called during a trip
    // once the device is attached and accepted ("attached", chunk UINT32_MAX) and once the chunk
    // is loaded, before the device is returned ("loaded"), so a test can kill a holder mid-trip.
    void (*trip_hook)(void *ctx, const char *stage, uint32_t chunk);
    void *trip_hook_ctx;
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
    uint64_t tokens_released;
    uint64_t bytes_sent;
} gt_holder_agent_stats;
void gt_holder_agent_get_stats(gt_holder_agent *a, gt_holder_agent_stats *out);
void gt_holder_agent_free(gt_holder_agent *a);

#endif
