// gputravel/device.h: one API over every accelerator. Backends:
//   cpu  - in-process, ordinary memory, no protection (tests, baselines);
//   sim  - the emulated confidential device: a separate process (gputravel devd) reached through
//          an attested, AEAD-protected session and shared-memory bounce buffers;
//   cuda - a real NVIDIA GPU (built with GPUTRAVEL_CUDA).
//
// Buffers are opaque handles (ids, never addresses) with an owner session and flags. copy_in
// moves host bytes into device memory (encrypted on the way for sim/cuda-CC); copy_out is refused
// for GT_DBUF_NO_READBACK buffers. Kernels run on device memory through gt_device_launch with an
// op descriptor: the device checks every buffer range against the op's shapes once, at launch,
// and the kernels then trust their inputs (STYLE.md §6).
//
// Kernels live in the kernels layer below (gputravel/kernels.h: the op table, the cpu kernels,
// src/kernels/cuda/): the device executes them, and devd must run them without knowing about
// training. train/ builds ops and sequences them.
#ifndef GPUTRAVEL_DEVICE_H
#define GPUTRAVEL_DEVICE_H

#include <gputravel/devproto.h>
#include <gputravel/kernels.h>
#include <gputravel/util.h>

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { GT_DEVICE_CPU = 0, GT_DEVICE_SIM, GT_DEVICE_CUDA } gt_device_kind;

const char *gt_device_kind_name(gt_device_kind kind);
GT_MUST_USE gt_err gt_device_kind_parse(const char *name, gt_device_kind *kind);

typedef struct {
    gt_device_kind kind;
    int threads;              // OpenMP threads for cpu kernels (0: OpenMP's default)
    uint64_t mem_limit;       // bytes of device memory (0: backend default)
    const char *socket_path;  // sim: devd's Unix socket
    // cpu: the trainer's evidence in its peer hellos (gt_device_peer_hello; only `produce` is
    // used). NULL: sim evidence signed by the sim root (attest.h; insecure-simulation).
    const gt_device_attester *attester;
    // cpu: page buffers beyond mem_limit to an untrusted store in this directory (NULL: refuse
    // past the limit); docs/paging.md. page_bytes 0: GT_PAGER_PAGE_BYTES.
    const char *paging_store;
    uint32_t page_bytes;
    bool paging_prefetch;  // paged: a second thread prefetches from the op stream (gt_pager_config)
} gt_device_config;

typedef struct gt_device gt_device;  // opaque
// gt_dbuf (kernels.h): an opaque buffer handle; 0 is never a valid buffer

enum {
    GT_DBUF_NO_READBACK = 1u << 0,  // holder data: copy_out refused, wiped on free
};

GT_MUST_USE gt_err gt_device_open(gt_device **dev, const gt_device_config *cfg);
void gt_device_close(gt_device *dev);  // frees (and wipes) every buffer
gt_device_kind gt_device_get_kind(const gt_device *dev);

GT_MUST_USE gt_err gt_device_alloc(gt_device *dev, uint64_t bytes, uint32_t flags, gt_dbuf *out);
GT_MUST_USE gt_err gt_device_free(gt_device *dev, gt_dbuf buf);  // wipes
GT_MUST_USE gt_err gt_device_buf_size(gt_device *dev, gt_dbuf buf, uint64_t *bytes);
GT_MUST_USE gt_err gt_device_copy_in(gt_device *dev, gt_dbuf dst, uint64_t dst_offset,
                                     const void *src, uint64_t len);
GT_MUST_USE gt_err gt_device_copy_out(gt_device *dev, void *dst, gt_dbuf src,
                                      uint64_t src_offset, uint64_t len);
GT_MUST_USE gt_err gt_device_memset(gt_device *dev, gt_dbuf buf, uint64_t offset, int value,
                                    uint64_t len);

// ---- kernel launch --------------------------------------------------------------------------
// An op (gt_op, gputravel/kernels.h) names the kernel, its buffer refs and its shapes; the op
// table there says what every position means and how many bytes each ref must provide.
GT_MUST_USE gt_err gt_device_launch(gt_device *dev, const gt_op *op);
// Calls fn(ctx, op) for every op launched on dev from now on, before it runs (NULL fn: stop).
// For recording the ops of a step (gt_gpt2_program); it sees descriptors, never data.
void gt_device_observe(gt_device *dev, void (*fn)(void *ctx, const gt_op *op), void *ctx);
// Waits for launched work to finish (a no-op for synchronous backends).
GT_MUST_USE gt_err gt_device_sync(gt_device *dev);

// ---- error codes: the same on every backend ---------------------------------------------------
// alloc, free, buf_size, copy_in, copy_out, memset and launch fail with exactly these codes on
// cpu, sim (devd's reply code travels unchanged to the client) and cuda; the buffer table below
// produces the first four, and tests/device/test_device_conformance.c holds every backend to
// them (docs/device.md has the table with examples).
//   GT_E_NOTFOUND  the handle is 0, was never issued, was freed (a freed handle never resolves
//                  again, even once its slot is reused) or is another session's; an op ref that
//                  names such a handle
//   GT_E_ARG       a range that leaves the buffer (offset > size or len > size - offset, so an
//                  offset + len that wraps is refused too); an op ref too short for the op's
//                  shapes; alloc of 0 bytes or with unknown flags; a malformed op (kind, shape,
//                  an empty required ref; cuda also refuses a ref misaligned for its element)
//   GT_E_LIMIT     device memory exhausted: alloc of more than the memory limit, or of more than
//                  is left under it (sim: or than fits in one hole of devd's arena), or past the
//                  buffer count limit
//   GT_E_POLICY    copy_out of a GT_DBUF_NO_READBACK buffer, whatever the range (checked before
//                  it); on a lent sim device, a holder's call that holders may not make
//   GT_E_STATE     the sim device is lent (every call but the trip's own), or its session ended
//   GT_E_FORMAT    a launch whose token data is out of range (the data, not the descriptor)
//   GT_E_IO        the backend itself failed (a CUDA runtime error; sim: the channel)
//   GT_E_NOMEM     host memory (the table's own bookkeeping), never device memory
// A failed call changes nothing: no buffer is allocated, freed or written, and copy_out leaves
// dst as it was.

// ---- device-sealed exports (docs/device.md "Exports"; issue 13) ------------------------------
// Weights and optimizer state computed from holder data carry labels and never leave by
// copy_out. They leave sealed by the device: on sim devd builds and seals them itself (the
// checkpoint to the declared agreement's recipients, signed with its export-signing key; the
// resume state to itself, bound to its identity and the agreement), writes the sealed bytes into
// a new unlabelled buffer, and these calls copy that out and free it. Refused (GT_E_POLICY)
// unless the session declared outputs allowing it (gt_device_declare_outputs).
//
// On cpu and cuda the trainer's process is the device and its code the trusted base
// (docs/security.md): these four return GT_E_UNSUPPORTED there, and travel seals in-process
// (gt_travel_export_*, travel/export.c) through gt_device_inproc_read.

