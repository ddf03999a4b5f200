// gputravel/collective.h: ranks on Open MPI. An encrypted ring all-reduce (reduce-scatter, then
// all-gather) over MPI point-to-point in which every hop is a sealed chunk: MPI carries bytes
// and is not trusted. Who seals and opens is an endpoint (gt_ring_endpoint): the host endpoint
// here (floats in host memory, keys from an X25519 exchange over MPI, sim-labelled admission)
// for benchmarks and tests; the device endpoint (the rank's device seals, with attested
// admission: gt_ring_device_*) for training.
//
// Trusts: its callers, and the endpoint it is given. Does not trust: any byte MPI delivers. A
// chunk is parsed through gt_reader, its header must equal the one the receiver expects (run,
// step, bucket, hop, src, dst, elem range) with the next sequence number of its direction, and
// its tag must verify before a single float of it is summed.
#ifndef GPUTRAVEL_DIST_H
#define GPUTRAVEL_DIST_H

#include <gputravel/crypto.h>
#include <gputravel/device.h>
#include <gputravel/util.h>

#include <mpi.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---- the chunk header (docs/collective.md "Wire format") -------------------------------------------
// gt_peer_hdr, GT_PEER_ADD / GT_PEER_COPY, GT_PEER_HDR_BYTES, GT_PEER_MAX_CHUNK_ELEMS and
// gt_peer_chunk_bytes (the room to reserve for any endpoint's chunk) are the device's
// (device.h): both endpoints write the same wire. Header (64 bytes, little endian): run 16 |
// step 8 | bucket 4 | hop 4 | src 4 | dst 4 | elem_off 8 | nelem 8 | seq 8; then the label block
// (u32 n | n dataset ids); AAD = header || label block; then the ciphertext and the tag.

void gt_ring_hdr_encode(uint8_t out[GT_PEER_HDR_BYTES], const gt_peer_hdr *h, uint64_t seq);
// Reads one header from untrusted bytes (the fields only; no judgement of their values beyond
// the chunk size limit).
GT_MUST_USE gt_err gt_ring_hdr_parse(gt_reader *r, gt_peer_hdr *h, uint64_t *seq);
// GT_OK when got equals want field by field and seq is want_seq; otherwise GT_E_AUTH naming
// the first field that differs ("hop 3, expected 2"): the message a rejected chunk reports.
GT_MUST_USE gt_err gt_ring_hdr_expect(const gt_peer_hdr *got, uint64_t seq,
                                      const gt_peer_hdr *want, uint64_t want_seq);

// ---- the endpoint: who seals and opens --------------------------------------------------------
// seal: floats [h->elem_off, +h->nelem) of the endpoint's buffer for h->dst, into out.
// open: a chunk from h->src (h is what the receiver expects), added into (GT_PEER_ADD) or copied
// over (GT_PEER_COPY) floats [h->elem_off, +h->nelem); on any failure nothing is written.
typedef struct {
    void *ctx;
    gt_err (*seal)(void *ctx, const gt_peer_hdr *h, uint8_t *out, size_t cap, size_t *len);
    gt_err (*open)(void *ctx, const gt_peer_hdr *h, const uint8_t *in, size_t len, int mode);
} gt_ring_endpoint;

// ---- the host endpoint -----------------------------------------------------------------------
// Each rank makes a fresh X25519 key per run; the public keys are allgathered over MPI; the run
// id is SHA-256(all public keys in rank order)[0..16); the pairwise keys are
// HKDF-SHA-256(X25519 shared, salt = run id || public key of the lower rank || of the higher,
// info = "gputravel ring v1") -> 64 bytes: the lower->higher key, then higher->lower. The wire
// is the device's (device.h), with an empty label block; IV = u16be src | u16be dst | u64be
// the direction's counter, which is the chunk's sequence number: it never repeats under a key,
// and keys are per run.
// The admission evidence is the host's own: insecure simulation, logged as such. The device
// endpoint does the attested admission (gt_device_peer_hello/admit).
typedef struct gt_ring_host gt_ring_host;

