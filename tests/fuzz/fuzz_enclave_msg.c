// Fuzz: everything that crosses into or out of an enclave process is untrusted: the session
// messages, the start and hello messages, the REPORT / KEYREQUEST / TARGETINFO structures ENCLU
// emulation reads from enclave memory, and the head of a shared-memory ring slot. The first
// byte picks the parser; whatever parses must encode back to the same bytes (no field dropped
// or invented; a ring head must name a frame inside its slot).
#include <gputravel/enclave.h>

#include "enclave/run.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (memcmp(a, b, n) != 0) {
        __builtin_trap();
    }
}

static void session_msg(const uint8_t *d, size_t n)
{
    gt_enclave_msg m;
    if (!gt_is_ok(gt_enclave_msg_parse(d, n, &m))) {
        return;
    }
    gt_writer w = gt_writer_init_dynamic();
    if (!gt_is_ok(gt_enclave_msg_encode(&w, &m)) || w.len != n) {
        __builtin_trap();
    }
    same(w.data, d, n);
    gt_writer_free(&w);
}

static void start_msg(const uint8_t *d, size_t n)
{
    gt_enclave_start_msg m;
    if (!gt_is_ok(gt_enclave_start_parse(d, n, &m))) {
        return;
    }
    gt_writer w = gt_writer_init_dynamic();
    if (!gt_is_ok(gt_enclave_start_encode(&w, &m)) || w.len != n) {
        __builtin_trap();
    }
    same(w.data, d, n);
    gt_writer_free(&w);
}

static void hello_msg(const uint8_t *d, size_t n)
{
    gt_enclave_hello_msg m;
    if (!gt_is_ok(gt_enclave_hello_parse(d, n, &m))) {
        return;
    }
    gt_writer w = gt_writer_init_dynamic();
    if (!gt_is_ok(gt_enclave_hello_encode(&w, &m)) || w.len != n) {
        __builtin_trap();
    }
    if (m.ok) {  // a refusal's text is made printable, so only accepted hellos compare
        same(w.data, d, n);
    }
    gt_writer_free(&w);
}

static void sgx_structs(uint8_t which, const uint8_t *d, size_t n)
{
    uint8_t out[512];
    if (which == 3) {
        gt_sgx_report r;
        if (gt_is_ok(gt_sgx_report_decode(d, n, &r))) {
            gt_sgx_report_write(&r, out);
            same(out, d, GT_SGX_REPORT_BYTES);
        }
    } else if (which == 4) {
        gt_sgx_keyrequest k;
        if (gt_is_ok(gt_sgx_keyrequest_parse(d, n, &k))) {
            gt_sgx_keyrequest_encode(&k, out);
            same(out, d, GT_SGX_KEYREQUEST_BYTES);
        }
    } else {
        gt_sgx_targetinfo t;
        if (gt_is_ok(gt_sgx_targetinfo_parse(d, n, &t))) {
            gt_sgx_targetinfo_encode(&t, out);
            same(out, d, GT_SGX_TARGETINFO_BYTES);
        }
    }
}

// A slot's head as the receiver copies it out of the shared ring (src/enclave/ring.c), the rest
// standing for the slot's frame area: a head that parses names a frame that lies wholly inside
// the slot and fits the largest frame.
static void ring_head(const uint8_t *d, size_t n)
{
    if (n < GT_ENCLAVE_RING_HEAD_BYTES) {
        uint32_t seq = 0, len = 0;
        if (gt_is_ok(gt_enclave_ring_head_parse(d, n, 0, &seq, &len))) {
            __builtin_trap();  // too short to be a head
        }
        return;
    }
    uint32_t seq = 0, len = 0;
    size_t cap = n - GT_ENCLAVE_RING_HEAD_BYTES;
    if (gt_is_ok(gt_enclave_ring_head_parse(d, GT_ENCLAVE_RING_HEAD_BYTES, cap, &seq, &len)) &&
        (len > cap || len > GT_ENCLAVE_RING_FRAME_MAX || len < GT_AEAD_TAG_BYTES)) {
        __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    switch (data[0] % 7) {
    case 0: session_msg(d, n); break;
    case 1: start_msg(d, n); break;
    case 2: hello_msg(d, n); break;
    case 6: ring_head(d, n); break;
    default: sgx_structs(data[0] % 7, d, n); break;
    }
    return 0;
}