// The sealed checkpoint (docs/formats.md "Sealed checkpoint") of params[0, len) at `step`, the
// llm.c header built from config (maxT, V, L, NH, C, Vp) by the device. sealed is replaced.
GT_MUST_USE gt_err gt_device_export_checkpoint(gt_device *dev, gt_dbuf params, uint64_t len,
                                               uint64_t step, const uint32_t config[6],
                                               gt_buf *sealed);
// The device's export-signing Ed25519 public key (the signer of what it seals).
GT_MUST_USE gt_err gt_device_export_signer(gt_device *dev, uint8_t pub[GT_SIM_EXPORT_KEY_BYTES]);
// The resume state (docs/formats.md "Resume state") of bufs = {params, m, v} (len bytes each;
// m = v = 0: none yet), step and loader position; state is replaced.
GT_MUST_USE gt_err gt_device_export_resume(gt_device *dev, const gt_dbuf bufs[3], uint64_t len,
                                           uint64_t step, const gt_sim_loader *pos,
                                           const uint32_t config[6], gt_buf *state);
// Hands a resume state back: the device opens it (refusing another device's, another
// agreement's, a tampered one), writes params/m/v into bufs (m = v = 0 when the state has no
// moments) and labels them with the state's labels; *step and *pos receive where it was.
GT_MUST_USE gt_err gt_device_import_resume(gt_device *dev, gt_span state, const gt_dbuf bufs[3],
                                           uint64_t *step, gt_sim_loader *pos);
// cpu and cuda only (GT_E_UNSUPPORTED on sim: devd never hands out labelled bytes): reads a
// buffer whatever its flags and label, for sealing inside the trainer's process. Nothing but
// travel/export.c calls it; on these backends the trainer's code is the trusted base anyway.
GT_MUST_USE gt_err gt_device_inproc_read(gt_device *dev, void *dst, gt_dbuf src, uint64_t offset,
                                         uint64_t len);
// ---- labels: where holder data may flow (docs/device.md "Labels"; issue 13) -------------------
// Every buffer carries a label: the set of sources (a holder's dataset, named by its 16-byte
// dataset id) whose data it holds or was computed from. A loaded chunk is labelled with its
// dataset; every launched op adds the union of the labels of everything it reads (and of every
// output it accumulates into or rewrites in place) to each ref it may write, so gradients,
// optimizer moments and the weights carry every dataset they were trained on. Labels only grow:
// an op never removes one, and no request can. copy_out of a labelled buffer is GT_E_POLICY,
// naming the label. The one way out is a release op (gt_op_desc's `release`), which the device
// runs only as the declared outputs allow (gt_device_declare_outputs below).
//
// Labels are the device's own state: devd labels what LOAD_SEALED authenticated (the dataset id
// in the chunk's AAD) and never reads a label from a request; gt_device_label_add only adds. On
// cpu and cuda the same table applies the same rules in the trainer's own process: there the
// trainer's attested code is in the trusted base for this property (docs/security.md).
typedef uint64_t gt_label;          // one bit per source registered in the buffer table
#define GT_LABEL_MAX_SOURCES 64     // distinct datasets one table can label with
#define GT_LABEL_ID_BYTES 16        // a dataset id (GT_DATASET_ID_BYTES)

// Adds the dataset `id` to buf's label (registering it on first use: GT_E_LIMIT past
// GT_LABEL_MAX_SOURCES). For data the caller put there itself (conventional transfers); sim
// sends it as LABEL_ADD, which devd accepts from the buffer's owner only.
GT_MUST_USE gt_err gt_device_label_add(gt_device *dev, gt_dbuf buf,
                                       const uint8_t id[GT_LABEL_ID_BYTES]);
// buf's label as a count and the first ids (cap of them) in registration order.
GT_MUST_USE gt_err gt_device_label_get(gt_device *dev, gt_dbuf buf, size_t *count,
                                       uint8_t (*ids)[GT_LABEL_ID_BYTES], size_t cap);

// ---- declared outputs: what may leave, computed from labelled data ----------------------------
// The agreement's admission rules for peer devices (data-parallel ranks, issue 16): what a
// peer's hello must prove before this device seals labelled data to it.
#define GT_PEER_MAX_RANKS 256
#define GT_PEER_MAX_MEASUREMENTS 16  // GT_AGREEMENT_MAX_MEASUREMENTS
typedef struct {
    uint32_t ranks;                 // trainer.ranks (0 is taken as 1: no peers)
    bool allow_simulation;          // simulated trainers and devices may be admitted
    uint8_t agreement_hash[32];     // the agreement every hello must name
    uint32_t trainer_count, device_count;  // 0: any measurement (only with allow_simulation)
    uint8_t trainer[GT_PEER_MAX_MEASUREMENTS][GT_MEASUREMENT_BYTES];
    uint8_t device[GT_PEER_MAX_MEASUREMENTS][GT_MEASUREMENT_BYTES];
} gt_device_peer_rules;

// The training agreement's `outputs` (docs/agreement.md). Until declared, nothing labelled
// leaves. Release ops (GT_OP_LOSS_MEAN, GT_OP_NORM_RELEASE) write a whole one-scalar buffer;
// when an input is labelled, the device runs one only if its output is declared and its budget
// not spent, rounds the result as declared, and the output buffer's label is then empty.
typedef struct {
    bool loss;                    // GT_OP_LOSS_MEAN: the mean of the per-position losses
    uint32_t loss_mantissa_bits;  // 1..23: the released loss keeps this many mantissa bits
    uint64_t loss_budget;         // releases allowed in this session (steps / every, rounded up)
    bool grad_norm;               // GT_OP_NORM_RELEASE: the gradient norm
    uint64_t grad_norm_budget;
    bool checkpoint;              // weights, sealed by the device to the agreement's recipients
    bool resume;                  // model and optimizer state, sealed by the device to itself
    // training.program: the agreement pins the op sequence of one step (kernels.h "programs");
    // every op that reads labelled data and writes something must then be the program's next.
    bool program_pinned;
    uint8_t program_hash[32];     // SHA-256 of the program's bytes
    // Peers (issue 16, "peers" below): who this device may send labelled data to, sealed.
    gt_device_peer_rules peers;
} gt_device_outputs;

