// gputravel/devproto.h: the emulated confidential device's wire protocol, below every party that
// speaks it: the device's sim client (device/), devd (devd/) and the trip a trainer serves itself
// (travel/). Messages and limits, records and bounce slots, both ends of the handshake, and the
// device's identity and evidence. Nothing here knows of holders or training.
//
// The sim device's wire protocol: every message type, length and limit in one place (WireGuard's
// messages.h style). Client = the process using the device (trainer, holder); devd = the emulated
// confidential GPU (gputravel devd).
//
// Transport: one Unix stream socket per session. Every message is a frame: u32le body length,
// then the body. Frames are at most GT_SIM_MAX_FRAME bytes; a longer length ends the session.
//
// Handshake (plaintext frames; docs/design.md §4):
//   devd -> client  CHALLENGE     version, devd nonce: fresh per connection, sent on accept
//   client -> devd  CLIENT_HELLO  version, client nonce, the devd nonce, client X25519 public
//                                 key, agreement hash, client evidence (report_data =
//                                 gt_attest_report_data_build(tag_c, client nonce || devd nonce,
//                                 client pub, agreement hash)): a hello replayed from another
//                                 connection binds another devd nonce and is refused before its
//                                 evidence is appraised
//   devd -> client  SERVER_HELLO  version, devd X25519 public key, bounce layout, memory limit,
//                                 devd evidence (report_data = gt_attest_report_data_build(tag_d,
//                                 client nonce, devd pub, SHA-512(CLIENT_HELLO body || u32le
//                                 slot_count || u32le slot_bytes || u64le mem_limit))): fresh,
//                                 bound to the client's hello and to the device's parameters;
//                                 the bounce memfd is attached to this frame (SCM_RIGHTS)
//   devd -> client  REFUSE        instead of SERVER_HELLO: device busy, policy rejection, ...
// Both sides then derive, with HKDF-SHA-512 over the X25519 secret, salt = SHA-512(CLIENT_HELLO
// body || SERVER_HELLO body), one AES-256-GCM key per direction (info "gputravel devd c2s v1" /
// "... s2c v1"). IVs are 4-byte stream id (big-endian) || 8-byte counter (big-endian). Four
// streams, each with its own counter that starts at 0 and never wraps:
//   1 control client->devd, 2 control devd->client, 3 bulk client->devd, 4 bulk devd->client.
// Counters are implicit (never on the wire): a replayed, reordered, dropped or tampered record
// fails authentication, and any failure ends the session.
//
// Records (after the handshake): frame body = AES-256-GCM(key_dir, iv, aad = "gtsim-rec" ||
// u32le body length, plaintext = u16le type || fixed body of that type). Each type is accepted
// only at its exact size (STATUS: exactly its declared message length).
//
// Bulk data (copy_in / copy_out) never goes through the socket: it goes through the shared
// bounce slots. A transfer of len bytes is cut into chunks of at most slot_bytes - 16 plaintext
// bytes; chunk i uses slot i % slot_count and is sealed with the bulk stream of its direction and
// aad = "gtsim-bulk" || u64le handle || u64le offset of the chunk || u32le chunk length. The
// sender sends CHUNK after filling a slot; the receiver sends SLOT_FREE for chunk i only when
// chunk i + slot_count exists (so both sides know exactly which messages come). copy_in ends with
// devd's STATUS; copy_out starts with devd's STATUS (ok: chunks follow) and ends after the last
// CHUNK.
//
// Travelling (LEND ... RETURN, docs/device-sim.md "Travelling"): the one exception to "bulk is
// sealed with the bulk stream" is LOAD_SEALED, whose bulk bytes are a holder's sealed chunk
// (ciphertext || tag under the chunk key) sent unchanged: cut into chunks of slot_bytes (no tag
// room needed), chunk i in slot i % slot_count, with the same CHUNK / SLOT_FREE rule. The chunk
// key, IV and AAD travel in the (AEAD-protected) LOAD_SEALED record.
#ifndef GPUTRAVEL_DEVPROTO_H
#define GPUTRAVEL_DEVPROTO_H

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/kernels.h>
#include <gputravel/util.h>

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GT_SIM_VERSION 7u  // 2: devd's CHALLENGE nonce bound into the client's evidence;
                           // 3: peers (PEER_* requests, issue 16) and STAT with the pager's
                           //    counters (issue 17); 4: STAT with the prefetcher's counters;
                           // 5: LOAD_SEALED* carry the chunk's segment size (GTCHUNK2);
                           // 6: STAT with the pager's mmap calls and split matmuls;
                           // 7: STAT with the pager's discards, and ops in parts (sums
                           //    of squares too) where 6 counted split matmuls
#define GT_SIM_NONCE_BYTES 32
#define GT_SIM_MAX_EVIDENCE (48u * 1024)   // either side's evidence blob
#define GT_SIM_MAX_FRAME (64u * 1024)      // any frame body
#define GT_SIM_MAX_STATUS_MSG 160          // text in a STATUS / REFUSE
#define GT_SIM_MAX_SLOTS 16
#define GT_SIM_MIN_SLOT_BYTES 4096
#define GT_SIM_MAX_SLOT_BYTES (64u << 20)
#define GT_SIM_BULK_CHUNK(slot_bytes) ((slot_bytes) - GT_AEAD_TAG_BYTES)

// Domain tags (report_data, key derivation, aad).
#define GT_SIM_TAG_CLIENT_RD "gputravel/devd-client/v1"
#define GT_SIM_TAG_DEVICE_RD "gputravel/devd-device/v1"
#define GT_SIM_INFO_C2S "gputravel devd c2s v1"
#define GT_SIM_INFO_S2C "gputravel devd s2c v1"
#define GT_SIM_AAD_REC "gtsim-rec"
#define GT_SIM_AAD_BULK "gtsim-bulk"

