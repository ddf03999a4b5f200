// gputravel/travel.h: what the parties agree on, the trips the device makes, and the holder
// protocol both ends speak.
//
// The training agreement is a JSON document every party holds byte for byte; its SHA-256 over
// those exact bytes (no re-serialisation) is the agreement hash bound into every evidence the
// trainer and the device present (docs/design.md §4). Schema: docs/agreement.md.
#ifndef GPUTRAVEL_TRAVEL_H
#define GPUTRAVEL_TRAVEL_H

#include <gputravel/attest.h>
#include <gputravel/crypto.h>
#include <gputravel/device.h>
#include <gputravel/net.h>
#include <gputravel/seal.h>
#include <gputravel/util.h>

#include <stdbool.h>
#include <stdint.h>

#define GT_AGREEMENT_MAX_HOLDERS 64
#define GT_AGREEMENT_MAX_MEASUREMENTS 16
#define GT_AGREEMENT_MAX_RANKS 256  // trainer.ranks: GT_PEER_MAX_RANKS (device.h)
#define GT_AGREEMENT_NAME_BYTES 64
#define GT_AGREEMENT_MAX_BYTES 65536  // a document: 64 holders with keys take about 30 KiB

// holders[i].enclave: the holder named by the SGX identity of the enclave that holds its dataset
// key and makes its release decisions (docs/holder-enclave.md "Named by enclave"). The trainer
// asks that holder for nothing until a vsgx quote of that enclave, bound to the agreement, the
// holder's identity key and the channel, passes an sgx_enclave policy of these fields.
typedef struct {
    bool present;
    bool has_mrsigner, has_mrenclave;  // at least one
    uint8_t mrsigner[32], mrenclave[32];
    bool has_isvprodid;  // absent: any ISVPRODID
    uint16_t isvprodid;
    uint16_t min_isvsvn;  // default 0
    bool debug;           // true: a DEBUG enclave is acceptable too (default false: refused)
} gt_agreement_enclave;

typedef struct {
    char name[GT_AGREEMENT_NAME_BYTES];
    uint8_t identity_key[GT_ED25519_PUBLIC_BYTES];  // the holder's Ed25519 key (ledger, manifest)
    char endpoint[128];                             // HOST:PORT of its agent
    uint8_t dataset_id[GT_DATASET_ID_BYTES];
    uint64_t token_budget;        // tokens the trainer may consume from this holder in total
    uint32_t max_uses_per_chunk;  // how many times each chunk may be loaded and trained on
    // X25519 key a sealed checkpoint is wrapped to ("recipient_key"); required for recipients.
    uint8_t recipient_key[GT_X25519_BYTES];
    bool has_recipient_key;
    gt_agreement_enclave enclave;  // "enclave" (optional)
} gt_agreement_holder;

typedef struct {
    uint8_t values[GT_AGREEMENT_MAX_MEASUREMENTS][GT_MEASUREMENT_BYTES];
    uint32_t count;  // 0: any measurement (only sensible with simulation)
} gt_measurement_list;

typedef enum { GT_OUTPUT_LOSS_ONLY = 0, GT_OUTPUT_SEALED_CHECKPOINT } gt_output_kind;

// How a holder's chunk may reach the trainer's device: the agreement's "transfer" list
// (docs/agreement.md). A holder serves a request only in a mode its agreement lists.
typedef enum {
    GT_TRANSFER_CONVENTIONAL = 0,         // FETCH plain: the holder decrypts, TLS carries plaintext
    GT_TRANSFER_CONVENTIONAL_KEYRELEASE,  // FETCH key release: the sealed chunk over TLS, its key
                                          // released to the trainer's TEE
    GT_TRANSFER_TRAVEL,                   // TRAVEL: the device travels to the holder: devd, or a
                                          // trip a cuda trainer serves (device protected memory)
    GT_TRANSFER_INSECURE_HOST_TRIP,       // TRAVEL "ipc-cpu:": the trip a cpu trainer serves, its
                                          // chunk in the trainer's host memory: no protection
    GT_TRANSFER_MODE_COUNT
} gt_transfer_mode;
#define GT_TRANSFER_BIT(m) (1u << (unsigned)(m))
// Without a "transfer" field: the device travels, or the sealed chunk's key is released to the
// attested trainer. Plaintext over TLS and the host-memory trip only where listed.
#define GT_TRANSFER_DEFAULT \
    (GT_TRANSFER_BIT(GT_TRANSFER_TRAVEL) | GT_TRANSFER_BIT(GT_TRANSFER_CONVENTIONAL_KEYRELEASE))
// "conventional", "conventional-keyrelease", "travel", "insecure-host-trip"; "unknown" else.
const char *gt_transfer_mode_name(gt_transfer_mode mode);
// The mode of that name; GT_E_ARG naming the four otherwise.
GT_MUST_USE gt_err gt_transfer_mode_parse(const char *name, gt_transfer_mode *mode);

