// gputravel/orchestr.h: the trainer's side of a collaboration. Which holder's chunk the device
// fetches next, how many tokens each holder has contributed, and a journal that makes the plan
// survive a crash.
//
// Semantics: a chunk *use* is one pass of training over a chunk's tokens. A use counts only once
// the training it did is committed in a checkpoint: the trainer checkpoints, then journals the
// use (step, holder, chunk, tokens). After a crash the trainer restores the last checkpoint and
// replays the journal up to it, so a use in flight at the crash is neither lost (the chunk is
// offered again) nor counted twice (its partial training is not in the restored model).
#ifndef GPUTRAVEL_ORCHESTR_H
#define GPUTRAVEL_ORCHESTR_H

#include <gputravel/data.h>
#include <gputravel/seal.h>
#include <gputravel/device.h>
#include <gputravel/net.h>
#include <gputravel/train.h>
#include <gputravel/travel.h>
#include <gputravel/util.h>

#include <stdint.h>

typedef struct gt_schedule gt_schedule;  // opaque

// chunk_counts[h] chunks for holder h (agreement order), chunk_tokens[h][c] tokens in each.
GT_MUST_USE gt_err gt_schedule_create(gt_schedule **s, const gt_agreement *a,
                                      const uint32_t *chunk_counts,
                                      const uint64_t *const *chunk_tokens);
void gt_schedule_free(gt_schedule *s);

// The next chunk to fetch: holders take turns (round robin from the last holder served); within
// a holder, the least-used chunk first, lowest index among equals. A chunk is offered while its
// uses < max_uses_per_chunk and its holder's budget has tokens left; *tokens_allowed is what may
// be trained on from it (min of its tokens and the budget left). GT_E_NOTFOUND when nothing is
// left anywhere.
GT_MUST_USE gt_err gt_schedule_next(gt_schedule *s, uint32_t *holder, uint32_t *chunk,
                                    uint64_t *tokens_allowed);
// Records one committed use of (holder, chunk) that trained on `tokens` tokens, and passes the
// turn to the holder after it (so replaying a journal restores the round-robin cursor: a resumed
// run is offered chunks in the order an uninterrupted one would be). Refused (GT_E_POLICY) if it
// would exceed the chunk's max uses or the holder's budget.
GT_MUST_USE gt_err gt_schedule_record(gt_schedule *s, uint32_t holder, uint32_t chunk,
                                      uint64_t tokens);

typedef struct {
    uint64_t tokens_used;
    uint64_t token_budget;
    uint32_t chunks;
    uint32_t uses;  // committed chunk uses
} gt_holder_account;
void gt_schedule_account(const gt_schedule *s, uint32_t holder, gt_holder_account *out);
uint32_t gt_schedule_uses(const gt_schedule *s, uint32_t holder, uint32_t chunk);
// A chunk whose transfer failed in this run: not offered again by this schedule (a new run's
// schedule offers it again). gt_schedule_exclude does the same for every chunk of a holder that
// went away. Neither is journaled: they say nothing about uses.
void gt_schedule_skip(gt_schedule *s, uint32_t holder, uint32_t chunk);
void gt_schedule_exclude(gt_schedule *s, uint32_t holder);
// Training across ranks: the chunks of one round, each held (not offered again, its tokens
// counted against its holder's budget) until gt_schedule_unhold, so that gt_schedule_next hands
// every rank a different one and no round's picks together cross a holder's budget (which the
// holder would refuse).
void gt_schedule_hold(gt_schedule *s, uint32_t holder, uint32_t chunk);
void gt_schedule_unhold(gt_schedule *s);
// Why a holder has no chunk to offer (or that it has: OPEN), the first limit that holds back
// its unused chunks: USES every chunk used max_uses_per_chunk times (or it has none), FAILED
// the rest failed in this run (skipped or the holder excluded), BUDGET none of the rest fits in
// what is left of its token_budget.
typedef enum {
    GT_SCHEDULE_LEFT_OPEN,
    GT_SCHEDULE_LEFT_USES,
    GT_SCHEDULE_LEFT_FAILED,
    GT_SCHEDULE_LEFT_BUDGET,
} gt_schedule_left;
gt_schedule_left gt_schedule_why_none(const gt_schedule *s, uint32_t holder);