// Declares the agreement's outputs, once per session (GT_E_STATE after the first). cpu and cuda
// take `outputs` as given (the trainer's own parse: its code is trusted there); sim ignores it
// and sends the agreement bytes: devd checks their SHA-256 is the agreement hash its session was
// attested with, parses them itself and derives the same rules (travel: gt_agreement_outputs).
GT_MUST_USE gt_err gt_device_declare_outputs(gt_device *dev, const gt_device_outputs *outputs,
                                             gt_span agreement);
// With a pinned program: gives the device the program's bytes, once per session, after the
// declaration; GT_E_POLICY unless their SHA-256 is the declared program hash (sim: devd checks
// it against its own reading of the agreement). Until then no op runs on labelled data.
GT_MUST_USE gt_err gt_device_pin_program(gt_device *dev, gt_span program);
// GT_E_ARG unless the rules are well formed (loss bits 1..23 when loss is declared).
GT_MUST_USE gt_err gt_device_outputs_check(const gt_device_outputs *o);
// What is left to release now (tests, and the trainer's own bookkeeping): a copy of the rules
// with the budgets as they stand. GT_E_NOTFOUND before a declaration.
GT_MUST_USE gt_err gt_device_outputs_get(gt_device *dev, gt_device_outputs *now);

// ---- peers: device-to-device encrypted chunks (docs/device.md "Peers"; issue 16) --------------
// Gradients are labelled holder data: they leave a device only sealed BY THE DEVICE to a peer
// device whose attested identity the declared agreement accepts; trainers and MPI relay
// ciphertext. Admission once per run: every rank's device makes a hello (a fresh X25519 key for
// the run, its rank, the agreement hash, bound by its evidence), every device appraises every
// peer's hello itself against the declared rules (gt_device_peer_rules) and derives one key per
// direction. On cpu (and cuda) the trainer's attested process is the device (as for declared
// outputs); on sim devd makes the key, appraises, holds the keys and seals in its arena.
typedef struct {
    uint8_t run[16];    // the run id (gt_device_peer_run_id; all ranks agree on it)
    uint64_t step;      // training step
    uint32_t bucket;    // gradient bucket index within the step
    uint32_t hop;       // hop within the ring pass (reduce-scatter 0..N-2, all-gather N-1..2N-3)
    uint32_t src, dst;  // ranks
    uint64_t elem_off;  // first float of the chunk within the buffer
    uint64_t nelem;     // floats in the chunk
} gt_peer_hdr;

enum { GT_PEER_ADD = 1, GT_PEER_COPY = 2 };  // gt_device_peer_open: dst += chunk, or dst = chunk

// The wire (little endian): header [64] = run[16] | u64 step | u32 bucket | u32 hop | u32 src |
// u32 dst | u64 elem_off | u64 nelem | u64 seq (per direction, from 0); then the label block
// u32 n | n x dataset id[16] (the sender's label set, at most GT_LABEL_MAX_SOURCES); then
// AES-256-GCM(nelem * 4 bytes of floats) || tag[16]. AAD = header || label block. IV = u16be
// src | u16be dst | u64be seq, under the direction's key (per run), so it never repeats.
#define GT_PEER_HDR_BYTES 64
#define GT_PEER_MAX_CHUNK_ELEMS (16u << 20)  // 64 MiB of floats in one chunk
#define GT_PEER_HELLO_MAX (GT_SIM_MAX_EVIDENCE * 2 + 512)

// The hello of this device for the run: rank of nranks (nranks must be the declared ranks;
// outputs must be declared). A new hello replaces the run (fresh key, nothing admitted).
GT_MUST_USE gt_err gt_device_peer_hello(gt_device *dev, uint32_t rank, uint32_t nranks,
                                        uint8_t *hello, size_t cap, size_t *len);
// Appraises peer_rank's hello against the declared rules (evidence authentic and bound to the
// hello, measurements accepted, the same agreement and ranks, a fresh key) and derives the pair's
// keys: HKDF-SHA-256(X25519 shared, salt = agreement hash || both hellos in rank order).
// GT_E_AUTH / GT_E_POLICY / GT_E_FORMAT with the reason; a refused hello changes nothing.
GT_MUST_USE gt_err gt_device_peer_admit(gt_device *dev, uint32_t peer_rank, const uint8_t *hello,
                                        size_t len);
// SHA-256 of every hello in rank order (u32le length || hello each), cut to 16 bytes: the run
// id every header carries. GT_E_STATE until every peer is admitted.
GT_MUST_USE gt_err gt_device_peer_run_id(gt_device *dev, uint8_t run[16]);
// Seals floats [h->elem_off, +h->nelem) of buf for h->dst (h->src must be this rank, h->run the
// run id). To an admitted peer only (GT_E_POLICY otherwise, labelled or not): the one way
// labelled data leaves. outlen: the chunk's bytes (at most gt_peer_chunk_bytes(h->nelem)).
GT_MUST_USE gt_err gt_device_peer_seal(gt_device *dev, const gt_peer_hdr *h, gt_dbuf buf,
                                       uint8_t *out, size_t cap, size_t *outlen);
// Opens a chunk from h->src (h: the header this rank expects; the wire's must be equal and carry
// the direction's next sequence number) and adds it into (GT_PEER_ADD) or copies it over
// (GT_PEER_COPY) floats [h->elem_off, +h->nelem) of buf; the chunk's labels join buf's. Any
// mismatch or a failed tag: GT_E_AUTH, buf and the sequence unchanged.
GT_MUST_USE gt_err gt_device_peer_open(gt_device *dev, const gt_peer_hdr *h, const uint8_t *in,
                                       size_t len, gt_dbuf buf, int mode);
// The most bytes one sealed chunk of nelem floats takes (header, a full label block, ciphertext,
// tag): what to reserve for gt_device_peer_seal. 0 when nelem is over GT_PEER_MAX_CHUNK_ELEMS.
size_t gt_peer_chunk_bytes(uint64_t nelem);

// ---- the buffer table, shared by the backends and devd ----------------------------------------
// One implementation of what every backend's buffers need: opaque handles, sizes, flags,
// owners, the memory limit, and the checks (lookup, range, copy_out policy) that produce the
// codes above. The backend owns the memory: it gets it after gt_buftab_alloc succeeded, records
// where it is in the entry (`at`), and wipes and frees it before gt_buftab_release.
//
// Handles are (generation << 32) | (slot + 1): never 0, never an address, and a freed slot's
// handle never resolves again (a slot whose generation would wrap is retired, never reused).
// Every entry counts `span` bytes (its size rounded up to GT_BUFTAB_ALIGN) against the limit,
// on every backend alike. Not thread-safe: one thread per table (a device is used from one
// thread; devd serves one request at a time). Entry pointers stay valid until the next alloc
// or import on the same table.
#define GT_BUFTAB_ALIGN 64u
#define GT_BUFTAB_MAX_BYTES ((uint64_t)1 << 46)  // the memory limit when none is configured
#define GT_BUFTAB_MAX_BUFFERS 65536u             // live buffers, when no other count is given