typedef struct {
    char name[GT_AGREEMENT_NAME_BYTES];
    // model (llm.c GPT-2 shapes) and training
    uint32_t layers, channels, heads, vocab, max_seq;
    uint64_t init_seed;
    uint32_t steps, batch, seq;
    float learning_rate;
    // parties
    gt_agreement_holder holders[GT_AGREEMENT_MAX_HOLDERS];
    uint32_t holder_count;
    gt_measurement_list trainer_measurements;
    gt_measurement_list device_measurements;
    uint32_t ranks;  // trainer.ranks: data-parallel trainer ranks admitted (default 1; issue 16)
    bool allow_simulation;  // every party accepts simulated TEEs/devices (demo, tests)
    // what may leave the TEE at the end
    gt_output_kind output;
    char recipients[GT_AGREEMENT_MAX_HOLDERS][GT_AGREEMENT_NAME_BYTES];
    uint32_t recipient_count;
    // how chunks may reach the device: GT_TRANSFER_BIT of each listed mode (GT_TRANSFER_DEFAULT
    // when the document has no "transfer"); never 0 after a successful parse
    uint32_t transfers;
    // What the device may release from labelled data ("outputs", docs/agreement.md): the
    // training loss (every `loss_every` steps, rounded to loss_mantissa_bits), the gradient
    // norm, the resume state (sealed by the device to itself); the checkpoint is `output`.
    // training.program: SHA-256 of the op sequence of one step the device must see (kernels.h
    // "programs"); absent: not pinned.
    bool program_pinned;
    uint8_t program_hash[GT_SHA256_BYTES];
    struct {
        bool loss;
        uint32_t loss_every, loss_mantissa_bits;
        bool grad_norm;
        bool resume;
    } outputs;
    uint8_t hash[GT_SHA256_BYTES];  // SHA-256 of the document's bytes
    // The document itself, byte for byte: what the trainer declares to a sim device, which
    // parses it again on its side (device.h gt_device_declare_outputs).
    uint8_t doc[GT_AGREEMENT_MAX_BYTES];
    size_t doc_len;
} gt_agreement;

// The device's rules for this agreement (device.h gt_device_outputs): what the trainer declares
// on cpu and cuda, and what devd derives itself from the same bytes on sim. Budgets: one loss
// release per `loss_every` steps of training.steps, rounded up; one grad norm per step.
void gt_agreement_device_outputs(const gt_agreement *a, gt_device_outputs *out);

// Parses and validates an agreement document (untrusted bytes, at most GT_AGREEMENT_MAX_BYTES);
// fills a->hash and keeps the bytes in a->doc.
GT_MUST_USE gt_err gt_agreement_parse(gt_agreement *a, const uint8_t *doc, size_t len);
GT_MUST_USE gt_err gt_agreement_load(gt_agreement *a, const char *path);
// The strict shape check gt_agreement_parse runs first (agreement_strict.c): every object holds
// only the fields docs/agreement.md names, each once, each of its type, and all required ones.
// The first problem is GT_E_FORMAT naming its JSON path ("training.warmup: unknown field",
// "model.layers: expected an integer, got a string", "holders[1].name: field given twice").
GT_MUST_USE gt_err gt_agreement_check_shape(const cJSON *doc);
// Every shape problem of a document (untrusted bytes), not just the first: fn(ctx, "PATH: what")
// for each, at most max (0: 1); *count: how many were reported. Errors only for a document that
// is no JSON at all (GT_E_FORMAT) or too large (GT_E_LIMIT). For `gputravel agreement check`.
typedef void (*gt_agreement_problem_fn)(void *ctx, const char *problem);
GT_MUST_USE gt_err gt_agreement_lint(const uint8_t *doc, size_t len, gt_agreement_problem_fn fn,
                                     void *ctx, unsigned max, unsigned *count);
// The holder entry with this name, or NULL.
const gt_agreement_holder *gt_agreement_find_holder(const gt_agreement *a, const char *name);
// True when the agreement lists mode.
bool gt_agreement_allows(const gt_agreement *a, gt_transfer_mode mode);
// The agreement's transfer modes by name, comma-separated in enum order (e.g.
// "conventional-keyrelease, travel"), NUL-terminated, cut to cap.
void gt_agreement_transfer_list(const gt_agreement *a, char *out, size_t cap);
// GT_OK when the agreement lists mode, else GT_E_POLICY naming the mode and the agreement's list
// (what: who asks, e.g. "--transfer" or "FETCH plain").
GT_MUST_USE gt_err gt_agreement_transfer_check(const gt_agreement *a, gt_transfer_mode mode,
                                               const char *what);
// True when m is in the list (constant-time per entry), or the list is empty.
bool gt_measurement_allowed(const gt_measurement_list *list, const uint8_t m[GT_MEASUREMENT_BYTES]);

// ---- TEE-backed attestors for attested channels ----------------------------------------------
// This side proves itself with evidence from the attest layer (sim, tdx or snp) whose report_data
// is gt_attest_report_data_build("gputravel/attested-tls/v1", binding, -, agreement hash): fresh
// per TLS session (net.h) and bound to the agreement. The peer's evidence must carry the
// report_data computed the same way, be accepted by `policy`, and - when the agreement lists
// measurements for the peer's role - carry one of them (claim "measurement", or "mr_td" for TDX).
#define GT_TLS_REPORT_DATA_TAG "gputravel/attested-tls/v1"

typedef enum { GT_PEER_TRAINER = 0, GT_PEER_HOLDER, GT_PEER_DEVICE } gt_peer_role;

typedef struct {
    gt_collect_params collect;         // how this side collects its evidence
    const gt_policy *policy;           // how the peer's evidence is appraised (NULL: default)
    const gt_attest_file *roots;       // trust inputs for the peer's evidence (sim root, CAs)
    size_t root_count;
    const gt_agreement *agreement;
    gt_peer_role peer_role;
    // Out, after an accepted appraisal: "sim measurement 1a2b... (insecure-simulation)". The
    // channel calls appraise from the thread that accepts or connects; one attestor per thread.
    char peer_summary[192];
} gt_tee_attestor;

