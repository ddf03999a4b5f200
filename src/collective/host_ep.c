// The host endpoint: floats in host memory sealed per hop with AES-256-GCM under pairwise keys
// from an X25519 exchange over MPI. Stands in for the device endpoint (the device seals its own
// gradients to an attested peer device) so that the ring can be tested and benchmarked first.
#include <gputravel/collective.h>

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define KDF_INFO "gputravel ring v1"
#define HOST_AAD_BYTES (GT_PEER_HDR_BYTES + 4)  // header || an empty label block

struct gt_ring_host {
    int rank, nranks;
    uint8_t run[16];
    uint8_t (*send_key)[GT_AEAD_KEY_BYTES];  // [peer]: this rank -> peer
    uint8_t (*recv_key)[GT_AEAD_KEY_BYTES];  // [peer]: peer -> this rank
    uint64_t *send_seq, *recv_seq;           // [peer]: the next sequence number, per direction
    float *data;
    uint64_t nelem;
    float *staging;  // an opened chunk waits here until its tag has verified
    uint64_t staging_elems;
};

// Iallgather polled against a deadline: a rank that never arrives cannot hang admission.
static gt_err allgather_pub(MPI_Comm comm, const uint8_t mine[GT_X25519_BYTES], uint8_t *all,
                            int timeout_ms)
{
    MPI_Request req;
    int rc = MPI_Iallgather(mine, GT_X25519_BYTES, MPI_BYTE, all, GT_X25519_BYTES, MPI_BYTE,
                            comm, &req);
    GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "admission: MPI_Iallgather failed (%d)", rc);
    double deadline = gt_now_seconds() + timeout_ms / 1000.0;
    for (;;) {
        int done = 0;
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        GT_ENSURE(rc == MPI_SUCCESS, GT_E_PEER, "admission: key exchange failed (%d)", rc);
        if (done) {
            return GT_OK;
        }
        GT_ENSURE(gt_now_seconds() < deadline, GT_E_TIMEOUT,
                  "admission: not every rank sent its public key within %d ms", timeout_ms);
        sched_yield();
    }
}

// One peer's pair of direction keys (lower rank -> higher first in the KDF output).
static gt_err derive_pair(gt_ring_host *h, int peer, const uint8_t *pubs,
                          const uint8_t sec[GT_X25519_BYTES])
{
    int lo = h->rank < peer ? h->rank : peer, hi = h->rank < peer ? peer : h->rank;
    uint8_t shared[GT_X25519_BYTES], okm[2 * GT_AEAD_KEY_BYTES];
    uint8_t salt[16 + 2 * GT_X25519_BYTES];
    memcpy(salt, h->run, 16);
    memcpy(salt + 16, pubs + (size_t)lo * GT_X25519_BYTES, GT_X25519_BYTES);
    memcpy(salt + 16 + GT_X25519_BYTES, pubs + (size_t)hi * GT_X25519_BYTES, GT_X25519_BYTES);
    gt_err err = gt_x25519_shared(shared, pubs + (size_t)peer * GT_X25519_BYTES, sec);
    if (gt_is_ok(err)) {
        err = gt_hkdf(GT_HASH_SHA256, okm, sizeof okm, shared, sizeof shared, salt, sizeof salt,
                      (const uint8_t *)KDF_INFO, strlen(KDF_INFO));
    }
    if (gt_is_ok(err)) {
        const uint8_t *up = okm, *down = okm + GT_AEAD_KEY_BYTES;
        memcpy(h->send_key[peer], h->rank == lo ? up : down, GT_AEAD_KEY_BYTES);
        memcpy(h->recv_key[peer], h->rank == lo ? down : up, GT_AEAD_KEY_BYTES);
    }
    gt_secure_zero(shared, sizeof shared);
    gt_secure_zero(okm, sizeof okm);
    return err.code == GT_E_NONE ? GT_OK : gt_err_wrap(err, "admission: rank %d", peer);
}

static gt_err host_alloc(gt_ring_host **out, MPI_Comm comm)
{
    gt_ring_host *h = calloc(1, sizeof *h);
    GT_ENSURE(h != NULL, GT_E_NOMEM, "ring host endpoint: out of memory");
    MPI_Comm_rank(comm, &h->rank);
    MPI_Comm_size(comm, &h->nranks);
    size_t n = (size_t)h->nranks;
    h->send_key = calloc(n, sizeof *h->send_key);
    h->recv_key = calloc(n, sizeof *h->recv_key);
    h->send_seq = calloc(n, sizeof *h->send_seq);
    h->recv_seq = calloc(n, sizeof *h->recv_seq);
    *out = h;
    GT_ENSURE(h->send_key && h->recv_key && h->send_seq && h->recv_seq, GT_E_NOMEM,
              "ring host endpoint: out of memory");
    return GT_OK;
}

