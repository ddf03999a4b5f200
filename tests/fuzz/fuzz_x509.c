// Fuzz target: arbitrary bytes as a DER certificate and as a PEM bundle. Every parsed
// certificate is also asked for its CN, an extension and its public key.
#include <gputravel/crypto.h>

#include <stdlib.h>

static void poke(const gt_x509 *c)
{
    char cn[64];
    gt_x509_subject_cn(c, cn, sizeof cn);
    gt_span v = {0};
    if (gt_is_ok(gt_x509_extension(c, "1.2.840.113741.1.13.1", &v)) && v.len > 0) {
        volatile uint8_t first = v.data[0];
        volatile uint8_t last = v.data[v.len - 1];
        (void)first;
        (void)last;
    }
    gt_pkey *k = NULL;
    if (gt_is_ok(gt_x509_public_key(c, &k))) {
        uint8_t xy[160];
        size_t n = 0;
        if (gt_is_ok(gt_pkey_ec_public_xy(k, xy, sizeof xy, &n))) {
            volatile uint8_t b = xy[n - 1];
            (void)b;
        }
        gt_pkey_free(k);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gt_x509 *c = NULL;
    if (gt_is_ok(gt_x509_parse_der(&c, data, size))) {
        poke(c);
        gt_x509_free(c);
    }
    gt_x509 **all = NULL;
    size_t count = 0;
    if (gt_is_ok(gt_x509_parse_pem_all(&all, &count, (const char *)data, size))) {
        for (size_t i = 0; i < count; i++) {
            poke(all[i]);
            gt_x509_free(all[i]);
        }
        free(all);
    }
    return 0;
}