typedef struct gt_buftab gt_buftab;  // opaque

typedef struct {
    uint64_t bytes;  // as allocated (>= 1)
    uint64_t span;   // bytes rounded up to GT_BUFTAB_ALIGN
    uint32_t flags;  // GT_DBUF_*
    bool foreign;    // memory another process owns (gt_buftab_import): not counted in the limit
    uint64_t owner;  // who may use it: a devd session id; 0 for the in-process backends
    union {          // where the memory is: the backend's own business
        uint8_t *host;    // cpu: 64-byte aligned host memory of span bytes
        uint8_t *device;  // cuda: cudaMalloc'd, or mapped by CUDA IPC when foreign
        uint64_t offset;  // devd: byte offset of the buffer in the arena
    } at;
    union {  // room for a backend's own fields; zero when the entry is made
        struct {
            uint64_t trip;    // the holder session that allocated it on a trip (0: none)
            uint64_t loaded;  // end of the furthest chunk authenticated into it on that trip
        } devd;
        struct {
            uint64_t ipc_bytes;  // exportable: the 2 MiB multiple cudaMalloc'd (0: not exportable)
        } cuda;
    } ext;
    gt_label label;  // whose data it holds or was computed from ("labels" below)
} gt_buftab_entry;

typedef struct {
    uint64_t mem_limit;      // bytes (0: GT_BUFTAB_MAX_BYTES; larger values are capped to it)
    uint32_t max_buffers;    // live buffers at once (0: GT_BUFTAB_MAX_BUFFERS)
    const char *limit_hint;  // how a user raises the limit, for messages (NULL: "mem_limit")
} gt_buftab_config;

// An empty table (GT_E_NOMEM). cfg is copied; limit_hint must outlive the table.
GT_MUST_USE gt_err gt_buftab_new(gt_buftab **tab, const gt_buftab_config *cfg);
// Frees the table only: release (wipe, free) every entry's memory first. NULL is fine.
void gt_buftab_free(gt_buftab *tab);

// A new entry of `bytes` for owner: GT_E_ARG (0 bytes, unknown flags), GT_E_LIMIT (over the
// limit, nothing left under it, too many buffers), GT_E_NOMEM (the table cannot grow). On
// success *h and *e are set, `at` and `ext` are zero and the span counts; a backend that then
// cannot get the memory calls gt_buftab_release(h). On failure *h = 0, *e = NULL.
GT_MUST_USE gt_err gt_buftab_alloc(gt_buftab *tab, uint64_t bytes, uint32_t flags,
                                   uint64_t owner, gt_dbuf *h, gt_buftab_entry **e);
// The same for memory that another process owns (a CUDA IPC import): foreign, not counted
// against the limit (it is the exporter's), but counted among the buffers; no size limit here
// (the importer checks the claim against the real allocation).
GT_MUST_USE gt_err gt_buftab_import(gt_buftab *tab, uint64_t bytes, uint32_t flags,
                                    uint64_t owner, gt_dbuf *h, gt_buftab_entry **e);
// Ends a live entry (the backend has wiped and freed its memory): the span no longer counts and
// h never resolves again. h must be live (misuse asserts).
void gt_buftab_release(gt_buftab *tab, gt_dbuf h);

// The live entry of h owned by owner, else GT_E_NOTFOUND (one message whatever the reason, so
// another session's handles are indistinguishable from unknown ones).
GT_MUST_USE gt_err gt_buftab_find(const gt_buftab *tab, gt_dbuf h, uint64_t owner,
                                  gt_buftab_entry **e);
// GT_E_NOTFOUND for h, for a backend's own visibility rules (devd: a holder sees only its trip).
GT_MUST_USE gt_err gt_buftab_notfound(gt_dbuf h);
// GT_E_ARG unless [offset, offset + len) lies within the entry (overflow-safe; len 0 at offset
// == bytes is fine). what names the access in the message ("copy_in", "op operand").
GT_MUST_USE gt_err gt_buftab_range(const gt_buftab_entry *e, gt_dbuf h, uint64_t offset,
                                   uint64_t len, const char *what);
// find, then range: what every write and every op operand goes through.
GT_MUST_USE gt_err gt_buftab_access(const gt_buftab *tab, gt_dbuf h, uint64_t owner,
                                    uint64_t offset, uint64_t len, const char *what,
                                    gt_buftab_entry **e);
// The one door out (copy_out): find, then GT_E_POLICY for a NO_READBACK buffer whatever the
// range, then range.
GT_MUST_USE gt_err gt_buftab_read_out(const gt_buftab *tab, gt_dbuf h, uint64_t owner,
                                      uint64_t offset, uint64_t len, gt_buftab_entry **e);

// ---- labels in the table (labels above): the one implementation every backend and devd use
// Adds dataset id to the label of h (live), registering the id on first use: GT_E_LIMIT once
// GT_LABEL_MAX_SOURCES ids are carried (an id no live buffer carries any more is forgotten and
// its bit reused).
GT_MUST_USE gt_err gt_buftab_label_add(gt_buftab *tab, gt_dbuf h,
                                       const uint8_t id[GT_LABEL_ID_BYTES]);
// The ids in label, in bit order (the first cap of them); returns how many the label holds.
size_t gt_buftab_label_ids(const gt_buftab *tab, gt_label label, uint8_t (*ids)[GT_LABEL_ID_BYTES],
                           size_t cap);
// "dataset 0011..eeff" / "datasets 0011..eeff, 2233..4455 and 3 more", for refusals.
void gt_buftab_label_describe(const gt_buftab *tab, gt_label label, char *out, size_t cap);

// A session's declared outputs and what is left of their budgets.
typedef struct {
    bool declared;
    gt_device_outputs rules;  // budgets count down as releases run
    bool labelled_launch;     // the last launch read labelled data (gt_buftab_launch_labels)
    bool data_fault;          // a launch on labelled data failed on the data (one bit is out)
    gt_op_program program;    // the pinned program, once given (rules.program_pinned)
    uint32_t position;        // the program's op the next labelled launch must be
} gt_release_state;

// Sets rel's program from its bytes (GT_E_STATE: none pinned or already set; GT_E_POLICY: not
// the pinned program's hash; parse errors as gt_op_program_parse), and frees it.
GT_MUST_USE gt_err gt_release_pin(gt_release_state *rel, gt_span program);
void gt_release_state_free(gt_release_state *rel);