gt_err gt_ring_host_admit(gt_ring_host **out, MPI_Comm comm, int timeout_ms)
{
    gt_ring_host *h = NULL;
    uint8_t pub[GT_X25519_BYTES], sec[GT_X25519_BYTES];
    uint8_t *pubs = NULL, digest[GT_SHA256_BYTES];
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, host_alloc(&h, comm), fail);
    pubs = calloc((size_t)h->nranks, GT_X25519_BYTES);
    GT_ENSURE_GOTO(err, pubs != NULL, fail, GT_E_NOMEM, "admission: out of memory");
    GT_TRY_GOTO(err, gt_x25519_keypair(pub, sec), fail);
    GT_TRY_GOTO(err, allgather_pub(comm, pub, pubs, timeout_ms), fail);
    GT_ENSURE_GOTO(err, memcmp(pubs + (size_t)h->rank * GT_X25519_BYTES, pub, sizeof pub) == 0,
                   fail, GT_E_AUTH, "admission: my own public key came back changed");
    GT_TRY_GOTO(err, gt_hash(GT_HASH_SHA256, digest, pubs, (size_t)h->nranks * GT_X25519_BYTES),
                fail);
    memcpy(h->run, digest, sizeof h->run);
    for (int p = 0; p < h->nranks; p++) {
        if (p != h->rank) {
            GT_TRY_GOTO(err, derive_pair(h, p, pubs, sec), fail);
        }
    }
    gt_log_info("collective: rank %d of %d: host endpoint keys agreed (INSECURE SIMULATION: no "
                "attestation evidence; the device endpoint does the attested admission)",
                h->rank, h->nranks);
    gt_secure_zero(sec, sizeof sec);
    free(pubs);
    *out = h;
    return GT_OK;
fail:
    gt_secure_zero(sec, sizeof sec);
    free(pubs);
    gt_ring_host_free(h);
    *out = NULL;
    return err;
}

void gt_ring_host_free(gt_ring_host *h)
{
    if (h == NULL) {
        return;
    }
    size_t n = (size_t)h->nranks;
    if (h->send_key != NULL) {
        gt_secure_zero(h->send_key, n * sizeof *h->send_key);
    }
    if (h->recv_key != NULL) {
        gt_secure_zero(h->recv_key, n * sizeof *h->recv_key);
    }
    if (h->staging != NULL) {
        gt_secure_zero(h->staging, h->staging_elems * sizeof(float));
    }
    free(h->send_key);
    free(h->recv_key);
    free(h->send_seq);
    free(h->recv_seq);
    free(h->staging);
    free(h);
}

void gt_ring_host_set_buffer(gt_ring_host *h, float *data, uint64_t nelem)
{
    h->data = data;
    h->nelem = nelem;
}

void gt_ring_host_run_id(const gt_ring_host *h, uint8_t run[16]) { memcpy(run, h->run, 16); }

// The device's IV (src/device/peer.c): u16be src | u16be dst | u64be seq.
static void make_iv(uint8_t iv[GT_AEAD_IV_BYTES], uint32_t src, uint32_t dst, uint64_t seq)
{
    iv[0] = (uint8_t)(src >> 8);
    iv[1] = (uint8_t)src;
    iv[2] = (uint8_t)(dst >> 8);
    iv[3] = (uint8_t)dst;
    for (int i = 0; i < 8; i++) {
        iv[4 + i] = (uint8_t)(seq >> (56 - 8 * i));
    }
}

static gt_err check_range(const gt_ring_host *h, const gt_peer_hdr *hd, uint32_t peer)
{
    GT_ENSURE(peer < (uint32_t)h->nranks && peer != (uint32_t)h->rank, GT_E_ARG,
              "ring endpoint: peer rank %u (this is rank %d of %d)", peer, h->rank, h->nranks);
    GT_ENSURE(hd->nelem >= 1 && hd->nelem <= GT_PEER_MAX_CHUNK_ELEMS && hd->elem_off <= h->nelem &&
                  hd->nelem <= h->nelem - hd->elem_off,
              GT_E_ARG, "ring endpoint: floats [%llu, +%llu) outside the buffer of %llu",
              (unsigned long long)hd->elem_off, (unsigned long long)hd->nelem,
              (unsigned long long)h->nelem);
    return GT_OK;
}