// ---- handshake frames (plaintext) -------------------------------------------------------------
enum {
    GT_SIM_MSG_CLIENT_HELLO = 0x4801,
    GT_SIM_MSG_SERVER_HELLO = 0x4802,
    GT_SIM_MSG_REFUSE = 0x4803,
    GT_SIM_MSG_CHALLENGE = 0x4804,
};

// u16 type, u16 version, nonce[32]
#define GT_SIM_CHALLENGE_BYTES (2 + 2 + GT_SIM_NONCE_BYTES)

// u16 type, u16 version, nonce[32], server_nonce[32], pub[32], agreement[32],
// u32 evidence_len, evidence
#define GT_SIM_CLIENT_HELLO_FIXED (2 + 2 + 2 * GT_SIM_NONCE_BYTES + GT_X25519_BYTES + \
                                   GT_SHA256_BYTES + 4)
typedef struct {
    uint16_t version;
    uint8_t nonce[GT_SIM_NONCE_BYTES];
    uint8_t server_nonce[GT_SIM_NONCE_BYTES];  // devd's CHALLENGE, echoed and attested
    uint8_t pub[GT_X25519_BYTES];
    uint8_t agreement[GT_SHA256_BYTES];
    gt_span evidence;  // borrowed from the frame
} gt_sim_client_hello;

// u16 type, u16 version, pub[32], u32 slot_count, u32 slot_bytes, u64 mem_limit,
// u32 evidence_len, evidence
#define GT_SIM_SERVER_HELLO_FIXED (2 + 2 + GT_X25519_BYTES + 4 + 4 + 8 + 4)
typedef struct {
    uint16_t version;
    uint8_t pub[GT_X25519_BYTES];
    uint32_t slot_count;
    uint32_t slot_bytes;
    uint64_t mem_limit;
    gt_span evidence;
} gt_sim_server_hello;

// u16 type, u32 code (gt_code), u16 msg_len, msg
typedef struct {
    uint32_t code;
    char msg[GT_SIM_MAX_STATUS_MSG + 1];
} gt_sim_status;

GT_MUST_USE gt_err gt_sim_challenge_write(gt_writer *w, const uint8_t nonce[GT_SIM_NONCE_BYTES]);
GT_MUST_USE gt_err gt_sim_challenge_parse(gt_span body, uint8_t nonce[GT_SIM_NONCE_BYTES]);
GT_MUST_USE gt_err gt_sim_client_hello_write(gt_writer *w, const gt_sim_client_hello *h);
GT_MUST_USE gt_err gt_sim_client_hello_parse(gt_span body, gt_sim_client_hello *h);
GT_MUST_USE gt_err gt_sim_server_hello_write(gt_writer *w, const gt_sim_server_hello *h);
GT_MUST_USE gt_err gt_sim_server_hello_parse(gt_span body, gt_sim_server_hello *h);
GT_MUST_USE gt_err gt_sim_refuse_write(gt_writer *w, gt_err reason);
// A REFUSE frame parses into *refused (code + text); other frames leave it untouched.
GT_MUST_USE gt_err gt_sim_refuse_parse(gt_span body, gt_sim_status *refused);
// The u16 type at the start of a frame body (GT_E_TRUNCATED if shorter).
GT_MUST_USE gt_err gt_sim_peek_type(gt_span body, uint16_t *type);

// report_data for each side's evidence (see the top of this file).
GT_MUST_USE gt_err gt_sim_client_report_data(uint8_t rd[GT_REPORT_DATA_BYTES],
                                             const gt_sim_client_hello *h);
GT_MUST_USE gt_err gt_sim_device_report_data(uint8_t rd[GT_REPORT_DATA_BYTES],
                                             const uint8_t client_nonce[GT_SIM_NONCE_BYTES],
                                             const gt_sim_server_hello *sh,
                                             gt_span client_hello_body);

// ---- session keys and counters ----------------------------------------------------------------
enum {
    GT_SIM_STREAM_CTRL_C2S = 1,
    GT_SIM_STREAM_CTRL_S2C = 2,
    GT_SIM_STREAM_BULK_C2S = 3,
    GT_SIM_STREAM_BULK_S2C = 4,
};

typedef struct {
    uint8_t key_c2s[GT_AEAD_KEY_BYTES];
    uint8_t key_s2c[GT_AEAD_KEY_BYTES];
    uint64_t counter[5];  // next counter per stream id (index 0 unused)
    bool is_client;
    // The session's binding for keys wrapped to devd (LOAD_SEALED_WRAPPED): SHA-256 of the
    // server hello (its evidence binds server_pub), devd's X25519 public key, and on the server
    // side its secret, kept for the session's life to unwrap (zero on the client).
    uint8_t server_hello_hash[GT_SHA256_BYTES];
    uint8_t server_pub[GT_X25519_BYTES];
    uint8_t server_sec[GT_X25519_BYTES];
} gt_sim_keys;

// Derives both direction keys. Wipes nothing of the caller's; keys are the caller's to wipe
// (gt_secure_zero(keys, sizeof *keys)).
GT_MUST_USE gt_err gt_sim_keys_derive(gt_sim_keys *keys, bool is_client,
                                      const uint8_t shared[GT_X25519_BYTES],
                                      gt_span client_hello_body, gt_span server_hello_body);
// The next IV of stream `stream`; GT_E_LIMIT once the counter would wrap.
GT_MUST_USE gt_err gt_sim_iv_next(gt_sim_keys *keys, int stream, uint8_t iv[GT_AEAD_IV_BYTES]);
// The key that seals (sending) or opens (receiving) stream `stream`.
const uint8_t *gt_sim_stream_key(const gt_sim_keys *keys, int stream);