// A launch's labels, before its kernel runs and after the op is checked: every ref must resolve
// for owner (gt_buftab_access). Ordinary ops: every ref the op may write gets the union of the
// labels of every ref it reads, accumulates into or rewrites. Release ops (gt_op_desc `release`):
// with unlabelled inputs, an ordinary op; with labelled ones, GT_E_POLICY unless rel declares the
// output and has budget left, the output ref must be the whole buffer (so no labelled byte stays
// behind in it), one release is spent, *op's `bits` is set to the declared precision, and the
// output's label becomes empty. Nothing changes on failure.
GT_MUST_USE gt_err gt_buftab_launch_labels(gt_buftab *tab, uint64_t owner, gt_op *op,
                                           gt_release_state *rel);
// The kernel's result, after gt_buftab_launch_labels allowed it. A launch that read labelled data
// and failed on the data (GT_E_FORMAT: a token out of range) told the trainer one bit about that
// data; the session then runs no further op on labelled data (GT_E_STATE), so a trainer cannot
// search holder data one refusal at a time. Returns result, unchanged.
gt_err gt_buftab_launch_done(gt_release_state *rel, gt_err result);

// Iteration over live entries in slot order: start with *cursor = 0; returns NULL at the end.
// Releasing the entry just returned is allowed; allocating during the walk is not.
gt_buftab_entry *gt_buftab_next(const gt_buftab *tab, size_t *cursor, gt_dbuf *h);
uint64_t gt_buftab_used(const gt_buftab *tab);    // counted spans of the live entries
uint64_t gt_buftab_limit(const gt_buftab *tab);   // the effective memory limit
size_t gt_buftab_live(const gt_buftab *tab);      // live entries, foreign ones included

// ---- the peer core, shared by the in-process backends and devd (src/device/peer.c) -----------
// The hello (little endian): "GTPEERH1" | u16 version (1) | u16 kind | u32 rank | u32 nranks |
// agreement[32] | X25519 pub[32] | u32 n, trainer part | u32 n, evidence. kind INPROC: the
// trainer's process is the device (cpu), the evidence is its TEE evidence and the trainer part
// is empty. kind DEVD: the evidence is devd's device bundle (devproto.h) and the trainer part is
// the CLIENT_HELLO with which the trainer's attested session to that devd began (its evidence
// binds that devd's nonce, so the device vouches for the trainer it serves). The evidence's
// report_data = gt_attest_report_data_build(GT_PEER_TAG_RD, SHA-256(every byte before the
// evidence length), pub, agreement).
#define GT_PEER_HELLO_MAGIC "GTPEERH1"
#define GT_PEER_HELLO_VERSION 1u
#define GT_PEER_TAG_RD "gputravel/peer-hello/v1"
#define GT_PEER_KEYS_INFO "gputravel peer keys v1"
enum { GT_PEER_KIND_INPROC = 1, GT_PEER_KIND_DEVD = 2 };

typedef struct {
    uint16_t version, kind;
    uint32_t rank, nranks;
    uint8_t agreement[32];
    uint8_t pub[32];
    gt_span trainer;     // borrowed from the hello
    gt_span evidence;    // borrowed
    size_t signed_len;   // bytes before the evidence length: what report_data binds
} gt_peer_hello_msg;
// Untrusted bytes, through gt_reader: GT_E_FORMAT / GT_E_TRUNCATED / GT_E_UNSUPPORTED.
GT_MUST_USE gt_err gt_peer_hello_parse(gt_span hello, gt_peer_hello_msg *out);

// A chunk's header and label block as they are on the wire (untrusted; gt_reader). *aad_len: the
// bytes of header || label block; *ct: the ciphertext || tag that follow.
typedef struct {
    gt_peer_hdr h;
    uint64_t seq;
    uint32_t nlabels;
    uint8_t labels[GT_LABEL_MAX_SOURCES][GT_LABEL_ID_BYTES];
    size_t aad_len;
    gt_span ct;
} gt_peer_chunk_msg;
GT_MUST_USE gt_err gt_peer_chunk_parse(gt_span chunk, gt_peer_chunk_msg *out);

typedef struct gt_peer_core gt_peer_core;  // one device's run: its key, the peers, the counters
GT_MUST_USE gt_err gt_peer_core_new(gt_peer_core **pc);
void gt_peer_core_free(gt_peer_core *pc);  // wipes the keys

// How a device makes its hello: its kind, the trainer part, and its evidence over report_data.
typedef struct {
    uint16_t kind;
    gt_span trainer;
    gt_err (*produce)(void *ctx, const uint8_t report_data[GT_REPORT_DATA_BYTES], gt_buf *ev);
    void *produce_ctx;
    const char *vendor_root_pem;  // DEVD peers' device certificates (NULL: the sim root's)
} gt_peer_identity;
GT_MUST_USE gt_err gt_peer_core_hello(gt_peer_core *pc, const gt_device_peer_rules *rules,
                                      const gt_peer_identity *id, uint32_t rank, uint32_t nranks,
                                      uint8_t *hello, size_t cap, size_t *len);
GT_MUST_USE gt_err gt_peer_core_admit(gt_peer_core *pc, uint32_t peer_rank, gt_span hello);
GT_MUST_USE gt_err gt_peer_core_run_id(gt_peer_core *pc, uint8_t run[16]);
// What a backend gives the core for one chunk's floats in its own memory (host, or GPU memory on
// cuda): the core checks, writes header || label block (the AAD), picks the IV and the key, and
// keeps the sequence numbers, so every backend's wire bytes are the same for the same inputs.
typedef struct {
    // ct_tag (host, len + GT_AEAD_TAG_BYTES) = AES-256-GCM(key, iv, aad) of the range's len bytes.
    gt_err (*seal)(void *ctx, uint8_t *ct_tag, uint64_t len, const uint8_t *aad, size_t aad_len,
                   const uint8_t iv[GT_AEAD_IV_BYTES], const uint8_t key[GT_AEAD_KEY_BYTES]);
    // Authenticates ct_tag (host, len + GT_AEAD_TAG_BYTES) and decrypts it into the range's own
    // staging; writes nothing in the destination. GT_E_AUTH when the tag does not verify.
    gt_err (*open)(void *ctx, const uint8_t *ct_tag, uint64_t len, const uint8_t *aad,
                   size_t aad_len, const uint8_t iv[GT_AEAD_IV_BYTES],
                   const uint8_t key[GT_AEAD_KEY_BYTES]);
    // After open succeeded and the labels were added: dst += staging (GT_PEER_ADD) or = (COPY).
    gt_err (*apply)(void *ctx, int mode);
    void *ctx;
} gt_peer_range;
GT_MUST_USE gt_err gt_peer_core_seal_range(gt_peer_core *pc, const gt_buftab *tab,
                                           gt_label label, const gt_peer_hdr *h,
                                           const gt_peer_range *r, uint8_t *out, size_t cap,
                                           size_t *outlen);