// ---- journal --------------------------------------------------------------------------------
// Append-only text file, one fsynced line per committed use:
//     "use STEP HOLDER CHUNK TOKENS\n"     (decimal; HOLDER is the agreement index)
// Replay ignores a torn last line (no '\n'): that use was never committed.

typedef struct gt_journal gt_journal;  // opaque
GT_MUST_USE gt_err gt_journal_open(gt_journal **j, const char *path);
// Appends and fsyncs one use record.
GT_MUST_USE gt_err gt_journal_append_use(gt_journal *j, uint64_t step, uint32_t holder,
                                         uint32_t chunk, uint64_t tokens);
void gt_journal_close(gt_journal *j);
// Replays the records with step <= max_step into s (the checkpoint's step) and returns how many;
// records beyond max_step are reported in *dropped and cut from the file, since the model that
// trained them was not committed.
GT_MUST_USE gt_err gt_journal_replay(const char *path, uint64_t max_step, gt_schedule *s,
                                     uint64_t *replayed, uint64_t *dropped);

// ---- fetching chunks from holders (conventional transmission) ------------------------------
// A connection to one holder's agent: attested channel, HELLO with the agreement hash, the
// trainer's checkpoint signing key (Ed25519 public; the holder records it in its ledger as the
// key of the trainer it appraised) and name, and the holder's signed manifest, checked against
// the agreement (holder key and dataset id).
typedef struct gt_holder_conn gt_holder_conn;  // opaque
GT_MUST_USE gt_err gt_holder_connect(gt_holder_conn **c, const gt_agreement *a,
                                     uint32_t holder_index, const gt_net_attestor *att,
                                     const char *trainer_name,
                                     const uint8_t signing_key[GT_ED25519_PUBLIC_BYTES]);
const gt_manifest *gt_holder_conn_manifest(const gt_holder_conn *c);
// The holder's signed ledger head for this session (checked at connect: its agreement key).
const gt_hp_head *gt_holder_conn_head(const gt_holder_conn *c);
// A holder the agreement names by enclave (holders[i].enclave) announced and sent its enclave
// quote at connect (else connect refused it); this appraises it (travel.h
// gt_holder_quote_appraise: roots, the agreement's fields, this channel's binding). Until it
// passes, fetch, travel and trip refuse that holder (GT_E_STATE). Holders not named by enclave:
// GT_OK, nothing checked.
GT_MUST_USE gt_err gt_holder_conn_enclave_verify(gt_holder_conn *c, const gt_attest_file *roots,
                                                 size_t root_count);
// The verified enclave identity, or NULL (not named by enclave, or not verified).
const gt_holder_enclave_seen *gt_holder_conn_enclave(const gt_holder_conn *c);
// The co-holder witness round (travel.h), once every holder is connected: when any HEAD asks for
// witnesses (and there are two or more holders), each holder witnesses every other's head and
// each gets its co-holders' witnesses. A holder's refusal is the error, with its reason.
GT_MUST_USE gt_err gt_holders_witness(gt_holder_conn *const *conns, uint32_t n);
// Fetches chunk `chunk` and leaves its tokens (u16) in a fresh device buffer with `flags`
// (GT_DBUF_NO_READBACK for holder data). plain: the holder decrypts, TLS carries plaintext, this
// TEE copies it in; key-release: the sealed chunk and its key arrive, this TEE decrypts once
// (tag checked before any byte reaches the device) and copies it in. Staging memory is wiped.
// A refusal is GT_E_POLICY with the holder's reason. *tokens = tokens in the buffer.
GT_MUST_USE gt_err gt_holder_fetch(gt_holder_conn *c, uint32_t chunk, gt_fetch_mode mode,
                                   gt_device *dev, uint32_t flags, gt_dbuf *out,
                                   uint64_t *tokens);
// GPU travelling (sim device): lends dev for one trip (lease_ms), sends the ticket and the
// device's address over the attested channel, lets the holder attach, load `chunk` sealed and
// return the device; then *out is the loaded NO_READBACK buffer (the trainer's, never readable)
// and *tokens its tokens. A refusal is GT_E_POLICY with the holder's reason; a failed trip
// leaves the device back with nothing loaded (a holder that refused or went away before
// attaching cannot return it: the device is recalled, not left lent until the lease ends); a
// holder lost mid-trip is named as such ("went away during the trip").
GT_MUST_USE gt_err gt_holder_travel(gt_holder_conn *c, uint32_t chunk, gt_device *dev,
                                    const char *device_address, uint32_t lease_ms,
                                    gt_dbuf *out, uint64_t *tokens);
