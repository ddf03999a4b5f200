// bench_segchunk: what the segmented chunk format (GTCHUNK2, docs/formats.md) buys a device that
// opens a chunk on two cores, in this process, no disk, no devd: for one chunk of M MiB, each
// round times (a) one AES-256-GCM open of a GTCHUNK1 body (the one-pass baseline), (b) the same
// plaintext as a GTCHUNK2 body opened on one thread, (c) that body on two threads
// (gt_chunk_body_open, as devd's file path splits it). The three are timed back to back in a
// rotating order each round, and the ratios are per round (paired), so the machine's drift
// between rounds cancels. A shared machine's other load takes the second core away: run
// `uptime` beside it.
//
// usage: bench_segchunk [--mib M] [--runs N] [--seg BYTES]   (defaults 512, 9, 4 MiB)
#include <gputravel/seal.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(const char *what, gt_err e)
{
    if (!gt_is_ok(e)) {
        fprintf(stderr, "bench_segchunk: %s: %s\n", what, e.msg);
        exit(1);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The GTCHUNK2 body of pt under key, iv, aad with segments of seg bytes (seal.h's derivation).
static void seal_segments(uint8_t *body, const uint8_t *pt, uint64_t n, uint32_t seg,
                          const uint8_t *iv, const uint8_t *aad, const uint8_t *key)
{
    uint64_t nseg = gt_chunk_seg_count(n, seg);
    for (uint64_t j = 0; j < nseg; j++) {
        uint64_t m = gt_chunk_seg_plain_bytes(n, seg, j);
        uint8_t nonce[GT_AEAD_IV_BYTES], sa[GT_CHUNK_SEG_AAD_BYTES];
        size_t sa_len = 0, out = 0;
        gt_chunk_seg_nonce(nonce, iv, seg, j);
        gt_chunk_seg_aad(sa, &sa_len, aad, seg, j, nseg);
        check("seal segment", gt_aead_seal(body + gt_chunk_seg_body_offset(seg, j), m + 16, &out,
                                           pt + j * seg, m, sa, sa_len, nonce, key));
    }
}

int main(int argc, char **argv)
{
    uint64_t mib = 512;
    int runs = 9;
    uint32_t seg = GT_CHUNK_SEG_DEFAULT_BYTES;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mib") == 0) {
            mib = strtoull(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--runs") == 0) {
            runs = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--seg") == 0) {
            seg = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        }
    }
    if (mib < 1 || mib > 4096 || runs < 1 || runs > 99 || !gt_is_ok(gt_chunk_seg_check(seg)) ||
        seg == 0) {
        fprintf(stderr, "usage: bench_segchunk [--mib 1..4096] [--runs 1..99] [--seg BYTES, a "
                        "multiple of 4096]\n");
        return 2;
    }
    const uint64_t n = mib << 20;
    uint8_t key[32], iv[12], aad[32];
    check("random", gt_random_bytes(key, sizeof key));
    check("random", gt_random_bytes(iv, sizeof iv));
    check("random", gt_random_bytes(aad, sizeof aad));
    uint8_t *pt = malloc(n), *out = malloc(n);
    uint8_t *v1 = malloc(n + 16), *v2 = malloc(gt_chunk_body_bytes(n, seg));
    if (pt == NULL || out == NULL || v1 == NULL || v2 == NULL) {
        fprintf(stderr, "bench_segchunk: out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        pt[i] = (uint8_t)(i * 2654435761u >> 13);
    }
    memset(out, 0, n);  // touched before timing, as device memory is
    size_t l = 0;
    check("seal v1", gt_aead_seal(v1, n + 16, &l, pt, n, aad, sizeof aad, iv, key));
    seal_segments(v2, pt, n, seg, iv, aad, key);
    double t[3][100], r_a[100], r_b[100];
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < 3; k++) {
            int which = (r + k) % 3;
            double t0 = gt_now_seconds();
            if (which == 0) {
                check("open v1", gt_aead_open(out, n, &l, v1, n + 16, aad, sizeof aad, iv, key));
            } else {
                check("open v2", gt_chunk_body_open(out, v2, gt_chunk_body_bytes(n, seg), n, seg,
                                                    which, iv, aad, key));
            }
            t[which][r] = gt_now_seconds() - t0;
        }
        if (memcmp(out, pt, n) != 0) {
            fprintf(stderr, "bench_segchunk: plaintext differs\n");
            return 1;
        }
        r_a[r] = t[0][r] / t[2][r];
        r_b[r] = t[1][r] / t[2][r];
    }
    double m1 = median(t[0], runs), m2 = median(t[1], runs), m3 = median(t[2], runs);
    printf("chunk %llu MiB, GTCHUNK2 segments of %u bytes (%llu), %d rounds, medians:\n",
           (unsigned long long)mib, seg, (unsigned long long)gt_chunk_seg_count(n, seg), runs);
    printf("  GTCHUNK1, one GCM pass        %.4f s  %.2f GB/s\n", m1, (double)n / m1 / 1e9);
    printf("  GTCHUNK2, one thread          %.4f s  %.2f GB/s\n", m2, (double)n / m2 / 1e9);
    printf("  GTCHUNK2, two threads         %.4f s  %.2f GB/s\n", m3, (double)n / m3 / 1e9);
    printf("paired ratios (median of per-round): one GCM pass / two threads %.2fx, "
           "GTCHUNK2 one thread / two threads %.2fx\n",
           median(r_a, runs), median(r_b, runs));
    gt_secure_zero(key, sizeof key);
    free(pt);
    free(out);
    free(v1);
    free(v2);
    return 0;
}