GT_MUST_USE gt_err gt_peer_core_open_range(gt_peer_core *pc, gt_buftab *tab, gt_dbuf h_dst,
                                           const gt_peer_hdr *h, gt_span chunk,
                                           const gt_peer_range *r, int mode);
// The host range (OpenSSL's GCM on host memory; the cpu backend and devd):
// plain: the nelem floats (h->elem_off already applied); label: the source buffer's label in tab.
GT_MUST_USE gt_err gt_peer_core_seal(gt_peer_core *pc, const gt_buftab *tab, gt_label label,
                                     const gt_peer_hdr *h, const uint8_t *plain, uint8_t *out,
                                     size_t cap, size_t *outlen);
// dst: the nelem floats of buffer h_dst at h->elem_off (resolved by the caller in tab); written
// only after everything checked and the tag verified; the labels are added to h_dst first.
GT_MUST_USE gt_err gt_peer_core_open(gt_peer_core *pc, gt_buftab *tab, gt_dbuf h_dst,
                                     const gt_peer_hdr *h, gt_span chunk, uint8_t *dst, int mode);
// The byte range of h's floats (overflow-safe; nelem 1..GT_PEER_MAX_CHUNK_ELEMS): GT_E_ARG.
GT_MUST_USE gt_err gt_peer_hdr_bytes(const gt_peer_hdr *h, uint64_t *offset, uint64_t *len);

// ---- the pager: protected memory beyond the limit (docs/paging.md; issue 17) ------------------
// One implementation for the cpu backend and devd's arena. Buffers live in a virtual arena of
// `virt` bytes, placed on page boundaries; at most `cap` bytes of it are resident (readable
// memory) at once. A page that must make room is sealed out to an untrusted store (AES-256-GCM
// under a random per-pager key; AAD: buffer handle, page of the buffer, arena page, version,
// label), zeroed, dropped and made PROT_NONE. Each page's version is a leaf of a hash tree kept
// in the untrusted store whose root stays in the pager (protected memory); a fault-in checks the
// version against the root and the blob against its tag, so a stale, replayed, swapped,
// truncated, deleted or altered page is refused with GT_E_AUTH, after which the pager is failed
// (gt_pager_failed) and its owner tears the session down. One caller thread at a time (one per
// device); with `prefetch` the pager runs its own worker thread beside it (docs/paging.md).
#define GT_PAGER_PAGE_BYTES (64u << 10)  // the default page: docs/paging.md says why

typedef struct gt_pager gt_pager;  // opaque

typedef struct {
    uint64_t cap;           // resident bytes at most (rounded down to whole pages, >= 4 pages)
    uint64_t virt;          // bytes all buffers may take, >= cap (0: 16 x cap, >= 256 MiB)
    uint32_t page_bytes;    // 0: GT_PAGER_PAGE_BYTES; a power of two from 4 KiB to 1 MiB
    const char *store_dir;  // an existing directory for the untrusted store's two files
    const gt_buftab *tab;   // the buffers' labels, read (by the caller's thread) on each write hold
    // A worker thread that learns the op stream of launches (a step repeats) and pre-loads the
    // pages of the next launches, evicting first what the recorded stream does not need soon;
    // copy_in / copy_out pieces are read ahead in order. Every fault-in is checked as always.
    bool prefetch;
} gt_pager_config;

typedef struct {
    uint64_t page_bytes;      // 0: no pager (the backend refuses past its limit)
    uint64_t cap;             // resident bytes at most
    uint64_t resident_bytes;  // pages readable now
    uint64_t peak_resident;   // the most ever resident at once
    uint64_t evicted_bytes;   // pages held only sealed in the store now
    uint64_t page_outs;       // pages sealed out
    uint64_t clean_drops;     // pages evicted unchanged: dropped, their blob still current
    uint64_t fault_ins;       // pages read back (from the store, or fresh zero pages)
    // fault-ins split by who did them and why (all but demand_faults 0 without prefetch)
    bool prefetch;             // the pager runs a prefetch worker
    uint64_t demand_faults;    // by the caller's thread, waiting for the page
    uint64_t prefetch_issued;  // by the worker, for a launch or piece predicted ahead
    uint64_t prefetch_hits;    // of those, found resident when the caller needed them
    uint64_t prefetch_wasted;  // of those, evicted again before any use
    uint64_t assist_faults;    // by the worker, for the current launch (in parallel with it)
    uint64_t pre_evictions;    // pages evicted by the worker (sealed or dropped) to make room
    uint64_t mispredicts;      // launches other than the op stream predicted
    uint64_t map_calls;        // mmap calls mapping pages in or out (a run of pages: one call)
    uint64_t ops_in_parts;     // ops over the cap run in parts of their tiles: matmuls and
                               // sum_of_squares (docs/paging.md "Matmuls in parts", "Reductions")
    uint64_t discards;         // pages whose old bytes were dropped unread, neither opened nor
                               // sealed: zero-filled (gt_pager_zero) or overwritten whole by a launch
} gt_pager_stats;

// A pager with a fresh key and an empty store (GT_E_ARG for a bad config, GT_E_IO for the store).
GT_MUST_USE gt_err gt_pager_new(gt_pager **pg, const gt_pager_config *cfg);
// Wipes resident pages, the key and the tree root, removes the store. NULL is fine.
void gt_pager_free(gt_pager *pg);
uint8_t *gt_pager_base(gt_pager *pg);  // the virtual arena: a buffer is at base + its offset
// Places a buffer of `bytes` (entry h of owner in the table) on whole pages, first fit:
// GT_E_LIMIT when no hole of the arena is large enough. Its pages start as zero pages.
GT_MUST_USE gt_err gt_pager_place(gt_pager *pg, gt_dbuf h, uint64_t owner, uint64_t bytes,
                                  uint64_t *off);