// The callbacks for gt_channel_connect / gt_listener_accept, backed by t (borrowed).
// Evidence goes out as GT_TLS_EVIDENCE_MAGIC || this side's agreement hash || the evidence
// envelope: when the peer's evidence is authentic but its report_data binds this session under
// the agreement hash it names instead of ours, the refusal says "different agreement: ours
// 455b..., yours 69ed..." (a hint only: acceptance still needs our hash in its report_data).
gt_net_attestor gt_tee_attestor_bind(gt_tee_attestor *t);
#define GT_TLS_EVIDENCE_MAGIC "GTAGEV01"
#define GT_TLS_EVIDENCE_MAGIC_BYTES 8
// Splits a peer's evidence message (untrusted; gt_reader): *evidence borrows msg. With the magic,
// agreement receives the hash it names and *has_agreement is true (GT_E_TRUNCATED when the hash
// is cut short); without it the whole message is the evidence (a peer that sends bare evidence).
GT_MUST_USE gt_err gt_tls_evidence_split(const uint8_t *msg, size_t len, gt_span *evidence,
                                         uint8_t agreement[GT_SHA256_BYTES], bool *has_agreement);

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
// A holder serves a request only in a transfer mode its agreement lists (gt_transfer_mode: FETCH
// plain is conventional, key release conventional-keyrelease, TRAVEL to devd or ipc-cuda: travel,
// TRAVEL to ipc-cpu: insecure-host-trip); any other is refused (REFUSE naming the mode and the
// list) before it is decided or anything is attached, and ledgered. A trip's device evidence must
// say the memory its address implies (devd, cuda, host: docs/trip.md), else it is refused too.
// A holder refuses a FETCH when the chunk does not exist, has max_uses_per_chunk confirmed uses,
// was already sent max_uses_per_chunk + 1 times (one resend recovers a trainer that crashed
// between fetch and commit; it costs budget like any release), or releasing it would bring the
// released tokens over the token budget (a hard cap: the chunk is refused whole). Every grant,
// refusal and confirmed use is a ledger entry.
//
// Co-holder witnesses (docs/ledger.md "Witnesses"): after WELCOME every holder sends HEAD, its
// ledger head (entries, hash) and a fresh nonce, signed with its identity key. When a HEAD asks
// for witnesses, the trainer shows each holder's HEAD to every other holder (WITNESS_REQ), which
// answers WITNESS: the head of that holder it had witnessed before (0 entries: none), bound to
// the HEAD's nonce and signed with its own identity key, and then records the new head in its
// ledger ("witness") only once that holder confirms it. The trainer hands a holder its
// co-holders' WITNESS (WITNESSES); the holder checks each against its own ledger (a witnessed
// head must be a prefix of it) and answers WITNESS_OK (its HEAD signed again, as confirmed), or
// REFUSE and serves no one: it was rolled back. The trainer passes the confirmed HEAD to the
// co-holders (WITNESS_CONFIRM), which then record it: a rolled-back holder never confirms its
// forked head, so it stays behind what its co-holders witnessed, restart or not. The trainer
// relays and cannot forge (signatures) or replay (nonces); withholding witnesses gets it nothing.
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
    GT_HP_HEAD,         // holder -> trainer, right after WELCOME: its signed ledger head
    GT_HP_WITNESS_REQ,  // trainer -> holder: another holder's HEAD, to witness
    GT_HP_WITNESS,      // holder -> trainer: what it had witnessed of that holder, signed
    GT_HP_WITNESSES,    // trainer -> holder: its co-holders' WITNESS of its head
    GT_HP_WITNESS_OK,   // holder -> trainer: the witnesses agree with its ledger: its HEAD,
                        // signed again as confirmed
    GT_HP_WITNESS_CONFIRM,  // trainer -> holder: a co-holder's confirmed HEAD (no answer)
    GT_HP_ENCLAVE_QUOTE,    // holder -> trainer, right after HEAD when its flags say so: a vsgx
                            // quote of the holder enclave (below, "A holder named by enclave")
};
#define GT_HP_MAX_CONTROL 4096
#define GT_HP_MAX_MANIFEST (GT_MANIFEST_HEADER_BYTES + GT_MANIFEST_ENTRY_BYTES * 65536ull + 1024)

typedef enum { GT_FETCH_PLAIN = 1, GT_FETCH_KEYRELEASE = 2, GT_FETCH_TRAVEL = 3 } gt_fetch_mode;