// ---- records (AEAD-protected control messages) ------------------------------------------------
enum {
    // client -> devd
    GT_SIM_REQ_ALLOC = 0x0101,     // u64 bytes, u32 flags
    GT_SIM_REQ_FREE = 0x0102,      // u64 handle
    GT_SIM_REQ_SIZE = 0x0103,      // u64 handle
    GT_SIM_REQ_MEMSET = 0x0104,    // u64 handle, u64 offset, u32 value, u64 len
    GT_SIM_REQ_COPY_IN = 0x0105,   // u64 handle, u64 offset, u64 len
    GT_SIM_REQ_COPY_OUT = 0x0106,  // u64 handle, u64 offset, u64 len
    GT_SIM_REQ_LAUNCH = 0x0107,    // gt_op: u32 kind, 12 x (u64 buf, u64 off), 8 x i64, 8 x f32
    GT_SIM_REQ_SYNC = 0x0108,      // empty
    GT_SIM_REQ_BYE = 0x0109,       // empty: the client ends the session (no reply)
    GT_SIM_REQ_STAT = 0x010a,      // empty: devd statistics (tests and benchmarks)
    // travelling (docs/device-sim.md "Travelling")
    GT_SIM_REQ_LEND = 0x010b,      // trainer: u32 lease_ms -> TICKET
    GT_SIM_REQ_TRIP_STATUS = 0x010c, // trainer: empty -> TRIP (+ count x LOADED when ended)
    GT_SIM_REQ_ATTACH = 0x010d,    // holder, first record: ticket[32] -> STATUS
    GT_SIM_REQ_LOAD_SEALED = 0x010e, // holder: u64 handle, u64 offset, u64 len (ciphertext bytes,
                                   // tags excluded), iv[12], aad[32], u32 seg_bytes (0:
                                   // GTCHUNK1, one tag; else the GTCHUNK2 segment size, a tag
                                   // per segment), key[32] -> STATUS, then the body (len bytes
                                   // and the tags, ciphertext || tag as stored) through the slots
                                   // (CHUNK / SLOT_FREE as copy_in), then STATUS
    GT_SIM_REQ_RETURN = 0x010f,    // holder: empty -> STATUS, then devd ends the holder session
    GT_SIM_REQ_RECALL = 0x0111,    // trainer, while lent: empty -> STATUS; ends a trip no holder
                                   // has attached to yet (FAILED), else GT_E_STATE
    GT_SIM_REQ_LOAD_SEALED_FD = 0x0110, // holder: as LOAD_SEALED plus u64 file_offset, with the
                                   // holder's chunk file attached (SCM_RIGHTS, a regular file):
                                   // devd reads ciphertext || tag from it at file_offset into
                                   // its private memory (no bounce slots) -> one STATUS at the end
    GT_SIM_REQ_RETURN_IPC = 0x0112, // holder -> a trainer serving the trip itself (--device cuda,
                                   // docs/cuda.md "Travelling with a real GPU"): ipc[72] (the
                                   // exported buffer, gt_cuda_ipc_desc wire form), aad[32] (the
                                   // chunk it holds) -> STATUS; later the trainer sends RELEASED
    GT_SIM_REQ_RETURN_STAY = 0x0113, // holder: empty -> STATUS; as RETURN, but devd parks the
                                   // attested session for the holder's next trip, which starts
                                   // with ATTACH on it (no new handshake)
    GT_SIM_REQ_LOAD_SEALED_WRAPPED = 0x0114, // holder in enclave mode: as LOAD_SEALED_FD, but
                                   // wrapped[92] (gt_x25519_wrap of the chunk key to this
                                   // session's devd key, travel.h gt_release_aad_build) in place
                                   // of key[32]; devd unwraps it itself -> one STATUS
    // labels and declared outputs (device.h; issue 13)
    GT_SIM_REQ_LABEL_ADD = 0x0120, // u64 handle, dataset id[16] -> STATUS (adds, never removes)
    GT_SIM_REQ_LABEL_GET = 0x0121, // u64 handle -> LABEL
    GT_SIM_REQ_DECLARE = 0x0122,   // u64 handle, u64 len: the agreement's bytes, copied into that
                                   // buffer -> STATUS; devd checks their hash is the session's
    GT_SIM_REQ_OUTPUTS = 0x0123,   // empty -> OUTPUTS
    GT_SIM_REQ_PIN = 0x0124,       // u64 handle, u64 len: a pinned program's bytes (as DECLARE)
    // device-sealed exports (docs/device-sim.md "Exports"; issue 13): devd seals, the client
    // copy_outs the new unlabelled buffer it names, then frees it
    GT_SIM_REQ_EXPORT_CHECKPOINT = 0x0130, // u64 handle (params), u64 offset, u64 len (bytes),
                                   // u64 step, 6 x u32 config (maxT, V, L, NH, C, Vp) -> EXPORTED
    GT_SIM_REQ_EXPORT_SIGNER = 0x0131, // empty -> SIGNER
    GT_SIM_REQ_EXPORT_RESUME = 0x0132, // 3 x u64 handles (params, m, v; m = v = 0: none),
                                   // u64 len (bytes of each), u64 step, loader (5 x u64, u32),
                                   // 6 x u32 config -> EXPORTED
    GT_SIM_REQ_IMPORT_RESUME = 0x0133, // u64 handle (the state's bytes), u64 len, 3 x u64
                                   // destination handles (params, m, v) -> RESUMED
    // peers (device.h "peers", docs/device-sim.md "Peers"; issue 16): devd makes the run's key,
    // appraises the peers' hellos itself, holds the pairwise keys, seals and opens in its arena
    GT_SIM_REQ_PEER_HELLO = 0x0140, // u32 rank, u32 nranks -> EXPORTED (a new unlabelled
                                   // buffer holding devd's hello; the client copies it out and
                                   // frees it)
    GT_SIM_REQ_PEER_ADMIT = 0x0141, // u32 rank, u64 handle, u64 len: the peer's hello, copied
                                   // into that buffer -> STATUS
    GT_SIM_REQ_PEER_RUN_ID = 0x0142, // empty -> PEER_RUN
    GT_SIM_REQ_PEER_SEAL = 0x0143, // peer header (run[16], u64 step, u32 bucket, u32 hop, u32 src,
                                   // u32 dst, u64 elem_off, u64 nelem), u64 handle (the source)
                                   // -> EXPORTED (the sealed chunk in a new unlabelled buffer)
    GT_SIM_REQ_PEER_OPEN = 0x0144, // peer header, u64 handle (the destination), u32 mode,
                                   // u64 chunk handle, u64 chunk len (the chunk's bytes, copied
                                   // into that buffer) -> STATUS
    // either direction, during a transfer
    GT_SIM_MSG_CHUNK = 0x0201,     // u32 slot, u32 chunk length (plaintext bytes)
    GT_SIM_MSG_SLOT_FREE = 0x0202, // u32 slot
    // devd -> client
    GT_SIM_REP_STATUS = 0x0301,    // u32 code, u16 msg_len, msg
    GT_SIM_REP_HANDLE = 0x0302,    // u64 handle
    GT_SIM_REP_SIZE = 0x0303,      // u64 bytes
    GT_SIM_REP_STAT = 0x0304,      // u64 sessions served, u64 bytes in use, u64 bytes wiped,
                                   // u64 buffers live, u64 mem_limit; then (version 3) the
                                   // pager: u64 page_bytes (0: no paging), cap, resident,
                                   // peak resident, evicted, page-outs, fault-ins, clean drops;
                                   // then (version 4) the prefetcher: u64 prefetch (0 or 1),
                                   // demand faults, prefetch issued, hits, wasted, assisted,
                                   // pre-evictions, mispredicted launches; then (version 6)
                                   // u64 mmap calls, ops run in parts (matmuls,
                                   // sum_of_squares)
    GT_SIM_REP_TICKET = 0x0305,    // ticket[32]
    GT_SIM_REP_TRIP = 0x0306,      // u32 state (gt_sim_trip_state), u32 code (why FAILED),
                                   // u32 count (LOADED records that follow; 0 unless RETURNED)
    GT_SIM_REP_LOADED = 0x0307,    // u64 handle, u64 bytes loaded
    GT_SIM_REP_RELEASED = 0x0308,
    GT_SIM_REP_LABEL = 0x0320,     // u32 count, u32 n (<= GT_SIM_LABEL_IDS), n x dataset id[16]
    GT_SIM_REP_OUTPUTS = 0x0321,   // u8 loss, u32 loss bits, u64 loss budget, u8 grad_norm,
                                   // u64 grad_norm budget, u8 checkpoint, u8 resume  // trainer -> holder after RETURN_IPC: empty; the import is
                                   // wiped and unmapped, the holder may free its allocation
    GT_SIM_REP_EXPORTED = 0x0330,  // u64 handle (the sealed bytes, a new buffer), u64 len
    GT_SIM_REP_SIGNER = 0x0331,    // the device's export-signing Ed25519 public key [32]
    GT_SIM_REP_RESUMED = 0x0332,   // u64 step, loader (5 x u64, u32)
    GT_SIM_REP_PEER_RUN = 0x0340,  // run[16]
};