// Ends a placed buffer: its resident pages are wiped and dropped, its sealed ones forgotten.
void gt_pager_release(gt_pager *pg, uint64_t off);
// Makes [off, off + len) of the arena resident and keeps it so until the next hold or launch
// (GT_E_LIMIT when it is more than the cap; GT_E_AUTH when a page fails its check). write: the
// caller may change the bytes (a page never written since it came in is dropped, not resealed,
// when it has to make room: its blob in the store is still its newest version).
GT_MUST_USE gt_err gt_pager_hold(gt_pager *pg, uint64_t off, uint64_t len, bool write);
// Calls fn on [off, off + len) one page-sized piece at a time, each resident while fn runs
// (`done`: bytes of the range before this piece): copy_in, copy_out, memset of any size. The
// pages are held in runs of up to 32 (a quarter of the cap at most), faulted in and mapped as
// runs.
typedef gt_err (*gt_pager_piece_fn)(void *ctx, uint8_t *p, uint64_t done, uint64_t n);
GT_MUST_USE gt_err gt_pager_each(gt_pager *pg, uint64_t off, uint64_t len, bool write,
                                 gt_pager_piece_fn fn, void *ctx);
// Zeros [off, off + len): its whole pages become zero pages without being opened or sealed
// (what was resident is wiped and dropped, what was sealed forgotten); the partial pages at
// its ends are held and cleared like any write. memset(0) of a paged buffer (zeroing gradients).
GT_MUST_USE gt_err gt_pager_zero(gt_pager *pg, uint64_t off, uint64_t len);
// Runs op (already checked and labelled) with every byte its refs cover resident: where(ctx, h,
// &off) gives a buffer's arena offset, run(ctx, op, part) runs the kernel (part NULL: all of op;
// else only that part's tiles: gt_ops_cpu_run_part). An op whose refs cover more than the cap is
// split into pieces when it is elementwise (gelu, residual, adamw, clip_grads), run in parts of
// its tiles when it is a matmul (each part with only the pages it touches resident: kernels.h),
// else refused: GT_E_LIMIT "op X needs N bytes resident, cap is L"; so is a matmul one of whose
// tiles alone does not fit.
typedef gt_err (*gt_pager_where_fn)(void *ctx, gt_dbuf h, uint64_t *off);
typedef gt_err (*gt_pager_run_fn)(void *ctx, const gt_op *op, const gt_op_part *part);
GT_MUST_USE gt_err gt_pager_launch(gt_pager *pg, const gt_op *op, gt_pager_where_fn where,
                                   gt_pager_run_fn run, void *ctx);
void gt_pager_stats_get(const gt_pager *pg, gt_pager_stats *st);
// The most bytes an access a page at a time should hold at once, from a page boundary: 32 pages,
// a quarter of the cap at most (one page at least). Holding a run lets the pager fault it in
// and map it with one call instead of one per page (gt_pager_each does so; devd's copies too).
uint64_t gt_pager_run_bytes(const gt_pager *pg);
bool gt_pager_failed(const gt_pager *pg);  // a page failed its check: tear the session down
// With nothing placed: a fresh key, tree and store (a new device session starts clean).
GT_MUST_USE gt_err gt_pager_rekey(gt_pager *pg);

// The cpu backend's pager counters (page_bytes 0 when it pages nothing); sim: through
// gt_device_sim_stat_get. GT_E_UNSUPPORTED on sim and cuda.
GT_MUST_USE gt_err gt_device_paging_stats(gt_device *dev, gt_pager_stats *st);

// ---- sim device: gputravel devd and its attested session --------------------------------------
// The session's parameters and evidence hooks (gt_device_attester, gt_device_sim_options) are
// the device protocol's: devproto.h, and so are the sizes this API takes (one name each:
// GT_REPORT_DATA_BYTES and GT_MEASUREMENT_BYTES from attest.h, GT_SIM_TICKET_BYTES and
// GT_SIM_LOAD_AAD_BYTES from devproto.h, GT_SHA256_BYTES for the agreement hash).

// gt_device_open for a sim device with explicit hooks (gt_device_open uses the defaults).
GT_MUST_USE gt_err gt_device_open_sim(gt_device **dev, const gt_device_config *cfg,
                                      const gt_device_sim_options *opt);

// devd's counters, as it reports them to its current session (tests and benchmarks).
typedef struct {
    uint64_t sessions;       // sessions served so far, this one included
    uint64_t bytes_in_use;   // allocated device memory, all sessions
    uint64_t bytes_wiped;    // zeroized by free / session end since devd started
    uint64_t buffers_live;
    uint64_t mem_limit;
    gt_pager_stats paging;   // devd --paging-store: its pager's counters (page_bytes 0: none)
} gt_device_sim_stat;
GT_MUST_USE gt_err gt_device_sim_stat_get(gt_device *dev, gt_device_sim_stat *stat);
// The device evidence received in the handshake (borrowed; valid until gt_device_close) and the
// report_data it was appraised against (so a caller can keep or re-appraise it).
GT_MUST_USE gt_err gt_device_sim_evidence(gt_device *dev, gt_span *evidence,
                                          uint8_t report_data[GT_REPORT_DATA_BYTES]);
// The device's measurement (sim: SHA-384 of devd's executable) from the evidence the default
// appraise hook accepted at open or attach, for checks against an agreement's
// device.accepted_measurements. GT_E_NOTFOUND when a custom appraise hook judged the device.
GT_MUST_USE gt_err gt_device_sim_measurement(gt_device *dev,
                                             uint8_t out[GT_MEASUREMENT_BYTES]);

// ---- sim device: travelling (docs/device-sim.md "Travelling"; docs/design.md §1) -------------------
// The trainer lends its device to one holder for one trip and gets it back with the holder's
// chunks loaded into buffers the trainer owns but can never read back (NO_READBACK): it can only
// launch ops on them. The ticket is a capability: whoever holds it (and passes devd's admission
// policy with the trainer's agreement hash) may attach once; send it to the holder only over an
// attested channel. The trainer's buffers and session survive the trip.
// Trainer: lends the device for at most lease_ms (1 .. 3600000) and receives a fresh random
// ticket (the caller wipes it after handing it on). Until the trip ends every other call on dev
// fails with GT_E_STATE ("device is lent"); gt_device_sim_wait_return is the one that works.
GT_MUST_USE gt_err gt_device_sim_lend(gt_device *dev, uint32_t lease_ms,
                                      uint8_t ticket[GT_SIM_TICKET_BYTES]);

typedef struct {
    gt_dbuf buf;     // a buffer of the trainer's now (NO_READBACK)
    uint64_t bytes;  // end of the furthest chunk loaded into it (offset + plaintext length)
} gt_device_sim_loaded;

// Trainer: waits up to timeout_ms (0: no limit; the lease bounds the trip) for the device to
// come back. Returned: GT_OK, *count loaded buffers, the first min(count, cap) in loaded[]
// (GT_E_LIMIT when more than cap, the device is back all the same). The trip failed (lease
// expired, holder gone before RETURN): the code why (GT_E_TIMEOUT, GT_E_PEER, ...), every buffer
// of the trip wiped, the device back. Still away after timeout_ms: GT_E_TIMEOUT with
// "still lent" and the trip goes on. Not lent: GT_E_STATE.
GT_MUST_USE gt_err gt_device_sim_wait_return(gt_device *dev, int timeout_ms,
                                             gt_device_sim_loaded *loaded, size_t cap,
                                             size_t *count);