// Parsers of the trainer's messages (untrusted; gt_reader; each only at its exact size). Each
// message has one writer and one parser, here, for both ends: holder/ and orchestr/ use them.
typedef struct {
    uint8_t agreement[GT_SHA256_BYTES];  // the agreement hash
    uint8_t signing_key[GT_ED25519_PUBLIC_BYTES];  // the trainer's checkpoint signing key
    char trainer[64];  // 1..63 printable ASCII bytes, NUL-terminated
} gt_hp_hello;
typedef struct {
    uint8_t mode;  // GT_FETCH_PLAIN or GT_FETCH_KEYRELEASE
    uint32_t chunk;
} gt_hp_fetch;
typedef struct {
    uint32_t chunk;
    uint8_t ticket[GT_SIM_TICKET_BYTES];
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

// Writers, one per message that carries fields (the others are sent with an empty body or a
// body that is the payload itself: WELCOME the manifest, CHUNK_* the bytes). Each writes exactly
// the layout above into w and fails with the writer's error if w is too small.
GT_MUST_USE gt_err gt_hp_hello_write(gt_writer *w, const gt_hp_hello *m);
GT_MUST_USE gt_err gt_hp_fetch_write(gt_writer *w, const gt_hp_fetch *m);
GT_MUST_USE gt_err gt_hp_travel_write(gt_writer *w, const gt_hp_travel *m);
GT_MUST_USE gt_err gt_hp_used_write(gt_writer *w, const gt_hp_used *m);
// REFUSE: u32le gt_code | text (the refusal's message, cut to fit GT_HP_MAX_CONTROL).
GT_MUST_USE gt_err gt_hp_refuse_write(gt_writer *w, gt_err why);
// REFUSE's code GT_E_RETRY says the refusal is about this one attempt at this chunk (its trip
// failed, or it was sent as often as it may be without a confirmed use): the trainer skips the
// chunk and goes on. Any other code is a verdict on the trainer or its device.
// A REFUSE body as the trainer reports it: GT_E_RETRY when the holder named it, else GT_E_POLICY
// (whatever code the holder named), with "holder NAME refused: TEXT" (TEXT cut to 180 bytes); a
// malformed body is its parse error.
gt_err gt_hp_refuse_error(gt_span body, const char *holder);
// TRAVELLED: u64le bytes loaded.
GT_MUST_USE gt_err gt_hp_travelled_write(gt_writer *w, uint64_t bytes_loaded);
GT_MUST_USE gt_err gt_hp_travelled_parse(gt_span body, uint64_t *bytes_loaded);
// HEAD: u8 version 1 | u8 flags | holder_key[32] | agreement[32] | nonce[32] | u64le entries |
// head[32] | sig[64] = Ed25519(holder key, "gputravel/ledger-head/v1" NUL || the bytes before).
// WITNESS: u8 version 1 | witness_key[32] | subject_key[32] | agreement[32] | nonce[32] (the
// HEAD's) | u64le entries | head[32] (what the witness had seen of the subject) | sig[64] =
// Ed25519(witness key, "gputravel/ledger-witness/v1" NUL || the bytes before).
// WITNESSES: u8 count | count x WITNESS.
#define GT_HP_HEAD_BYTES (1 + 1 + 32 + 32 + 32 + 8 + 32 + 64)
#define GT_HP_WITNESS_BYTES (1 + 32 + 32 + 32 + 32 + 8 + 32 + 64)
#define GT_HP_HEAD_WITNESSES_REQUIRED 0x01u
#define GT_HP_HEAD_ENCLAVE_QUOTE 0x02u  // an ENCLAVE_QUOTE follows this HEAD
typedef struct {
    uint8_t flags;
    uint8_t holder_key[GT_ED25519_PUBLIC_BYTES];
    uint8_t agreement[GT_SHA256_BYTES];
    uint8_t nonce[32];
    uint64_t entries;
    uint8_t head[GT_SHA256_BYTES];
    uint8_t sig[GT_ED25519_SIG_BYTES];
} gt_hp_head;
typedef struct {
    uint8_t witness_key[GT_ED25519_PUBLIC_BYTES];
    uint8_t subject_key[GT_ED25519_PUBLIC_BYTES];
    uint8_t agreement[GT_SHA256_BYTES];
    uint8_t nonce[32];
    uint64_t entries;
    uint8_t head[GT_SHA256_BYTES];
    uint8_t sig[GT_ED25519_SIG_BYTES];
} gt_hp_witness;
// Sign fills sig with the secret of holder_key / witness_key; verify checks sig against that key
// (GT_E_AUTH). A confirmed HEAD (WITNESS_OK) is signed under its own tag,
// "gputravel/ledger-head-confirmed/v1", so neither passes for the other. Parsers take exactly
// the layout and check nothing else.
GT_MUST_USE gt_err gt_hp_head_sign(gt_hp_head *h, const uint8_t secret[GT_ED25519_SECRET_BYTES],
                                   bool confirmed);
GT_MUST_USE gt_err gt_hp_head_verify(const gt_hp_head *h, bool confirmed);
GT_MUST_USE gt_err gt_hp_head_write(gt_writer *w, const gt_hp_head *h);
GT_MUST_USE gt_err gt_hp_head_parse(gt_span body, gt_hp_head *out);
GT_MUST_USE gt_err gt_hp_witness_sign(gt_hp_witness *h,
                                      const uint8_t secret[GT_ED25519_SECRET_BYTES]);
GT_MUST_USE gt_err gt_hp_witness_verify(const gt_hp_witness *h);
GT_MUST_USE gt_err gt_hp_witness_write(gt_writer *w, const gt_hp_witness *h);
GT_MUST_USE gt_err gt_hp_witness_parse(gt_span body, gt_hp_witness *out);
// WITNESSES: at most GT_AGREEMENT_MAX_HOLDERS; *count set.
GT_MUST_USE gt_err gt_hp_witnesses_parse(gt_span body, gt_hp_witness *out, size_t cap,
                                         size_t *count);
#define GT_HP_HELLO_MAX_BYTES (GT_SHA256_BYTES + GT_ED25519_PUBLIC_BYTES + 2 + 63)
#define GT_HP_FETCH_BYTES 5
#define GT_HP_TRAVEL_MAX_BYTES (4 + 32 + 2 + 255)
#define GT_HP_USED_BYTES 12

// ---- a holder named by enclave (holders[i].enclave; docs/holder-enclave.md) ----------------
// A holder the agreement names by enclave runs in enclave mode and, in every session, sets
// GT_HP_HEAD_ENCLAVE_QUOTE in its HEAD and sends ENCLAVE_QUOTE right after it:
//   u8 version 1 | u32le n | n bytes: a vsgx evidence envelope (attest.h), nothing after.
// The quote is the vQE's quote of the holder enclave's own EREPORT, whose REPORTDATA is
//   agreement hash (32: the one TERMS fixed in the enclave, copied by the enclave itself) ||
//   SHA-256("gputravel/holder-enclave-quote/v1" NUL || identity key (32) || channel binding (64))
// with the channel binding of this TLS connection for the holder's (server's) evidence
// (net.h gt_channel_binding): no other session, holder key or agreement has that REPORTDATA.
#define GT_HP_ENCLAVE_QUOTE_MAX 65536
#define GT_HOLDER_QUOTE_TAG "gputravel/holder-enclave-quote/v1"
GT_MUST_USE gt_err gt_hp_enclave_quote_write(gt_writer *w, gt_span evidence);
// *evidence borrows body. GT_E_FORMAT / GT_E_TRUNCATED / GT_E_UNSUPPORTED; nothing after.
GT_MUST_USE gt_err gt_hp_enclave_quote_parse(gt_span body, gt_span *evidence);
// The second half of the REPORTDATA above (what the host hands the enclave to report).
GT_MUST_USE gt_err gt_holder_quote_session(uint8_t out[GT_SHA256_BYTES],
                                           const uint8_t identity_key[GT_ED25519_PUBLIC_BYTES],
                                           const uint8_t binding[GT_NET_BINDING_BYTES]);
// The whole 64-byte REPORTDATA.
GT_MUST_USE gt_err gt_holder_quote_reportdata(uint8_t out[GT_REPORT_DATA_BYTES],
                                              const uint8_t agreement[GT_SHA256_BYTES],
                                              const uint8_t identity_key[GT_ED25519_PUBLIC_BYTES],
                                              const uint8_t binding[GT_NET_BINDING_BYTES]);

// The enclave identity a trainer verified (its quote's claims).
typedef struct {
    uint8_t mrenclave[32], mrsigner[32];
    uint16_t isvprodid, isvsvn;
    bool debug;
    char host[16];             // the host TEE under the vQE: "sim", "tdx", "snp"
    bool insecure_simulation;  // host sim
} gt_holder_enclave_seen;
// The sgx_enclave policy (docs/attestation.md) of an agreement's holders[i].enclave, and the host
// level: vsgx on a sim (only with allow_simulation), tdx or snp host, the host's debug refused.
// json: NUL-terminated (cap >= 512).
GT_MUST_USE gt_err gt_holder_quote_policy_json(const gt_agreement_enclave *e,
                                               bool allow_simulation, char *json, size_t cap);
// The trainer's check of holder `holder`'s ENCLAVE_QUOTE evidence (the envelope) received on a
// channel with `binding` (gt_channel_binding, server role): verified under roots (the sim root,
// or the CAs of the host TEE), appraised under gt_holder_quote_policy_json, its REPORTDATA
// exactly gt_holder_quote_reportdata(agreement hash, the holder's identity_key, binding).
// GT_E_POLICY naming the holder and the agreement field that did not match, or the binding part
// (another agreement; another session or identity key); *seen filled on success only.
GT_MUST_USE gt_err gt_holder_quote_appraise(const gt_agreement *a, uint32_t holder,
                                            const uint8_t binding[GT_NET_BINDING_BYTES],
                                            gt_span evidence, const gt_attest_file *roots,
                                            size_t root_count, gt_holder_enclave_seen *seen);

// ---- a trip served by the trainer itself (docs/cuda.md "The trip with a real GPU") ----------
// With a cuda (or cpu) device there is no devd: the trainer's process is the far end of the
// lend / attach / hand-over / RELEASED protocol. The holder decrypts its chunk in its own process
// (cuda: on its own GPU context with the GPU AES-GCM, handed over by CUDA IPC; cpu: with OpenSSL
// into a sealed memfd passed over the trip's socket: host memory, no confidentiality at all, for
// the protocol and the accounting only), the trainer imports it NO_READBACK, trains, releases.
//
// Device addresses in the holder protocol's TRAVEL message: "ipc-cuda:<socket path>" (a cuda
// trainer serves the trip), "ipc-cpu:<socket path>" (a cpu trainer), anything without a scheme
// is devd's socket path (the sim device). Another "<letters>:" scheme is GT_E_FORMAT.
#define GT_DEVICE_TRIP_ADDRESS_MAX 256
// Parses an address strictly: *kind = GT_DEVICE_SIM (devd), GT_DEVICE_CUDA or GT_DEVICE_CPU and
// the socket path in path (non-empty, fits a Unix socket address). GT_E_FORMAT otherwise.
GT_MUST_USE gt_err gt_device_trip_address_parse(const char *address, gt_device_kind *kind,
                                                char *path, size_t cap);

typedef struct gt_device_trip gt_device_trip;  // the trainer's end
// Trainer: serves one trip on socket_path (mode 0600) for at most lease_ms until the handoff,
// for holders under agreement_hash. dev: a cpu or cuda device (the importer follows its kind).
// The trainer's evidence is sim device evidence (<sim root>/devd-identity) and holders are
// admitted by devd's default policy. *ticket: hand it on over the attested holder channel, then
// wipe it; address: what goes into TRAVEL (address_cap >= GT_DEVICE_TRIP_ADDRESS_MAX).
// peer_fd (-1: none): the holder channel's socket; if it turns readable before the holder
// attaches (it refused on the channel, or left), the wait ends at once with GT_E_PEER.
GT_MUST_USE gt_err gt_device_trip_lend(gt_device_trip **trip, gt_device *dev,
                                       const char *socket_path, uint32_t lease_ms, int peer_fd,
                                       const uint8_t agreement_hash[GT_SHA256_BYTES],
                                       uint8_t ticket[GT_SIM_TICKET_BYTES], char *address,
                                       size_t address_cap);
// Trainer: waits for the holder's attach and handoff of the chunk with AAD aad and `bytes`
// plaintext bytes; *out: the NO_READBACK import. Failures as gt_ipc_trip_wait (GT_E_TIMEOUT:
// the lease; GT_E_PEER: the holder left without handing over; GT_E_ARG / GT_E_POLICY /
// GT_E_FORMAT: a wrong handoff), nothing imported.
GT_MUST_USE gt_err gt_device_trip_wait(gt_device_trip *trip,
                                       const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                       uint64_t bytes, gt_dbuf *out);
// Trainer, while it uses the import: GT_E_PEER when the holder went away (the import is already
// released; discard what was computed from it).
GT_MUST_USE gt_err gt_device_trip_check(gt_device_trip *trip);
// Trainer, done: checks, releases the import (wipe, unmap), says RELEASED, takes the BYE.
// GT_E_PEER: the holder had gone away first (discard the results).
GT_MUST_USE gt_err gt_device_trip_release(gt_device_trip *trip);
void gt_device_trip_close(gt_device_trip *trip);  // releases what is still held; NULL is fine

typedef struct gt_device_trip_carrier gt_device_trip_carrier;  // the holder's end
// Holder: attaches to the trip at address (ipc-cuda: or ipc-cpu:; devd's path is GT_E_ARG) with
// the ticket: the attested handshake (opt: its evidence, its appraisal of the trainer's device
// evidence, the agreement hash), then ATTACH. Nothing is loaded yet.
GT_MUST_USE gt_err gt_device_trip_attach(gt_device_trip_carrier **carrier, const char *address,
                                         const gt_device_sim_options *opt,
                                         const uint8_t ticket[GT_SIM_TICKET_BYTES]);
// Holder: the trainer's device measurement, as gt_device_sim_measurement (GT_E_NOTFOUND when a
// custom appraise hook judged it).
GT_MUST_USE gt_err gt_device_trip_measurement(gt_device_trip_carrier *carrier,
                                              uint8_t out[GT_MEASUREMENT_BYTES]);
// Holder: opens its sealed chunk (ct_and_tag: its body as stored, len bytes; seg_bytes: 0 for
// GTCHUNK1, else the manifest's GTCHUNK2 segment size) in its
// own process (cuda trainer: on this holder's GPU, which needs a build with CUDA, else
// GT_E_UNSUPPORTED with the reason; cpu trainer: OpenSSL into a sealed memfd) and hands it over.
// On failure the trip connection is closed at once (the trainer's wait ends) and the buffer is
// wiped and freed; the carrier still has to be closed.
GT_MUST_USE gt_err gt_device_trip_hand_over(gt_device_trip_carrier *carrier,
                                            const uint8_t *ct_and_tag, uint64_t len,
                                            const uint8_t iv[12],
                                            const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                            const uint8_t key[32], uint32_t seg_bytes);
// Holder, after a hand-over: waits (timeout_ms; 0: 1 hour) for RELEASED, then wipes and frees
// its buffer, says BYE and frees the carrier. GT_E_PEER: the trainer went away; GT_E_TIMEOUT:
// it kept the buffer too long. The buffer is freed whatever the result.
GT_MUST_USE gt_err gt_device_trip_carrier_finish(gt_device_trip_carrier *carrier,
                                                 int timeout_ms);
// Holder: ends the trip without (or without waiting after) a hand-over: BYE, buffer wiped and
// freed, carrier freed. NULL is fine.
void gt_device_trip_carrier_close(gt_device_trip_carrier *carrier);

// ---- the trip state machine (src/travel/trip_fsm.c; docs/trip.md) ------------------------------
// One trip of the device: lent by the trainer to one holder and back. devd (the emulated device)
// and the trainer serving a trip itself (trip_ipc.c) make every state change through
// gt_trip_step and carry out the effects it names; the table is data, read by the tests and by
// tools/trip_promela.c, which model-checks it with spin. No I/O, no clock, no allocation here.
// The states are the wire numbers of REP_TRIP (GT_SIM_TRIP_*; _Static_asserts in trip_fsm.c).
typedef enum {
    GT_TRIP_AT_TRAINER = 0,  // never lent, or the last trip's result is gone (released, relent)
    GT_TRIP_LENT = 1,        // ticket issued, lease running, no holder attached yet
    GT_TRIP_ATTACHED = 2,    // the holder with the ticket passed admission and has the device
    GT_TRIP_LOADED = 3,      // and at least one sealed chunk authenticated into a trip buffer
    GT_TRIP_RETURNED = 4,    // the holder returned it: loaded buffers are the trainer's, NO_READBACK
    GT_TRIP_FAILED = 5,      // lease, holder, trainer or device failure: every trip buffer wiped
    GT_TRIP_STATE_COUNT
} gt_trip_state;

typedef enum { GT_TRIP_ACTOR_TRAINER = 0, GT_TRIP_ACTOR_HOLDER, GT_TRIP_ACTOR_DEVICE } gt_trip_actor;

// Each event names its actor and the states it requires (the table is the authority).
typedef enum {
    GT_TRIP_EV_LEND = 0,       // trainer: LEND (AT_TRAINER, RETURNED, FAILED)
    GT_TRIP_EV_TRAINER_USE,    // trainer: any other device request: alloc, copy_in/out, launch,
                               // free (AT_TRAINER, RETURNED, FAILED: never while the device is away)
    GT_TRIP_EV_RECALL,         // trainer: takes the device back before a holder attached (LENT)
    GT_TRIP_EV_RELEASE,        // trainer: done with a handed-over import (RETURNED)
    GT_TRIP_EV_TRAINER_GONE,   // trainer: its session ended or failed (LENT .. RETURNED)
    GT_TRIP_EV_ATTACH,         // holder: ATTACH with the live ticket, admitted, same agreement (LENT)
    GT_TRIP_EV_ATTACH_REFUSED, // holder: wrong ticket, other agreement, failed handshake (LENT)
    GT_TRIP_EV_LOAD,           // holder: a sealed chunk authenticated into a trip buffer
                               // (ATTACHED, LOADED)
    GT_TRIP_EV_RETURN,         // holder: RETURN (ATTACHED, LOADED)
    GT_TRIP_EV_RETURN_STAY,    // holder: RETURN_STAY, its session kept (ATTACHED, LOADED)
    GT_TRIP_EV_HAND_OVER,      // holder: RETURN_IPC accepted and imported (ATTACHED)
    GT_TRIP_EV_HOLDER_LOST,    // holder: left, died or failed its session before returning
                               // (ATTACHED, LOADED)
    GT_TRIP_EV_HANDOFF_LOST,   // holder: went away while the trainer held its import (RETURNED)
    GT_TRIP_EV_EXPIRE,         // device (timer): the lease ended (LENT, ATTACHED, LOADED)
    GT_TRIP_EV_DEVICE_FAULT,   // device: stopping, or a device step failed (LENT .. RETURNED)
    GT_TRIP_EVENT_COUNT
} gt_trip_event;

// Effects: what the caller must carry out when a step is taken (several may be set).
enum {
    GT_TRIP_FX_NEW_TICKET = 1u << 0,     // a fresh random ticket; the previous result is forgotten
    GT_TRIP_FX_ARM_LEASE = 1u << 1,      // the lease's end bounds every wait from now on
    GT_TRIP_FX_BIND_HOLDER = 1u << 2,    // the session is the trip's holder: it sees only trip
                                         // buffers (trainer-owned, NO_READBACK); others: "busy"
    GT_TRIP_FX_DROP_CONN = 1u << 3,      // close the refused connection; the lend stands
    GT_TRIP_FX_MARK_LOADED = 1u << 4,    // record the authenticated extent of the buffer
    GT_TRIP_FX_HAND_LOADED = 1u << 5,    // loaded trip buffers (or the import) become the
                                         // trainer's, still NO_READBACK
    GT_TRIP_FX_WIPE_UNLOADED = 1u << 6,  // trip buffers with nothing loaded are wiped
    GT_TRIP_FX_WIPE_TRIP = 1u << 7,      // every trip buffer and any import is wiped
    GT_TRIP_FX_KILL_TICKET = 1u << 8,    // the ticket is wiped: it never attaches again
    GT_TRIP_FX_END_HOLDER = 1u << 9,     // end the holder's session
    GT_TRIP_FX_PARK_HOLDER = 1u << 10,   // keep the holder's session for its next trip
    GT_TRIP_FX_RELEASE_IMPORT = 1u << 11, // wipe and unmap the import, then tell the holder
                                          // RELEASED
};
#define GT_TRIP_FX_COUNT 12

typedef struct {
    gt_trip_state from;
    gt_trip_event event;
    gt_trip_state to;
    unsigned effects;
} gt_trip_transition;

// The transition table (read-only, static storage): every allowed (state, event) pair once.
const gt_trip_transition *gt_trip_table(size_t *n);
// Where ev takes a trip in state from, and the effects to carry out. A pair the table does not
// allow is GT_E_STATE, with a message naming the event, its actor, the state and the states the
// event requires; *to = from and *effects = 0 then. Out-of-range values are GT_E_ARG.
GT_MUST_USE gt_err gt_trip_step(gt_trip_state from, gt_trip_event ev, gt_trip_state *to,
                                unsigned *effects);
// "lent", "recall", "trainer", "wipe_trip" (one effect bit); "unknown" out of range.
const char *gt_trip_state_name(gt_trip_state s);
const char *gt_trip_event_name(gt_trip_event ev);
gt_trip_actor gt_trip_event_actor(gt_trip_event ev);
const char *gt_trip_actor_name(gt_trip_actor a);
const char *gt_trip_effect_name(unsigned bit);

// ---- device-sealed exports (travel/export.c; docs/device.md "Exports") -----------------------
// One function per export, whatever the device: on sim it is devd's request (devd seals with its
// own keys, device.h); on cpu and cuda the trainer's process is the device and its code the
// trusted base (docs/security.md), so the weights are read in-process (gt_device_inproc_read)
// and sealed here with the same seal core.

// The agreement's output recipients, each with its recipient_key (GT_E_FORMAT naming one that
// has none). r has room for GT_SCKPT_MAX_RECIPIENTS.
GT_MUST_USE gt_err gt_agreement_recipients(const gt_agreement *a, gt_sckpt_recipient *r,
                                           uint32_t *n);

// cpu and cuda's resume secret: DIR/resume.key (magic "GTRSKEY1" || secret 32), mode 0600,
// created on first use. The cpu has no protected memory: this key protects the state against
// another machine and a tampered file, not against whoever can read DIR (docs/security.md).
#define GT_RESUME_KEY_FILE "resume.key"
#define GT_RESUME_KEY_MAGIC "GTRSKEY1"
typedef struct {
    uint8_t secret[GT_RESUME_SECRET_BYTES];
    uint8_t id[GT_RESUME_DEVICE_ID_BYTES];  // HKDF of the secret: the device id in the header
} gt_resume_device;
GT_MUST_USE gt_err gt_resume_device_load(const char *dir, gt_resume_device *rd);

// What the in-process backends seal with (ignored on sim, where devd uses its own keys and the
// agreement the session declared).
typedef struct {
    const gt_agreement *agreement;        // recipients and hash
    const uint8_t *signing_secret;        // the checkpoint's signer (the trainer's per-run key)
    const gt_resume_device *resume;       // the resume secret (NULL: no resume export)
} gt_export_local;

// The model in device memory: params (and the AdamW moments m, v; 0 = none) of params_bytes each.
typedef struct {
    gt_dbuf params, m, v;
    uint64_t params_bytes;
    uint64_t step;
    gt_sckpt_model model;
    gt_resume_loader loader;  // resume only
} gt_export_model;

// The sealed checkpoint of x's weights at x->step (sealed replaced; ciphertext).
GT_MUST_USE gt_err gt_travel_export_checkpoint(gt_device *dev, const gt_export_model *x,
                                               const gt_export_local *local, gt_buf *sealed);
// The key that signs what export_checkpoint seals: devd's export key, or local's signer.
GT_MUST_USE gt_err gt_travel_export_signer(gt_device *dev, const gt_export_local *local,
                                           uint8_t pub[GT_ED25519_PUBLIC_BYTES]);
// The resume state of x (state replaced; ciphertext): labels from the device's own table.
GT_MUST_USE gt_err gt_travel_export_resume(gt_device *dev, const gt_export_model *x,
                                           const gt_export_local *local, gt_buf *state);
// Opens a resume state into x's buffers (params, and m, v when the state has moments: x->m, x->v
// must then be allocated; when it has none, m and v are zeroed), labels them as the state says,
// and fills x->step and x->loader. A foreign or tampered state is refused before anything is
// written (GT_E_AUTH / GT_E_FORMAT / GT_E_TRUNCATED, naming why).
GT_MUST_USE gt_err gt_travel_import_resume(gt_device *dev, gt_span state, gt_export_model *x,
                                           const gt_export_local *local);

// ---- chunk keys released by a holder's enclave (src/travel/release_wrap.c) -----------------
// A holder in enclave mode (holder.h) releases K_i only wrapped (gt_x25519_wrap) to the
// device's X25519 key, under this AAD: "GTRW" | agreement hash 32 | dataset id 16 | u32 chunk |
// trip id 32 | device id 32. The trip id is gt_release_trip_id of the trip's ticket.
#define GT_RELEASE_AAD_BYTES (4 + 32 + GT_DATASET_ID_BYTES + 4 + 32 + 32)
void gt_release_aad_build(uint8_t aad[GT_RELEASE_AAD_BYTES],
                          const uint8_t agreement_hash[GT_SHA256_BYTES],
                          const uint8_t dataset_id[GT_DATASET_ID_BYTES], uint32_t chunk,
                          const uint8_t trip_id[GT_SHA256_BYTES],
                          const uint8_t device_id[GT_SHA256_BYTES]);
GT_MUST_USE gt_err gt_release_trip_id(uint8_t id[GT_SHA256_BYTES], const uint8_t ticket[32]);
// GT_E_AUTH for any other device key, binding or changed byte (key zeroed).
GT_MUST_USE gt_err gt_release_unwrap(uint8_t key[GT_AEAD_KEY_BYTES], const uint8_t *wrapped,
                                     size_t len, const uint8_t device_sec[GT_X25519_BYTES],
                                     const uint8_t aad[GT_RELEASE_AAD_BYTES]);
// The holder enclave's wrap appraiser (the enclave process installs it as the wrap leaf's,
// enclave.h gt_enclave_wrap_appraiser): before a key is wrapped to `recipient` it must hold that
// agreement_doc parses (strict parser) and its SHA-256 is the AAD's agreement hash; the client
// hello names that agreement; the server hello's X25519 key is `recipient` and its SHA-256 the
// AAD's device id; the server hello's device evidence verifies (vendor root: the sim root of
// this process), binds that hello to the client hello, says devd holds the memory, and its
// measurement is one the agreement accepts (any, when it lists none). GT_E_POLICY / GT_E_AUTH /
// GT_E_FORMAT naming what failed.
GT_MUST_USE gt_err gt_release_wrap_appraise(gt_span agreement_doc, gt_span client_hello,
                                            gt_span server_hello,
                                            const uint8_t recipient[GT_X25519_BYTES],
                                            const uint8_t *aad, size_t aad_len);

#endif