// Travelling: one trip of the device from the trainer's session to one holder and back.
#define GT_SIM_TICKET_BYTES 32
#define GT_SIM_LOAD_AAD_BYTES 32          // a sealed chunk's AAD (GT_CHUNK_AAD_BYTES)
#define GT_SIM_MAX_LEASE_MS (3600u * 1000)
#define GT_SIM_MAX_TRIP_BUFFERS 256u      // buffers one holder may allocate on one trip
#define GT_SIM_IPC_DESC_BYTES 72          // RETURN_IPC: opaque here; cuda_backend.h's
                                          // GT_CUDA_IPC_DESC_BYTES (64-byte handle, u64le size)
typedef enum {
    GT_SIM_TRIP_AT_TRAINER = 0,  // never lent, or the result is gone (a new lend replaced it, or
                                 // the trainer released a trip's import: ipc_trip.c)
    GT_SIM_TRIP_LENT = 1,        // ticket issued, no holder attached yet
    GT_SIM_TRIP_ATTACHED = 2,    // a holder with the ticket passed admission; keys live
    GT_SIM_TRIP_LOADED = 3,      // at least one sealed chunk loaded and authenticated
    GT_SIM_TRIP_RETURNED = 4,    // holder sent RETURN; loaded buffers are the trainer's
    GT_SIM_TRIP_FAILED = 5,      // lease expired, holder vanished or trainer left: trip buffers
                                 // wiped; the device is back at the trainer
} gt_sim_trip_state;
const char *gt_sim_trip_state_name(uint32_t state);

#define GT_SIM_OP_BYTES (4 + GT_OP_MAX_REFS * 16 + GT_OP_MAX_INTS * 8 + GT_OP_MAX_FLOATS * 4)
#define GT_SIM_MAX_REC_PLAIN (2 + GT_SIM_OP_BYTES)  // the largest record plaintext (LAUNCH)

