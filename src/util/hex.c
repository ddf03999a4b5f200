// Hex encoding for display, JSON claims and command-line arguments.
#include <gputravel/util.h>

#include <assert.h>
#include <string.h>

void gt_hex_encode(char *out, size_t out_cap, const void *in, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    assert(out_cap >= 2 * n + 1);
    const uint8_t *p = in;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static int nibble(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

gt_err gt_hex_decode(uint8_t *out, size_t out_cap, size_t *out_len, const char *hex)
{
    size_t n = strlen(hex);
    *out_len = 0;
    GT_ENSURE(n % 2 == 0, GT_E_FORMAT, "hex: odd number of digits (%zu)", n);
    GT_ENSURE(n / 2 <= out_cap, GT_E_LIMIT, "hex: %zu bytes do not fit in %zu", n / 2, out_cap);
    for (size_t i = 0; i < n / 2; i++) {
        int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
        GT_ENSURE(hi >= 0 && lo >= 0, GT_E_FORMAT, "hex: not a hex digit at position %zu",
                  hi < 0 ? 2 * i : 2 * i + 1);
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    *out_len = n / 2;
    return GT_OK;
}

gt_err gt_hex_decode_exact(uint8_t *out, size_t n, const char *hex)
{
    size_t len = strlen(hex);
    GT_ENSURE(len == 2 * n, GT_E_FORMAT, "hex: expected %zu digits (%zu bytes), got %zu", 2 * n,
              n, len);
    size_t got = 0;
    return gt_hex_decode(out, n, &got, hex);
}