// Collective over comm (every rank calls it). The endpoint keeps its own duplicate of comm.
GT_MUST_USE gt_err gt_ring_host_admit(gt_ring_host **out, MPI_Comm comm, int timeout_ms);
void gt_ring_host_free(gt_ring_host *h);  // wipes keys and staging
// The floats seal reads and open writes (host memory; the caller's, for the next collective).
void gt_ring_host_set_buffer(gt_ring_host *h, float *data, uint64_t nelem);
void gt_ring_host_run_id(const gt_ring_host *h, uint8_t run[16]);
gt_ring_endpoint gt_ring_host_endpoint(gt_ring_host *h);

// ---- the device endpoint ---------------------------------------------------------------------
// The rank's own device seals and opens (gt_device_peer_seal / _open) chunks of one of its
// buffers: the gradients leave only sealed by the device to an attested peer device, and this
// process relays ciphertext. The device must have declared outputs whose peer rules
// (trainer.ranks = the communicator's size) admit the other ranks.
typedef struct gt_ring_device gt_ring_device;

typedef struct {
    int timeout_ms;  // on every exchange (default 30000 when opts is NULL)
    // tests only: may replace this rank's hello (cap bytes of room) before it is sent
    void (*hello_hook)(void *ctx, uint8_t *hello, size_t cap, size_t *len);
    void *hook_ctx;
} gt_ring_device_opts;

// What the ranks exchange over MPI during admission (untrusted bytes; gt_reader). A hello slot
// is u32le n || n bytes of hello (n <= GT_PEER_HELLO_MAX) || zero padding to the slot. A verdict
// (what every rank's device concluded) is u8 ok (0 or 1) || run[16] || u16le n || n bytes of
// reason (printable ASCII, n <= GT_RING_REASON_MAX) || zero padding.
#define GT_RING_HELLO_SLOT (4 + GT_PEER_HELLO_MAX)
#define GT_RING_REASON_MAX 255
#define GT_RING_VERDICT_BYTES (1 + 16 + 2 + GT_RING_REASON_MAX)
typedef struct {
    bool ok;                              // the device admitted every peer and has a run id
    uint8_t run[16];                      // its run id (when ok)
    char reason[GT_RING_REASON_MAX + 1];  // why not (when not ok), NUL-terminated
} gt_ring_verdict;
// The hello in a slot (borrowed from slot): GT_E_FORMAT / GT_E_TRUNCATED otherwise.
GT_MUST_USE gt_err gt_ring_hello_slot_parse(gt_span slot, gt_span *hello);
void gt_ring_verdict_encode(uint8_t out[GT_RING_VERDICT_BYTES], const gt_ring_verdict *v);
// GT_E_FORMAT for an ok byte other than 0/1, a reason too long or not printable, padding that is
// not zero; GT_E_TRUNCATED for fewer than GT_RING_VERDICT_BYTES.
GT_MUST_USE gt_err gt_ring_verdict_parse(gt_span in, gt_ring_verdict *v);

// Collective over comm: every device makes its hello (gt_device_peer_hello), the hellos are
// allgathered, every device admits every other rank's (gt_device_peer_admit) and makes the run id
// (gt_device_peer_run_id); then every rank's verdict is allgathered, so that every rank returns
// the same error when any device refused a hello ("rank 0 refused rank 1's hello: ...") or when
// the run ids differ (a hello replayed from another run: the device admits it as a stranger, but
// its run id is another). On success *out's run id is the ring's (gt_ring_new).
GT_MUST_USE gt_err gt_ring_device_admit(gt_ring_device **out, gt_device *dev, MPI_Comm comm,
                                        const gt_ring_device_opts *opts);
void gt_ring_device_free(gt_ring_device *d);  // the keys are the device's (a new hello wipes)
// The device buffer seal reads and open writes (the gradients, for the next collective).
void gt_ring_device_set_buffer(gt_ring_device *d, gt_dbuf buf);
void gt_ring_device_run_id(const gt_ring_device *d, uint8_t run[16]);
gt_ring_endpoint gt_ring_device_endpoint(gt_ring_device *d);