// The trip served by the trainer itself (cpu or cuda device; docs/cuda.md): lends a trip on
// socket_path for lease_ms (device.h gt_device_trip_lend), sends TRAVEL with its address
// ("ipc-cpu:" / "ipc-cuda:" + path), waits for the holder's handoff of `chunk` (the import must
// carry the chunk's AAD and plaintext length), then reads TRAVELLED. OK: *out is the NO_READBACK
// import, *tokens its tokens, *trip the trip: keep it while *out is in use, then
// gt_holder_trip_end (never gt_device_free *out yourself). A refusal is GT_E_POLICY with the
// holder's reason (its trip failure included); nothing is imported then and *trip is NULL.
GT_MUST_USE gt_err gt_holder_trip(gt_holder_conn *c, uint32_t chunk, gt_device *dev,
                                  const char *socket_path,
                                  const uint8_t agreement_hash[GT_SHA256_BYTES],
                                  uint32_t lease_ms, gt_device_trip **trip, gt_dbuf *out,
                                  uint64_t *tokens);
// Ends a trip of gt_holder_trip: the holder still there (else GT_E_PEER: it went away while its
// chunk was in use; the import is released and what was computed from it must be discarded,
// no use counted), release (wipe), RELEASED. Closes the trip in every case. NULL: GT_OK.
GT_MUST_USE gt_err gt_holder_trip_end(gt_device_trip *trip);
// Confirms to the holder that one use of `chunk` is committed (checkpointed and journaled).
GT_MUST_USE gt_err gt_holder_confirm_use(gt_holder_conn *c, uint32_t chunk, uint64_t tokens);
void gt_holder_disconnect(gt_holder_conn *c);  // says BYE, closes

// ---- collaborative training -----------------------------------------------------------------
// Budgets count released tokens, the only thing a holder can enforce: each fetched chunk counts
// whole, except the last one a budget allows, which counts (and is trained on) only up to the
// budget. A use is one pass of training over the chunk, cut short only by the step count.
// Optimiser: AdamW (0.9, 0.95, eps 1e-8, no weight decay), gradients clipped to norm 1, the
// agreement's learning rate with a linear warmup over steps/20 and cosine decay to a tenth.
// Trains the agreement's model on every holder's data: plans chunk fetches with gt_schedule,
// brings each chunk into device memory (NO_READBACK) by the chosen transfer, trains on it,
// erases it, has the device seal the resume state (state_dir/resume.sealed: the weights carry
// holder labels and never leave in plaintext; docs/collaboration.md), and journals the use. When
// training ends, the agreement's output rule applies: sealed_checkpoint has the device seal the
// final weights for its recipients (their recipient_key); loss_only lets nothing out.
// Resumable: with `resume`, the device opens the sealed state (refusing another device's,
// another agreement's or a tampered one) and the journal is replayed up to it.
// Provenance: the sealed checkpoint's signer is presented in the HELLO to every holder (each
// records it in its ledger, bound to the trainer it appraised): on sim devd's export-signing
// key; on cpu and cuda one fresh Ed25519 key pair per call, whose secret is wiped on return.

// The transfer modes (gt_transfer_mode) are the agreement's: travel.h.

typedef struct {
    uint32_t step, steps;
    float loss;
    double ms;
    uint32_t holder, chunk;
} gt_collab_step;

typedef struct {
    uint64_t tokens_used, token_budget;
    uint32_t uses;
    uint64_t bytes_moved;      // chunk bytes brought to the device
    double transfer_seconds;   // wall time of those transfers
    // Chunks whose transfer failed in this run (the holder refused it, went away, the trip
    // failed) and were skipped; the first failure's text. Nothing of them was used or counted.
    uint32_t skipped;
    bool gone;  // the holder's connection failed: none of its chunks was offered after that
    char failure[192];
    gt_schedule_left left;  // at the end: why it had no chunk left to offer (OPEN: it had)
    // A holder the agreement names by enclave: the enclave identity its quote proved at connect.
    bool enclave_verified;
    gt_holder_enclave_seen enclave;
} gt_collab_holder_report;