#define GT_SIM_LABEL_IDS 12  // dataset ids one LABEL reply carries (the count says how many there are)
#define GT_SIM_LABEL_ID_BYTES 16

// OUTPUTS: the declared rules and what is left of their budgets (device.h gt_device_outputs).
typedef struct {
    bool loss, grad_norm, checkpoint, resume;
    uint32_t loss_bits;
    uint64_t loss_budget, grad_norm_budget;
} gt_sim_outputs;

typedef struct {
    uint64_t sessions;
    uint64_t bytes_in_use;
    uint64_t bytes_wiped;
    uint64_t buffers_live;
    uint64_t mem_limit;
    // devd --paging-store: docs/paging.md (all 0 without paging)
    uint64_t page_bytes, paging_cap, resident, peak_resident, evicted, page_outs, fault_ins,
        clean_drops;
    // devd --prefetch (version 4): device.h gt_pager_stats' fields of the same names
    uint64_t prefetch, demand_faults, prefetch_issued, prefetch_hits, prefetch_wasted,
        assist_faults, pre_evictions, mispredicts;
    uint64_t map_calls, ops_in_parts;  // version 6: gt_pager_stats' fields of the same names
                                       // (7: ops_in_parts, once ops_in_parts, counts
                                       // sum_of_squares too)
    uint64_t discards;                 // version 7: gt_pager_stats' field of the same name
} gt_sim_stat;

// EXPORT_RESUME / RESUMED: where the trainer's loader was (train's gt_loader_pos).
typedef struct {
    uint64_t epoch, shard, sample, sample_tokens, seed;
    uint32_t shuffle;
} gt_sim_loader;
#define GT_SIM_EXPORT_KEY_BYTES 32  // SIGNER: an Ed25519 public key

// PEER_*: a chunk header (device.h gt_peer_hdr, field for field) and the requests' own fields.
typedef struct {
    uint8_t run[16];
    uint64_t step, elem_off, nelem;
    uint32_t bucket, hop, src, dst;
    uint32_t rank, nranks;      // PEER_HELLO (both), PEER_ADMIT (rank)
    uint32_t mode;              // PEER_OPEN
    uint64_t chunk, chunk_len;  // PEER_OPEN: the buffer holding the chunk's bytes
} gt_sim_peer;

// One parsed record. Which fields are set depends on type.
typedef struct {
    uint16_t type;
    uint64_t handle;
    uint64_t offset;
    uint64_t len;      // bytes (ALLOC: size; MEMSET/COPY: length)
    uint32_t flags;    // ALLOC
    uint32_t value;    // MEMSET (0..255)
    uint32_t slot;     // CHUNK, SLOT_FREE
    gt_op op;          // LAUNCH
    gt_sim_status status;
    gt_sim_stat stat;
    uint64_t file_offset;  // LOAD_SEALED_FD
    uint32_t ms;       // LEND: lease
    uint32_t state;    // TRIP
    uint32_t code;     // TRIP
    uint32_t count;    // TRIP
    uint8_t ticket[GT_SIM_TICKET_BYTES];   // ATTACH, TICKET
    uint8_t iv[GT_AEAD_IV_BYTES];          // LOAD_SEALED
    uint8_t aad[GT_SIM_LOAD_AAD_BYTES];    // LOAD_SEALED
    uint8_t key[GT_AEAD_KEY_BYTES];        // LOAD_SEALED: the chunk key (wipe the message)
    uint32_t seg_bytes;                    // LOAD_SEALED*: 0 = GTCHUNK1, else its segment size
    uint8_t wrapped[GT_KEYWRAP_BYTES];     // LOAD_SEALED_WRAPPED: the chunk key, wrapped
    uint8_t ipc[GT_SIM_IPC_DESC_BYTES];    // RETURN_IPC (aad: the chunk's AAD)
    // exports: handle/offset/len as above, and
    uint64_t step;                         // EXPORT_*, RESUMED
    uint32_t config[6];                    // EXPORT_CHECKPOINT, EXPORT_RESUME
    uint64_t bufs[3];                      // EXPORT_RESUME, IMPORT_RESUME: params, m, v
    gt_sim_loader loader;                  // EXPORT_RESUME, RESUMED
    uint8_t export_key[GT_SIM_EXPORT_KEY_BYTES];  // SIGNER
    uint8_t label_ids[GT_SIM_LABEL_IDS][GT_SIM_LABEL_ID_BYTES];  // LABEL_ADD (the first), LABEL
    uint32_t label_n;                      // LABEL: ids carried (count: ids in the label)
    gt_sim_outputs outputs;                // OUTPUTS
    gt_sim_peer peer;                      // PEER_* (handle, len: as their layouts say)
} gt_sim_msg;

// The PEER_* records on their own (sim_peer.c; gt_sim_msg_write / _parse call them).
bool gt_sim_peer_type(uint16_t type);
GT_MUST_USE gt_err gt_sim_peer_msg_write(gt_writer *w, const gt_sim_msg *m);
GT_MUST_USE gt_err gt_sim_peer_msg_parse(gt_reader *r, gt_sim_msg *m);

// Serialises m (plaintext) into w. Each type writes exactly its fixed layout.
GT_MUST_USE gt_err gt_sim_msg_write(gt_writer *w, const gt_sim_msg *m);
// Parses one record plaintext; GT_E_FORMAT for an unknown type or a wrong size.
GT_MUST_USE gt_err gt_sim_msg_parse(gt_span plain, gt_sim_msg *m);
// Convenience: a STATUS message from a gt_err, and back.
void gt_sim_msg_status(gt_sim_msg *m, gt_err e);
gt_err gt_sim_status_err(const gt_sim_status *s);
const char *gt_sim_msg_name(uint16_t type);

