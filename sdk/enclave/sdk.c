// The trusted side of an ECALL and an OCALL: the marshalling block and every buffer it names
// must lie outside the enclave (else a host could make the enclave read or overwrite its own
// secrets), inputs are copied in before the ECALL runs and outputs copied out after, so the
// host never sees or changes enclave buffers while enclave code uses them.
#include "gtsdk.h"

#pragma GCC visibility push(hidden)

extern const gtsdk_ecall_fn gtsdk_ecalls[];
extern const size_t gtsdk_ecall_count;
extern unsigned long long gtsdk_oret_len;
long gtsdk_ocall_raw(unsigned long number, unsigned long request_len);
long gtsdk_dispatch(unsigned long number, const gtsdk_ms *ms);

// The ELRANGE: [GTSDK_BASE, GTSDK_BASE + size), size the power of two the loader chose, which
// the image's own end fixes (the flat format's rule).
extern const char gtsdk_image_end[];

#pragma GCC visibility pop

static uint8_t staged_in[GTSDK_IO_BYTES];
static uint8_t staged_out[GTSDK_IO_BYTES];
static gtsdk_ms current;  // the marshalling block of the ECALL running, as copied in

static unsigned long long elrange_size(void)
{
    unsigned long long used = (unsigned long long)(gtsdk_image_end - (const char *)GTSDK_BASE);
    unsigned long long size = 8192;
    while (size < used) {
        size <<= 1;
    }
    return size;
}

// [p, p + n) lies wholly outside ELRANGE (and does not wrap).
static int outside_enclave(unsigned long long p, unsigned long long n)
{
    unsigned long long base = GTSDK_BASE, end = GTSDK_BASE + elrange_size();
    if (p + n < p) {
        return 0;
    }
    return p + n <= base || p >= end;
}

long gtsdk_dispatch(unsigned long number, const gtsdk_ms *ms)
{
    if (!outside_enclave((unsigned long long)ms, sizeof *ms)) {
        return GTSDK_E_BADARG;
    }
    current = *ms;  // read once: the host may change its copy meanwhile
    if (current.in_len > GTSDK_IO_BYTES || current.out_cap > GTSDK_IO_BYTES ||
        !outside_enclave(current.in, current.in_len) ||
        !outside_enclave(current.out, current.out_cap) ||
        !outside_enclave(current.ocall_buf, current.ocall_cap) ||
        !outside_enclave((unsigned long long)&((gtsdk_ms *)ms)->out_len, 8)) {
        return GTSDK_E_BADARG;
    }
    if (number >= gtsdk_ecall_count || gtsdk_ecalls[number] == 0) {
        return GTSDK_E_NOECALL;
    }
    memcpy(staged_in, (const void *)current.in, current.in_len);
    size_t out_len = 0;
    long status = gtsdk_ecalls[number](staged_in, current.in_len, staged_out, current.out_cap,
                                       &out_len);
    if (out_len > current.out_cap) {
        out_len = current.out_cap;
    }
    memcpy((void *)current.out, staged_out, out_len);
    ((gtsdk_ms *)ms)->out_len = out_len;
    // What the ECALL was given and what it returned (both stay inside the enclave; wiping all
    // 64 KiB byte by byte cost about 65k cycles an ECALL, four times the round trip's goal).
    // Scratch an ECALL leaves in staged_out past out_len is overwritten by a later one.
    gtsdk_wipe(staged_in, current.in_len);
    gtsdk_wipe(staged_out, out_len);
    return status;
}

long gtsdk_ocall(uint32_t n, const void *in, size_t in_len, void *out, size_t out_cap,
                 size_t *out_len)
{
    *out_len = 0;
    if (in_len > current.ocall_cap) {
        return GTSDK_E_BADARG;
    }
    memcpy((void *)current.ocall_buf, in, in_len);
    long status = gtsdk_ocall_raw(n, in_len);
    unsigned long long reply = gtsdk_oret_len;
    if (reply > out_cap || reply > current.ocall_cap) {
        return GTSDK_E_OCALL;
    }
    memcpy(out, (const void *)current.ocall_buf, reply);
    *out_len = reply;
    return status;
}

void *memcpy(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    for (size_t i = 0; i < n; i++) {
        d[i] = s[i];
    }
    return dst;
}

void *memmove(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if (d < s) {
        return memcpy(dst, src, n);
    }
    for (size_t i = n; i > 0; i--) {
        d[i - 1] = s[i - 1];
    }
    return dst;
}

void *memset(void *dst, int c, size_t n)
{
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++) {
        d[i] = (uint8_t)c;
    }
    return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != y[i]) {
            return x[i] < y[i] ? -1 : 1;
        }
    }
    return 0;
}

void gtsdk_wipe(void *p, size_t n)
{
    // rep stosb: fast on every x86-64 with ERMS, and an asm the compiler cannot drop as a dead
    // store (the memory clobber says it is read).
    __asm__ volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(0) : "memory");
}