// Trainer: takes the device back from a trip no holder has attached to yet (the holder refused
// before attaching): the trip FAILS at once (GT_E_STATE), and wait_return reports it. Once a
// holder is attached: GT_E_STATE "a holder has it" (its RETURN or departure ends the trip).
GT_MUST_USE gt_err gt_device_sim_recall(gt_device *dev);

// Holder: opens a session with the lent device (the same attested handshake as
// gt_device_open_sim: the holder appraises the device's evidence through opt, and opt's
// agreement_hash must be the lending trainer's) and attaches with the ticket. Wrong ticket:
// GT_E_AUTH (the lend stands). The holder device then allows only gt_device_alloc (buffers owned
// by the trainer's session, NO_READBACK forced), gt_device_buf_size, gt_device_free of its own
// trip buffers, gt_device_sim_load_sealed and gt_device_sim_return; copy_in/out, memset and launch
// fail with GT_E_POLICY, other buffers are GT_E_NOTFOUND.
GT_MUST_USE gt_err gt_device_sim_attach(gt_device **holder, const gt_device_config *cfg,
                                        const gt_device_sim_options *opt,
                                        const uint8_t ticket[GT_SIM_TICKET_BYTES]);
// Holder: streams one sealed chunk (ciphertext || tag exactly as stored, len bytes including the
// 16-byte tag) through the bounce slots unchanged; the chunk key, IV and AAD go in one
// AEAD-protected record, and devd decrypts into dst at dst_offset (len - 16 bytes). Tag failure:
// GT_E_AUTH, and dst is wiped and freed (its handle is dead). devd wipes the key after use.
GT_MUST_USE gt_err gt_device_sim_load_sealed(gt_device *holder, gt_dbuf dst, uint64_t dst_offset,
                                             const uint8_t *ct_and_tag, uint64_t len,
                                             const uint8_t iv[GT_AEAD_IV_BYTES],
                                             const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                             const uint8_t key[GT_AEAD_KEY_BYTES],
                                             uint32_t seg_bytes);
// seg_bytes (every load): 0 for a GTCHUNK1 chunk (one GCM message, len = plaintext + 16), else
// the GTCHUNK2 segment size of its manifest (len = plaintext + 16 per segment; seal.h); devd
// opens the segments on two threads where it reads the file itself (seal.h's nonce and AAD).
// Holder: the same from a file: ciphertext || tag (len bytes, tag included) at file_offset of fd
// (a regular file: the chunk file itself, at GT_CHUNK_HEADER_BYTES). The descriptor is passed to
// devd, which reads the bytes into its own memory and decrypts them: no copy in the holder, no
// bounce slots. fd stays the caller's. Same results as gt_device_sim_load_sealed; a file that is
// too short or not regular is GT_E_ARG (nothing loaded, the session goes on).
GT_MUST_USE gt_err gt_device_sim_load_sealed_fd(gt_device *holder, gt_dbuf dst, uint64_t dst_offset,
                                                int fd, uint64_t file_offset, uint64_t len,
                                                const uint8_t iv[GT_AEAD_IV_BYTES],
                                                const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                                const uint8_t key[GT_AEAD_KEY_BYTES],
                                                uint32_t seg_bytes);
// Holder in enclave mode: as gt_device_sim_load_sealed_fd, with the chunk key wrapped
// (gt_x25519_wrap) by the holder's enclave to this session's devd key under travel.h's
// gt_release_aad_build(session agreement, the AAD's dataset and chunk, this trip, this session's
// server hello hash); devd unwraps it. A key that does not open there: GT_E_AUTH, nothing loaded.
GT_MUST_USE gt_err gt_device_sim_load_sealed_wrapped(gt_device *holder, gt_dbuf dst,
                                                     uint64_t dst_offset, int fd,
                                                     uint64_t file_offset, uint64_t len,
                                                     const uint8_t iv[GT_AEAD_IV_BYTES],
                                                     const uint8_t aad[GT_SIM_LOAD_AAD_BYTES],
                                                     const uint8_t wrapped[GT_KEYWRAP_BYTES],
                                                     uint32_t seg_bytes);
// The attested session's binding a key is wrapped to: devd's X25519 key (its evidence binds it)
// and SHA-256 of its server hello.
GT_MUST_USE gt_err gt_device_sim_session_binding(gt_device *holder,
                                                 uint8_t server_pub[GT_X25519_BYTES],
                                                 uint8_t server_hello_hash[GT_SHA256_BYTES]);
// The session's CLIENT_HELLO and SERVER_HELLO bodies as they crossed (borrowed until the device
// is closed): what a holder enclave appraises devd from itself before it wraps a key to it.
GT_MUST_USE gt_err gt_device_sim_session_hellos(gt_device *holder, gt_span *client_hello,
                                                gt_span *server_hello);
// Holder: ends the trip; the loaded buffers become the trainer's, the rest of the trip's buffers
// are wiped, the ticket is dead. The holder session is over (gt_device_close it). Closing a
// holder device without return fails the trip (everything it loaded is wiped).
GT_MUST_USE gt_err gt_device_sim_return(gt_device *holder);
// Holder: ends the trip exactly as gt_device_sim_return, but devd parks this attested session for
// the holder's next trip instead of ending it: gt_device_sim_reattach then attaches it to the
// next lend without a new handshake (no evidence produced or appraised again: it is the same
// devd process on the same connection, and the agreement hash was bound at the handshake).
// Parked, the device allows only gt_device_sim_reattach and gt_device_close (GT_E_STATE
// otherwise). devd keeps at most 8 parked sessions and none attested more than 10 minutes ago;
// one it has dropped fails the reattach with GT_E_PEER.
GT_MUST_USE gt_err gt_device_sim_return_stay(gt_device *holder);
// Holder: attaches a parked session to the current lend with its ticket. Refusals as
// gt_device_sim_attach; any failure ends the session (close it; a fresh gt_device_sim_attach is
// the way back). devd reads a parked session only while the device is lent or idle: a reattach
// after the lease ran out, while the trainer uses its device again, gets no answer and fails
// with GT_E_TIMEOUT after at most 2 s (the trainer has its device back by then).
GT_MUST_USE gt_err gt_device_sim_reattach(gt_device *holder,
                                          const uint8_t ticket[GT_SIM_TICKET_BYTES]);

#endif