// Seals record plaintext into a frame body (ciphertext || tag) with the next control IV of this
// side's sending direction. out_cap >= plain_len + 16.
GT_MUST_USE gt_err gt_sim_record_seal(gt_sim_keys *keys, uint8_t *out, size_t out_cap,
                                      size_t *out_len, const uint8_t *plain, size_t plain_len);
// Opens a frame body received from the peer with the next control IV of the peer's direction.
// GT_E_AUTH on any failure (the caller ends the session).
GT_MUST_USE gt_err gt_sim_record_open(gt_sim_keys *keys, uint8_t *plain, size_t plain_cap,
                                      size_t *plain_len, gt_span body);

// The aad of one bulk chunk.
#define GT_SIM_BULK_AAD_BYTES (sizeof(GT_SIM_AAD_BULK) - 1 + 8 + 8 + 4)
void gt_sim_bulk_aad(uint8_t aad[GT_SIM_BULK_AAD_BYTES], uint64_t handle, uint64_t offset,
                     uint32_t len);

// Serialising a gt_op (LAUNCH) on its own, for tests.
GT_MUST_USE gt_err gt_sim_op_write(gt_writer *w, const gt_op *op);
GT_MUST_USE gt_err gt_sim_op_parse(gt_reader *r, gt_op *op);

// ---- frames on the socket (sim_io.c) ----------------------------------------------------------
// Sends one frame (u32le length || body), attaching attach_fd (SCM_RIGHTS) when >= 0. Never
// raises SIGPIPE; a peer that went away is GT_E_PEER.
GT_MUST_USE gt_err gt_sim_frame_send(int fd, const uint8_t *body, size_t len, int attach_fd);
// While waiting for input, devd also watches one more descriptor (its listening socket) and calls
// on_watch when it is readable, so a second client is refused even mid-session.
typedef struct {
    int fd;                        // -1: none
    void (*on_watch)(void *ctx);
    void *ctx;
    int timeout_ms;                // per wait for the next bytes; <= 0: no timeout
    const volatile sig_atomic_t *stop;  // may be NULL; non-zero ends the wait (GT_E_STATE)
    // A second watched descriptor (devd: the lending trainer's socket while a holder is
    // attached), used only when on_watch2 is set.
    int fd2;
    void (*on_watch2)(void *ctx2);
    void *ctx2;
    const bool *abort2;            // set by on_watch2: the wait ends (GT_E_PEER)
    double deadline;               // gt_now_seconds() after which a wait fails (GT_E_TIMEOUT);
                                   // 0: none (devd: the lease's end)
} gt_sim_watch;
// Receives one frame body into buf (cap bytes; a longer frame is GT_E_LIMIT). When recv_fd is not
// NULL, a descriptor attached to the frame is returned there (else -1); descriptors attached where
// none is expected are closed. EOF is GT_E_PEER.
GT_MUST_USE gt_err gt_sim_frame_recv(int fd, uint8_t *buf, size_t cap, size_t *len, int *recv_fd,
                                     const gt_sim_watch *watch);

// ---- messages: one AEAD record per frame (sim_io.c) -------------------------------------------
// Seals m as one record with this side's keys and sends it (attach_fd as gt_sim_frame_send). The
// plaintext staging is wiped: a LOAD_SEALED record carries a chunk key.
GT_MUST_USE gt_err gt_sim_msg_send(int fd, gt_sim_keys *keys, const gt_sim_msg *m, int attach_fd);
// Receives one frame into rx (cap bytes), opens it with the peer's direction of keys and parses
// the message; recv_fd as gt_sim_frame_recv (the caller closes a received descriptor, also on
// failure). The opened plaintext is wiped.
GT_MUST_USE gt_err gt_sim_msg_recv(int fd, gt_sim_keys *keys, uint8_t *rx, size_t cap,
                                   int *recv_fd, const gt_sim_watch *watch, gt_sim_msg *m);

// ---- the server end of the handshake ------------------------------------------------------------
// The server end of the handshake, shared by devd and by a trainer that serves a trip itself
// (travel.h, --device cuda). One copy of the handshake: hello parsing, evidence binding and key
// derivation are sim_proto.c's.

typedef struct {
    uint32_t slot_count, slot_bytes;  // bounce layout announced (and attested) in SERVER_HELLO
    uint64_t mem_limit;               // announced (and attested) device memory
    // This side's evidence over report_data, and the admission of the client's evidence.
    gt_err (*produce)(void *ctx, const uint8_t *report_data, gt_buf *evidence);
    void *produce_ctx;
    gt_err (*appraise)(void *ctx, gt_span evidence, const uint8_t *report_data);
    void *appraise_ctx;
    // Creates the bounce memfd (slot_count * slot_bytes, sealed against shrink/grow) once the
    // client's evidence passed; *fd is attached to SERVER_HELLO and stays the caller's.
    gt_err (*bounce)(void *ctx, int *fd);
    void *bounce_ctx;
    // When set, receives the CLIENT_HELLO body of an accepted client (devd: its peer hellos
    // carry it, so a peer can appraise the trainer this device serves).
    gt_buf *client_hello;
} gt_sim_server_params;

// Reads CLIENT_HELLO from fd (rx: GT_SIM_MAX_FRAME bytes of scratch), appraises the client's
// evidence (bound to its nonce, X25519 key and agreement hash), answers SERVER_HELLO with this
// side's evidence (bound to the client's hello and to the announced parameters) and derives the
// session keys. A malformed hello or refused evidence is answered with REFUSE. On success *keys
// and agreement (the client's agreement hash) are set.
GT_MUST_USE gt_err gt_sim_server_handshake(int fd, uint8_t *rx, const gt_sim_watch *watch,
                                           const gt_sim_server_params *p, gt_sim_keys *keys,
                                           uint8_t agreement[GT_SHA256_BYTES]);

