// Fuzz: everything that crosses into or out of an enclave process is untrusted: the session
// messages, the start and hello messages, and the REPORT / KEYREQUEST / TARGETINFO structures
// ENCLU emulation reads from enclave memory. The first byte picks the parser; whatever parses
// must encode back to the same bytes (no field dropped or invented).
#include <gputravel/enclave.h>

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    switch (data[0] % 6) {
    case 0: session_msg(d, n); break;
    case 1: start_msg(d, n); break;
    case 2: hello_msg(d, n); break;
    default: sgx_structs(data[0] % 6, d, n); break;
    }
    return 0;
}