// Which limit ended a run (gt_collab_report.stop; its text in stop_message).
typedef enum {
    GT_COLLAB_STOP_STEPS,        // the agreement's training.steps were trained
    GT_COLLAB_STOP_NO_CHUNKS,    // no holder had a chunk left: uses or budgets ran out
    GT_COLLAB_STOP_FAILURES,     // the chunks left failed in this run (holders gone, refusals)
    GT_COLLAB_STOP_INTERRUPTED,  // *stop was set (interrupted holds the value)
} gt_collab_stop;
const char *gt_collab_stop_name(gt_collab_stop stop);  // "steps", "no-chunks", ...

typedef struct {
    uint32_t steps_done;
    float final_loss;
    int interrupted;  // the stop value that ended the run early (0: it ran its course)
    gt_collab_stop stop;
    // One sentence: the limit that ended the run and, per holder, what held its chunks back
    // ("holder h0: every chunk used 1 time(s); holder h1: skipped after a failure: ...").
    char stop_message[1024];
    gt_collab_holder_report holders[GT_AGREEMENT_MAX_HOLDERS];
    // What left the TEE at the end: with output sealed_checkpoint, the sealed file's path and
    // size and how many recipients can open it; with loss_only, sealed is false.
    bool sealed;
    char sealed_path[4200];
    uint64_t sealed_bytes;
    uint32_t sealed_recipients;
    // The sealed checkpoint's signer (devd's export key on sim, this run's key on cpu / cuda):
    // in every holder's "session" ledger entry.
    uint8_t signing_key[GT_ED25519_PUBLIC_BYTES];
} gt_collab_report;

typedef struct {
    const gt_agreement *agreement;  // its outputs are declared to dev (agreement->doc for sim)
    gt_device *dev;
    gt_transfer_mode transfer;  // one the agreement lists (gt_collab_transfer_check)
    gt_net_attestor attestor;  // the trainer's attestor for holder channels (borrowed)
    // Trust roots for the enclave quotes of holders named by enclave (the sim root, or the host
    // TEE's CAs; usually the attestor's): gt_holder_conn_enclave_verify.
    const gt_attest_file *holder_roots;
    size_t holder_root_count;
    const char *trainer_name;
    const char *state_dir;     // resume.sealed (resume.key on cpu / cuda) and journal live here
    // travel: where holders reach the device: devd's socket (sim device), or the socket the
    // trainer serves its trips on (cpu or cuda device; gt_holder_trip).
    const char *device_address;
    // Output sealed_checkpoint: where the checkpoint sealed for the agreement's recipients is
    // written when training ends (data.h "sealed checkpoints"); NULL: state_dir/model.sealed.
    // Output loss_only: nothing is written outside state_dir.
    const char *sealed_path;
    bool resume;
    // Progress for the caller to print (library code never prints); either may be NULL.
    void (*on_step)(void *ctx, const gt_collab_step *s);
    void (*on_event)(void *ctx, const char *line);
    // Called with each chunk as soon as it is in device memory, before it is trained on (may be
    // NULL). The demo plays an adversarial trainer here: whatever it tries, the device's labels
    // decide what leaves (device.h).
    void (*on_chunk)(void *ctx, gt_device *dev, gt_dbuf chunk, uint64_t tokens, gt_gpt2 *model);
    void *ctx;
    // A chunk whose transfer fails (the holder refuses it, goes away, the trip fails) is skipped
    // and the run goes on with the other chunks, after a check that the device still answers (a
    // dead device ends the run with the transfer's error). A holder whose connection failed is
    // skipped for the rest of the run. When the chunks left are only failed ones, training stops
    // (GT_COLLAB_STOP_FAILURES) without sealing the final output, like an interruption: resume
    // once the holders are back. Each failure is counted in the report (skipped, failure).
    // May be NULL. Non-zero (e.g. gt_interrupt_flag(): the signal) stops training at the next
    // step: the use in progress is committed as usual (the device-sealed resume state, the
    // journal, the holder's confirmation) when a step of it ran, the final output is not sealed,
    // and gt_collab_train returns GT_OK with report->interrupted set. Continue with resume.
    const volatile int *stop;
    // Training across ranks (docs/collaboration.md "Across ranks"; NULL: one trainer). Every
    // rank runs gt_collab_train with its own device, state_dir and trainer_name; the ranks take
    // the schedule's chunks in rounds of one chunk each and train in lockstep on them, summing
    // their gradients through `allreduce`.
    const struct gt_collab_ranks *ranks;
} gt_collab_config;