// ---- the ring -------------------------------------------------------------------------------
// The test hook on the wire: sees each chunk this rank sends (after sealing, before MPI) and
// may change the chunks it receives (after MPI, before opening) — a window's arrivals of one
// round together, in the order they will be opened, so that it can flip, swap or replace them.
typedef struct {
    gt_peer_hdr want;  // what the receiver expects
    uint8_t *bytes;    // the chunk as it arrived (cap bytes of room)
    size_t len, cap;
} gt_ring_arrival;

typedef struct {
    void *ctx;
    void (*sent)(void *ctx, const gt_peer_hdr *h, const uint8_t *bytes, size_t len);
    void (*arrived)(void *ctx, gt_ring_arrival *a, size_t n);
} gt_ring_wire_hook;

typedef struct {
    uint64_t bucket_bytes;  // pipeline unit, like NCCL_BUFFSIZE (default 4 MiB)
    uint32_t window;        // buckets in flight (default 2: double buffered)
    int timeout_ms;         // on every receive and send (default 30000)
    const gt_ring_wire_hook *hook;  // tests only; NULL in production
} gt_ring_opts;

typedef struct gt_ring gt_ring;

// A ring over comm (collective: duplicates comm, so its messages never meet anyone else's).
GT_MUST_USE gt_err gt_ring_new(gt_ring **out, MPI_Comm comm, const uint8_t run[16],
                               const gt_ring_opts *opts);
void gt_ring_free(gt_ring *r);

// All-reduce (sum) of the endpoint's n floats in place, for training step `step` (the host
// endpoint: the buffer given to gt_ring_host_set_buffer). Summation order
// (deterministic for a given nranks, n and bucket size): each bucket is cut into nranks
// segments; segment k is summed ((x_k + x_{k+1}) + x_{k+2}) + ... + x_{k-1}, ranks mod nranks,
// then copied to all. On failure every rank returns an error: the one that failed says why
// (GT_E_AUTH rejected chunk, GT_E_TIMEOUT peer silent) and tells all others, who return
// GT_E_PEER with its rank and reason. The ring is then dead (gt_ring_free; a new run readmits);
// the caller prints and ends the job (the CLI: MPI_Abort).
GT_MUST_USE gt_err gt_ring_allreduce(gt_ring *r, const gt_ring_endpoint *ep, uint64_t n,
                                     uint64_t step);

// ZeRO-1's two halves, apart (docs/collective.md "ZeRO-1"), on the sharded layout: the n floats
// are cut into nranks contiguous shards (gt_ring_shard; the first n % nranks one float longer),
// and every bucket carries bucket_bytes / nranks / 4 floats of each shard, so that rank r owns
// all of shard r. reduce_scatter: afterwards shard r of rank r's buffer is the sum over the ranks
// (the floats outside it are partial sums: garbage). allgather: shard r of rank r's buffer is
// copied (not added) over shard r of every other rank's. Failures as for gt_ring_allreduce.
GT_MUST_USE gt_err gt_ring_reduce_scatter(gt_ring *r, const gt_ring_endpoint *ep, uint64_t n,
                                          uint64_t step);
GT_MUST_USE gt_err gt_ring_allgather(gt_ring *r, const gt_ring_endpoint *ep, uint64_t n,
                                     uint64_t step);
// Rank `rank`'s shard of n floats: [*off, *off + *len).
void gt_ring_shard(uint64_t n, uint32_t nranks, uint32_t rank, uint64_t *off, uint64_t *len);

// The phase is bound into every chunk: the header's hop field is phase << GT_RING_PHASE_SHIFT |
// the hop within the ring pass, so a chunk of one collective kind never opens as another's
// (it is in the AAD, and the receiver expects its own phase). Ranks are < 2^16, hops too.
enum {
    GT_RING_PHASE_ALLREDUCE = 0,       // hops 0..2N-3, bucket layout
    GT_RING_PHASE_REDUCE_SCATTER = 1,  // hops 0..N-2 (add), sharded layout
    GT_RING_PHASE_ALLGATHER = 2,       // hops N-1..2N-3 (copy), sharded layout
};
#define GT_RING_PHASE_SHIFT 16

// The segment of bucket b that rank order gives to index k: [*off, *off + *len) in floats.
void gt_ring_segment(uint64_t bucket_off, uint64_t bucket_len, uint32_t nranks, uint32_t k,
                     uint64_t *off, uint64_t *len);

#endif