static gt_err host_seal(void *ctx, const gt_peer_hdr *hd, uint8_t *out, size_t cap, size_t *len)
{
    gt_ring_host *h = ctx;
    GT_ENSURE(hd->src == (uint32_t)h->rank, GT_E_ARG, "ring seal: src %u is not this rank",
              hd->src);
    GT_TRY(check_range(h, hd, hd->dst));
    size_t need = HOST_AAD_BYTES + hd->nelem * sizeof(float) + GT_AEAD_TAG_BYTES;
    GT_ENSURE(cap >= need, GT_E_LIMIT, "ring seal: %zu bytes of room, need %zu", cap, need);
    uint64_t seq = h->send_seq[hd->dst];
    GT_ENSURE(seq != UINT64_MAX, GT_E_LIMIT, "ring seal: sequence numbers used up");
    h->send_seq[hd->dst] = seq + 1;  // spent before use: an IV never serves twice
    uint8_t iv[GT_AEAD_IV_BYTES];
    make_iv(iv, hd->src, hd->dst, seq);
    gt_ring_hdr_encode(out, hd, seq);
    memset(out + GT_PEER_HDR_BYTES, 0, 4);  // the label block: none (host floats carry none)
    size_t ct_len = 0;
    GT_TRY(gt_aead_seal(out + HOST_AAD_BYTES, cap - HOST_AAD_BYTES, &ct_len,
                        (const uint8_t *)(h->data + hd->elem_off), hd->nelem * sizeof(float),
                        out, HOST_AAD_BYTES, iv, h->send_key[hd->dst]));
    *len = HOST_AAD_BYTES + ct_len;
    return GT_OK;
}

static gt_err staging_reserve(gt_ring_host *h, uint64_t nelem)
{
    if (nelem <= h->staging_elems) {
        return GT_OK;
    }
    float *s = calloc(nelem, sizeof(float));
    GT_ENSURE(s != NULL, GT_E_NOMEM, "ring open: out of memory");
    if (h->staging != NULL) {
        gt_secure_zero(h->staging, h->staging_elems * sizeof(float));
        free(h->staging);
    }
    h->staging = s;
    h->staging_elems = nelem;
    return GT_OK;
}

// The header is judged first (cheap, and it names what was wrong), then the tag; only then do
// the floats reach the buffer.
static gt_err host_open(void *ctx, const gt_peer_hdr *want, const uint8_t *in, size_t len,
                        int mode)
{
    gt_ring_host *h = ctx;
    GT_ENSURE(want->dst == (uint32_t)h->rank, GT_E_ARG, "ring open: dst %u is not this rank",
              want->dst);
    GT_TRY(check_range(h, want, want->src));
    gt_reader rd = gt_reader_init(in, len);
    gt_peer_hdr got;
    uint64_t seq = 0;
    GT_TRY(gt_ring_hdr_parse(&rd, &got, &seq));
    GT_TRY(gt_ring_hdr_expect(&got, seq, want, h->recv_seq[want->src]));
    uint32_t nlabels = 0;
    GT_TRY(gt_reader_u32le(&rd, &nlabels));
    GT_ENSURE(nlabels == 0, GT_E_AUTH, "chunk rejected: %u labels (a host endpoint takes none)",
              nlabels);
    size_t body = want->nelem * sizeof(float) + GT_AEAD_TAG_BYTES;
    GT_ENSURE(gt_reader_left(&rd) == body, GT_E_AUTH, "chunk rejected: %zu bytes, expected %zu",
              len, HOST_AAD_BYTES + body);
    GT_TRY(staging_reserve(h, want->nelem));
    uint8_t iv[GT_AEAD_IV_BYTES];
    make_iv(iv, want->src, want->dst, seq);
    size_t pt_len = 0;
    gt_err err = gt_aead_open((uint8_t *)h->staging, h->staging_elems * sizeof(float), &pt_len,
                              in + HOST_AAD_BYTES, body, in, HOST_AAD_BYTES, iv,
                              h->recv_key[want->src]);
    GT_ENSURE(gt_is_ok(err), GT_E_AUTH, "chunk rejected: authentication failed (from rank %u)",
              want->src);
    h->recv_seq[want->src] = seq + 1;
    float *dst = h->data + want->elem_off;
    const float *src = h->staging;
    if (mode == GT_PEER_COPY) {
        memcpy(dst, src, want->nelem * sizeof(float));
    } else {
        for (uint64_t i = 0; i < want->nelem; i++) {
            dst[i] += src[i];
        }
    }
    return GT_OK;
}

gt_ring_endpoint gt_ring_host_endpoint(gt_ring_host *h)
{
    return (gt_ring_endpoint){.ctx = h, .seal = host_seal, .open = host_open};
}
