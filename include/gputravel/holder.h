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
// existing ledger is verified first and must carry this holder's key.
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

// ---- the holder protocol --------------------------------------------------------------------
// Frames over an attested gt_channel (net.h); every body is parsed through gt_reader and each
// type is accepted only where the protocol expects it:
//   trainer -> holder  HELLO    agreement hash (32) | signing key (32) | u16le name length |
//                               trainer name. The signing key is the trainer process's fresh
//                               Ed25519 public key, the one its sealed checkpoint is signed
//                               with (data.h). HELLO travels inside the attested channel, whose
//                               evidence binds the TLS exporter and both certificate keys
//                               (net.h): only the TEE whose evidence this holder appraised can
//                               have sent it, so the key is that attested trainer's. After the
//                               agreement check the holder writes a "session" ledger entry
//                               (trainer name, signing key, the appraisal summary when known)
//                               before WELCOME; a holder that cannot write it refuses.
//   holder -> trainer  WELCOME  the dataset's signed manifest, as stored
//   trainer -> holder  FETCH    u8 mode | u32le chunk index
//   holder -> trainer  CHUNK_PLAIN   the chunk's plaintext tokens (after its tag verified)
//                   or CHUNK_SEALED  the chunk file unchanged, then CHUNK_KEY: K_i (32 bytes)
//                   or REFUSE   u32le gt_code | text
//   trainer -> holder  TRAVEL   u32le chunk | ticket (32) | u16le length | device address:
//                               the trainer lent its device; the holder attaches with the ticket,
//                               appraises the device (its evidence, and its measurement against
//                               the agreement's device.accepted_measurements when it lists any),
//                               decides, loads the sealed chunk unchanged (only its key goes to
//                               the device), returns the device (a refusal after attaching
//                               closes it unreturned: the trip fails at once), then answers
//                      TRAVELLED u64le bytes loaded, or REFUSE
//                               The address is devd's socket path, or "ipc-cuda:" / "ipc-cpu:"
//                               + the socket of a trip the trainer serves itself (device.h): the
//                               holder decrypts in its own process and hands the buffer over,
//                               answers TRAVELLED, then waits for the trainer's RELEASED before
//                               it reads the next message (the trainer releases before USED).
//   trainer -> holder  USED     u32le chunk | u64le tokens: the use is committed (checkpointed)
//   trainer -> holder  BYE      (or the connection closes)
// A holder refuses a FETCH when the chunk does not exist, has max_uses_per_chunk confirmed uses,
// was already sent max_uses_per_chunk + 1 times (one resend recovers a trainer that crashed
// between fetch and commit; a resend of an unconfirmed chunk costs no budget again), or the
// token budget is spent (released tokens >= budget; the trainer cuts its last chunk to the
// budget). Every grant, refusal and confirmed use is a ledger entry.
enum {
    GT_HP_HELLO = 0x48500001u,
    GT_HP_WELCOME,
    GT_HP_FETCH,
    GT_HP_CHUNK_PLAIN,
    GT_HP_CHUNK_SEALED,
    GT_HP_CHUNK_KEY,
    GT_HP_REFUSE,
    GT_HP_BYE,
    GT_HP_USED,
    GT_HP_TRAVEL,
    GT_HP_TRAVELLED,
};
#define GT_HP_MAX_CONTROL 4096
#define GT_HP_MAX_MANIFEST (GT_MANIFEST_HEADER_BYTES + GT_MANIFEST_ENTRY_BYTES * 65536ull + 1024)

typedef enum { GT_FETCH_PLAIN = 1, GT_FETCH_KEYRELEASE = 2, GT_FETCH_TRAVEL = 3 } gt_fetch_mode;

// Parsers of the trainer's messages (untrusted; gt_reader; each only at its exact size).
typedef struct {
    uint8_t agreement[32];
    uint8_t signing_key[GT_ED25519_PUBLIC_BYTES];  // the trainer's checkpoint signing key
    char trainer[64];  // 1..63 printable ASCII bytes, NUL-terminated
} gt_hp_hello;
typedef struct {
    uint8_t mode;  // GT_FETCH_PLAIN or GT_FETCH_KEYRELEASE
    uint32_t chunk;
} gt_hp_fetch;
typedef struct {
    uint32_t chunk;
    uint8_t ticket[32];
    char device[256];  // the lent device's address, NUL-terminated, no NUL inside
} gt_hp_travel;
typedef struct {
    uint32_t chunk;
    uint64_t tokens;
} gt_hp_used;
GT_MUST_USE gt_err gt_hp_hello_parse(gt_span body, gt_hp_hello *out);
GT_MUST_USE gt_err gt_hp_fetch_parse(gt_span body, gt_hp_fetch *out);
GT_MUST_USE gt_err gt_hp_travel_parse(gt_span body, gt_hp_travel *out);
GT_MUST_USE gt_err gt_hp_used_parse(gt_span body, gt_hp_used *out);
const char *gt_fetch_mode_name(gt_fetch_mode mode);

typedef struct {
    const char *dataset_dir;
    const gt_holder_keys *keys;
    const gt_agreement *agreement;
    const char *name;          // this holder's name in the agreement (read at create only)
    gt_ledger *ledger;         // decisions are appended here (borrowed)
    const char *ledger_path;   // replayed at create to restore release counts
    gt_net_attestor attestor;  // proves this holder, appraises trainers (borrowed)
    // May be NULL. A summary of the last peer the attestor accepted (gt_tee_attestor's
    // peer_summary), read by gt_holder_agent_serve right after each accept, on the accepting
    // thread, and written into that connection's "session" ledger entry as "appraisal".
    const char *peer_summary;
    int idle_timeout_ms;       // a connection silent this long is closed (0: 5 minutes)
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
// Accepts connections on l, one thread each, until *stop becomes non-zero.
GT_MUST_USE gt_err gt_holder_agent_serve(gt_holder_agent *a, gt_listener *l,
                                         const volatile int *stop);
typedef struct {
    uint64_t grants;
    uint64_t refusals;
    uint64_t tokens_released;
    uint64_t bytes_sent;
} gt_holder_agent_stats;
void gt_holder_agent_get_stats(gt_holder_agent *a, gt_holder_agent_stats *out);
void gt_holder_agent_free(gt_holder_agent *a);

#endif