// ---- the device's identity and evidence ---------------------------------------------------------
// The sim device's identity and evidence, and the default evidence hooks of
// both session ends (built on attest/: sim evidence, policy, appraisal).
//
// Identity: devd's identity key is a P-384 key kept like a sim root (attest.h) in an identity
// directory (root-key.pem 0600, root-pub.pem), created on first start - a GPU's fused device key.
// At start devd has it certified by the simulated vendor root (the sim root, attest.h): the
// vendor root signs "gtsim-devcert-v1" || identity public key (P-384 x || y) - a GPU's device
// certificate chain in miniature.
//
// Device evidence (the bundle devd sends in SERVER_HELLO; integers little-endian):
//   "GTSIMDEV" | u16 version (2) | u16 n, identity public key PEM (root-pub.pem's bytes)
//   | u16 n, vendor certificate signature (DER) | u32 n, GTEV sim evidence
// The GTEV sim evidence (attest.h: type sim, device = true, cc_mode = true, measurement =
// SHA-384 of devd's executable, device_memory = what holds the device's memory: devd by default,
// cuda or host on a trip a trainer serves itself, report_data = the session binding) is signed
// by the identity key
// and is ALWAYS insecure-simulation. `gputravel verify --evidence E --root IDDIR/root-pub.pem`
// appraises it like any other evidence. The memory limit is bound through report_data (the
// device report_data covers the server hello's parameters; devproto.h).

#define GT_SIM_DEV_MAGIC "GTSIMDEV"
#define GT_SIM_DEV_VERSION 2u
#define GT_SIM_DEV_CERT_TAG "gtsim-devcert-v1"
#define GT_SIM_DEV_MAX_PEM 4096
#define GT_SIM_DEV_MAX_CERT 256

typedef struct gt_sim_identity gt_sim_identity;

// Opens (creating on first use) the identity in identity_dir (NULL: <sim root dir>/devd-identity)
// and has it certified by the vendor root in vendor_root_dir (NULL: the sim root dir, created on
// first use). Measures this executable.
GT_MUST_USE gt_err gt_sim_identity_open(gt_sim_identity **id, const char *identity_dir,
                                        const char *vendor_root_dir);
void gt_sim_identity_free(gt_sim_identity *id);
// What this identity's evidence says holds the device's memory (default GT_SIM_MEMORY_DEVD): a
// trip a trainer serves itself says cuda or host (travel.h), never devd.
void gt_sim_identity_set_memory(gt_sim_identity *id, gt_sim_device_memory memory);
// A 32-byte secret for one purpose ("export signing", "resume"), derived from devd's persistent
// identity: HKDF-SHA256(ikm = the identity key file's bytes, info = "gputravel devd " purpose).
// Another identity folder gives other secrets. The caller wipes out.
GT_MUST_USE gt_err gt_sim_identity_derive(const gt_sim_identity *id, const char *purpose,
                                          uint8_t out[32]);
// The device id: SHA-256 of the identity public key (PEM), what its evidence carries.
GT_MUST_USE gt_err gt_sim_identity_id(const gt_sim_identity *id, uint8_t out[32]);
// The produce hook of devd (ctx = gt_sim_identity): the bundle above.
gt_err gt_sim_identity_produce(void *ctx, const uint8_t report_data[GT_REPORT_DATA_BYTES],
                               gt_buf *evidence);

// A parsed bundle; spans borrow the bundle's bytes.
typedef struct {
    gt_span identity_pem;
    gt_span cert_sig;
    gt_span gtev;
} gt_sim_device_bundle;
GT_MUST_USE gt_err gt_sim_device_bundle_parse(gt_span bundle, gt_sim_device_bundle *out);

// Appraises device evidence: the identity certificate against the vendor root public key
// (vendor_root_pub_pem: a PEM file path; NULL: <sim root dir>/root-pub.pem), then the GTEV under
// policy (NULL: sim accepted, debug forbidden, device with CC mode on) with the identity key as
// its root and report_data as the expected binding. GT_E_AUTH / GT_E_POLICY with the reasons.
// claims_out (optional): the appraisal's claims JSON (caller cJSON_Delete).
GT_MUST_USE gt_err gt_sim_device_evidence_appraise(gt_span bundle, const uint8_t *report_data,
                                                   const char *vendor_root_pub_pem,
                                                   const gt_policy *policy, cJSON **claims_out);

// Default hooks. Client: produce = sim evidence from the sim root (attest.h, created on first
// use); appraise = gt_sim_device_evidence_appraise (ctx: the vendor root PEM path or NULL). devd: appraise = the client
// evidence must be sim evidence signed by the sim root, not debug, bound to report_data.
gt_err gt_sim_default_client_produce(void *ctx, const uint8_t rd[GT_REPORT_DATA_BYTES],
                                     gt_buf *evidence);
gt_err gt_sim_default_client_appraise(void *ctx, gt_span evidence,
                                      const uint8_t rd[GT_REPORT_DATA_BYTES]);

// devd's admission: a policy and the roots client evidence is checked against.
typedef struct {
    gt_policy *policy;              // owned
    char root_path[4096];           // a PEM file: CA certificate(s) or a sim root public key
    gt_buf root_data;               // its bytes
} gt_sim_admission;
// policy_path NULL: sim accepted, debug forbidden. root_pem NULL: the sim root's root-pub.pem.
GT_MUST_USE gt_err gt_sim_admission_open(gt_sim_admission **adm, const char *policy_path,
                                         const char *root_pem);