// What a rank needs of the others; MPI carries these (cli/), orchestr/ only calls them.
typedef struct gt_collab_ranks {
    int rank, nranks;
    void *ctx;
    // Once the model exists: admission of every rank's device and the ring over grads.
    gt_err (*start)(void *ctx, gt_device *dev, gt_dbuf grads);
    // Every rank's `len` bytes, in rank order, into all (nranks * len bytes). Released values
    // only: outcomes, steps, losses, run ids.
    gt_err (*allgather)(void *ctx, const void *mine, size_t len, void *all);
    // The gradient buffer's n floats summed over the ranks on the devices, for step.
    gt_err (*allreduce)(void *ctx, uint64_t n, uint64_t step);
} gt_collab_ranks;

// A rank's outcome of one round, as the ranks exchange it (MPI carries it: untrusted bytes).
// Wire form: u8 kind, u8 stop, u64le counted, u8 reason length, the reason (printable ASCII,
// what the failing rank was told: a holder's refusal, a lost connection), zero padding to
// GT_COLLAB_OUTCOME_BYTES.
typedef enum {
    GT_COLLAB_OUT_OK,      // its chunk is on its device
    GT_COLLAB_OUT_CHUNK,   // its chunk failed (skipped on every rank)
    GT_COLLAB_OUT_HOLDER,  // its holder went away (excluded on every rank)
    GT_COLLAB_OUT_FATAL,   // the run ends on every rank
} gt_collab_out_kind;
#define GT_COLLAB_REASON_BYTES 160
#define GT_COLLAB_OUTCOME_BYTES (11 + GT_COLLAB_REASON_BYTES)
typedef struct {
    uint8_t kind;      // gt_collab_out_kind
    uint8_t stop;      // the rank was asked to stop: the signal (0: not)
    uint64_t counted;  // OK: the tokens of its chunk that count
    char reason[GT_COLLAB_REASON_BYTES + 1];  // a failure's text (NUL-terminated; "" when OK)
} gt_collab_outcome;
void gt_collab_outcome_write(const gt_collab_outcome *o, uint8_t out[GT_COLLAB_OUTCOME_BYTES]);
// Writes reason cut to GT_COLLAB_REASON_BYTES, non-printable bytes as '?'.
// GT_E_FORMAT unless data is exactly one outcome: a known kind, counted 0 unless OK, no reason
// when OK, a printable reason, zero padding.
GT_MUST_USE gt_err gt_collab_outcome_parse(gt_collab_outcome *o, const uint8_t *data, size_t len);

// The newest checkpoint step every rank has: steps holds nranks rows of `per` steps each
// (UINT64_MAX: none). GT_E_NOTFOUND when no step is in every row.
GT_MUST_USE gt_err gt_collab_common_step(const uint64_t *steps, int nranks, int per,
                                         uint64_t *common);

// The program of one of gt_collab_train's steps under agreement a (kernels.h "programs"): what
// training.program pins, as SHA-256 of these bytes.
GT_MUST_USE gt_err gt_collab_program(const gt_agreement *a, gt_buf *program);

GT_MUST_USE gt_err gt_collab_train(const gt_collab_config *cfg, gt_collab_report *report);
// What gt_collab_train checks first, before it contacts anyone: the agreement lists mode
// (GT_E_POLICY naming the mode and the list), and the mode is what a device of this kind does:
// travel on a cpu device would be a trip in the trainer's host memory, which is only ever
// insecure-host-trip (GT_E_POLICY); insecure-host-trip on another device is GT_E_ARG.
GT_MUST_USE gt_err gt_collab_transfer_check(const gt_agreement *a, gt_transfer_mode mode,
                                            gt_device_kind kind);

#endif