void gt_sim_admission_free(gt_sim_admission *adm);
gt_err gt_sim_admission_appraise(void *ctx, gt_span evidence,
                                 const uint8_t rd[GT_REPORT_DATA_BYTES]);

// ---- the client end of a session --------------------------------------------------------------
// Connects, runs the handshake and maps the bounce slots; then records both ways. The sim device
// backend (device.h) and the holder's end of a trainer-served trip (travel.h) run over it; tests
// use it directly to send crafted, replayed or reordered records and to tamper with the bounce
// slots, which a real attacker on the host could do.

// The client side of a sim device and devd (the server) exchange evidence through these hooks,
// so neither end hard-codes a TEE. report_data is what the evidence must bind (docs/design.md §4:
// SHA-512(domain tag || nonce || session public key || agreement/transcript hash)).
typedef struct {
    void *ctx;
    // This side's evidence binding report_data, appended to *evidence (caller frees, gt_buf_free).
    gt_err (*produce)(void *ctx, const uint8_t report_data[GT_REPORT_DATA_BYTES],
                      gt_buf *evidence);
    // OK only if the peer's evidence is acceptable under this side's policy and binds exactly
    // report_data; otherwise GT_E_POLICY / GT_E_AUTH with the reasons.
    gt_err (*appraise)(void *ctx, gt_span evidence,
                       const uint8_t report_data[GT_REPORT_DATA_BYTES]);
} gt_device_attester;

typedef struct {
    // NULL hooks take the defaults: produce = sim evidence signed by this machine's sim root
    // (attest.h; insecure-simulation), appraise = the device evidence must verify: identity key
    // certified by the sim vendor root, evidence signed by it, bound to this session, a device
    // in CC mode, not debug (always insecure-simulation).
    gt_device_attester attester;
    const char *vendor_root_pem;  // default appraise: vendor root public key (NULL: sim root's)
    // What the device must say holds its memory (the evidence's device_memory claim): the
    // default appraisal refuses any other with GT_E_POLICY naming both. GT_SIM_MEMORY_UNSTATED:
    // not checked. With a caller's appraise hook it cannot be checked: GT_E_ARG.
    gt_sim_device_memory expect_memory;
    uint8_t agreement_hash[GT_SHA256_BYTES];  // zeros when there is none
    int timeout_ms;  // per reply from devd (0: 60 s)
    // devd serves one session at a time: "device busy" (GT_E_STATE) is retried with backoff for
    // up to this long (0: not at all), e.g. while devd still wipes a crashed trainer's session.
    int busy_wait_ms;
} gt_device_sim_options;

typedef struct {
    int fd;
    gt_sim_keys keys;
    uint8_t *bounce;
    size_t bounce_bytes;
    uint32_t slot_count, slot_bytes;
    uint64_t mem_limit;
    gt_buf device_evidence;
    // Both hello bodies as sent: what a holder enclave's wrap leaf appraises devd from itself.
    gt_buf client_hello, server_hello;
    uint8_t device_report_data[GT_REPORT_DATA_BYTES];
    uint8_t device_measurement[GT_MEASUREMENT_BYTES];
    bool has_measurement;  // the default appraisal ran and kept the evidence's measurement
    gt_sim_watch watch;  // reply timeout
    bool broken;         // a fatal error ended the session; every call fails from then on
    bool holder;         // attached to a lent device with a ticket
    bool parked;         // the trip ended with RETURN_STAY: only a reattach may follow
} gt_sim_conn;
// On failure c is closed.
GT_MUST_USE gt_err gt_sim_conn_open(gt_sim_conn *c, const char *socket_path,
                                    const gt_device_sim_options *opt);
// Sends BYE when the session is still good and waits for devd to end it; a parked session is
// just closed (devd, not reading it until the next lend, notices then).
void gt_sim_conn_close(gt_sim_conn *c);
GT_MUST_USE gt_err gt_sim_conn_send(gt_sim_conn *c, const gt_sim_msg *m);
GT_MUST_USE gt_err gt_sim_conn_recv(gt_sim_conn *c, gt_sim_msg *m);
// The same with attach_fd attached to the record's frame (SCM_RIGHTS) when >= 0.
GT_MUST_USE gt_err gt_sim_conn_send_fd(gt_sim_conn *c, const gt_sim_msg *m, int attach_fd);

// Receives the reply to a request: `want` or a STATUS. A STATUS error is the request's error
// (the session goes on); anything else unexpected ends the session.
GT_MUST_USE gt_err gt_sim_conn_recv_reply(gt_sim_conn *c, uint16_t want, gt_sim_msg *m);
GT_MUST_USE gt_err gt_sim_conn_rpc(gt_sim_conn *c, const gt_sim_msg *req, uint16_t want,
                                   gt_sim_msg *rep);
// ATTACH with a ticket to the lent device (devd, or a trip the trainer serves itself): on
// success the session is the holder's end of that trip (c->holder). A refusal is the request's
// error; the far end closes the session then.
GT_MUST_USE gt_err gt_sim_conn_attach(gt_sim_conn *c, const uint8_t ticket[GT_SIM_TICKET_BYTES]);
// The device's measurement from the evidence the default appraisal accepted at open;
// GT_E_NOTFOUND when a custom appraise hook judged the device.
GT_MUST_USE gt_err gt_sim_conn_measurement(const gt_sim_conn *c,
                                           uint8_t out[GT_MEASUREMENT_BYTES]);
// Marks the session broken (every later call fails) and returns e.
gt_err gt_sim_conn_fail(gt_sim_conn *c, gt_err e);

#endif
