// bench_travel: the travelling load against one AES-256-GCM decryption pass, same run.
// For each size: (a) LOAD_SEALED of a sealed chunk (ciphertext || tag as stored, AES-256-GCM
// under a chunk key, 32-byte chunk AAD) from an attached holder into devd (streamed unchanged
// through the bounce slots, opened once inside devd); (b) one gt_aead_open pass over the same
// bytes in this process; (c) the ordinary copy_in path (session encrypt + devd decrypt) of the
// same plaintext, for comparison; (a') the same load from the chunk file (LOAD_SEALED_FD: devd
// reads the file itself; the file is in the page cache, as the in-memory ciphertext is in RAM).
// Target: travelling >= 0.7x (b). devd runs in a forked child with its
// arena touched once at start; devd start, the trainer's session, lend and the holder's attach
// are one-time setup, reported apart. Median of REPS after a warm-up.
//
// usage: bench_travel [MiB ...]   (default 64 128 256 512)
#include <gputravel/crypto.h>
#include <gputravel/devd.h>
#include <gputravel/device.h>

#include "bench_common.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define REPS 5

static void check(const char *what, gt_err e)
{
    if (!gt_is_ok(e)) {
        fprintf(stderr, "bench_travel: %s: %s\n", what, e.msg);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    size_t sizes_mib[16];
    int nsizes = 0;
    size_t max = bench_sizes_mib(argc, argv, sizes_mib, 16, &nsizes);
    size_t max_bytes = max << 20;
    gt_log_set_level(GT_LOG_ERROR);
    const char *slot = getenv("BENCH_SLOT_KIB");
    bench_devd devd;
    if (bench_devd_start(&devd, "bench-travel",
                         (gt_devd_config){
                             .mem_limit = 2 * (uint64_t)max_bytes + (64u << 20),  // copy_in + load
                             .slot_bytes = slot ? (uint32_t)strtoul(slot, NULL, 10) << 10 : 0,
                         }) != 0) {
        return 1;
    }
    const char *sock = devd.sock, *dir = devd.dir;
    double t_devd = devd.start_s, t0 = 0;

    uint8_t *src = malloc(max_bytes), *pt = malloc(max_bytes);
    uint8_t *ct = malloc(max_bytes + GT_AEAD_TAG_BYTES);
    if (!src || !pt || !ct) {
        fprintf(stderr, "bench_travel: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < max_bytes; i++) {
        src[i] = (uint8_t)(i * 131 + (i >> 13));
    }
    memset(pt, 0, max_bytes);
    memset(ct, 0, max_bytes + GT_AEAD_TAG_BYTES);
    uint8_t key[GT_AEAD_KEY_BYTES], iv[GT_AEAD_IV_BYTES], aad[GT_SIM_LOAD_AAD_BYTES];
    check("random", gt_random_bytes(key, sizeof key));
    check("random", gt_random_bytes(iv, sizeof iv));
    check("random", gt_random_bytes(aad, sizeof aad));

    // the trainer's session and its own buffer (copy_in path)
    t0 = gt_now_seconds();
    gt_device *tr = NULL;
    gt_device_config dc = {.kind = GT_DEVICE_SIM, .socket_path = sock};
    check("trainer open", gt_device_open(&tr, &dc));
    double t_session = gt_now_seconds() - t0;
    gt_dbuf tbuf = 0;
    check("alloc", gt_device_alloc(tr, max_bytes, 0, &tbuf));

    double tin[16][REPS];
    for (int s = 0; s < nsizes; s++) {  // (c) before the lend: the trainer cannot copy_in then
        size_t n = sizes_mib[s] << 20;
        check("copy_in warm-up", gt_device_copy_in(tr, tbuf, 0, src, n));
        for (int r = 0; r < REPS; r++) {
            double a = gt_now_seconds();
            check("copy_in", gt_device_copy_in(tr, tbuf, 0, src, n));
            tin[s][r] = gt_now_seconds() - a;
        }
    }

    t0 = gt_now_seconds();
    uint8_t ticket[GT_SIM_TICKET_BYTES];
    check("lend", gt_device_sim_lend(tr, 3600u * 1000, ticket));
    double t_lend = gt_now_seconds() - t0;
    t0 = gt_now_seconds();
    gt_device *h = NULL;
    gt_device_sim_options opt;
    memset(&opt, 0, sizeof opt);
    check("attach", gt_device_sim_attach(&h, &dc, &opt, ticket));
    double t_attach = gt_now_seconds() - t0;
    gt_dbuf hbuf = 0;
    check("holder alloc", gt_device_alloc(h, max_bytes, 0, &hbuf));

    printf("one-time setup: devd start (arena %zu MiB reserved+touched, identity) %.3f s; "
           "trainer session %.3f s; lend %.6f s; holder attach (attested handshake + ticket) "
           "%.3f s\n", 2 * max + 64, t_devd, t_session, t_lend, t_attach);
    printf("per transfer, median of %d (best of %d in brackets; the ratios use the same statistic "
           "for both sides; MB/s = 10^6 plaintext bytes/s):\n", REPS, REPS);
    printf("%8s | %16s %16s %16s | %15s %15s | %16s %12s\n", "size", "travel mem MB/s",
           "travel file MB/s", "1x decrypt MB/s", "mem/decrypt", "file/decrypt", "copy_in MB/s",
           "copy_in/dec");
    int ok_all = 1;
    for (int s = 0; s < nsizes; s++) {
        size_t n = sizes_mib[s] << 20, l = 0;
        check("seal", gt_aead_seal(ct, n + GT_AEAD_TAG_BYTES, &l, src, n, aad, sizeof aad, iv,
                                   key));
        double tl[REPS], td[REPS], tf[REPS];
        char cpath[300];
        snprintf(cpath, sizeof cpath, "%s/chunk.gtc", dir);
        FILE *fp = fopen(cpath, "wb");
        if (fp == NULL || fwrite(ct, 1, n + GT_AEAD_TAG_BYTES, fp) != n + GT_AEAD_TAG_BYTES ||
            fclose(fp) != 0) {
            fprintf(stderr, "bench_travel: cannot write %s\n", cpath);
            return 1;
        }
        int cfd = open(cpath, O_RDONLY | O_CLOEXEC);
        if (cfd < 0) {
            perror("open");
            return 1;
        }
        check("file load warm-up", gt_device_sim_load_sealed_fd(h, hbuf, 0, cfd, 0,
                                                                n + GT_AEAD_TAG_BYTES, iv, aad,
                                                                key, 0));
        check("load warm-up", gt_device_sim_load_sealed(h, hbuf, 0, ct, n + GT_AEAD_TAG_BYTES,
                                                        iv, aad, key, 0));
        for (int r = 0; r < REPS; r++) {
            double a = gt_now_seconds();
            check("load_sealed", gt_device_sim_load_sealed(h, hbuf, 0, ct, n + GT_AEAD_TAG_BYTES,
                                                           iv, aad, key, 0));
            double b = gt_now_seconds();
            check("decrypt", gt_aead_open(pt, n, &l, ct, n + GT_AEAD_TAG_BYTES, aad, sizeof aad,
                                          iv, key));
            double c = gt_now_seconds();
            check("load_sealed_fd", gt_device_sim_load_sealed_fd(h, hbuf, 0, cfd, 0,
                                                                 n + GT_AEAD_TAG_BYTES, iv, aad,
                                                                 key, 0));
            tl[r] = b - a;
            td[r] = c - b;
            tf[r] = gt_now_seconds() - c;
        }
        close(cfd);
        unlink(cpath);
        if (memcmp(pt, src, n) != 0) {
            fprintf(stderr, "bench_travel: decryption mismatch\n");
            return 1;
        }
        double tb = (double)n / bench_best(tl, REPS) / 1e6, db = (double)n / bench_best(td, REPS) / 1e6;
        double ib = (double)n / bench_best(tin[s], REPS) / 1e6, fb = (double)n / bench_best(tf, REPS) / 1e6;
        double travel = (double)n / bench_median(tl, REPS) / 1e6;
        double file = (double)n / bench_median(tf, REPS) / 1e6;
        double dec = (double)n / bench_median(td, REPS) / 1e6;
        double in = (double)n / bench_median(tin[s], REPS) / 1e6;
        printf("%5zu MiB | %7.0f [%6.0f] %7.0f [%6.0f] %7.0f [%6.0f] | %5.2fx [%5.2fx] "
               "%5.2fx [%5.2fx] | %7.0f [%6.0f] %5.2fx [%4.2fx]\n", sizes_mib[s], travel, tb,
               file, fb, dec, db, travel / dec, tb / db, file / dec, fb / db, in, ib, in / dec,
               ib / db);
        travel = travel > file ? travel : file;  // the better travelling path
        ok_all &= travel / dec >= 0.7;
    }
    check("return", gt_device_sim_return(h));
    gt_device_close(h);
    gt_device_sim_loaded loaded[4];
    size_t count = 0;
    check("wait_return", gt_device_sim_wait_return(tr, 10000, loaded, 4, &count));
    printf("returned: %zu buffer(s) loaded (%llu bytes)\n", count,
           count ? (unsigned long long)loaded[0].bytes : 0ull);
    printf("target travelling (better of mem/file, median) >= 0.7x one decryption pass: %s\n",
           ok_all ? "met at every size" : "NOT met at every size");
    gt_device_close(tr);
    bench_devd_stop(&devd, true);
    gt_secure_zero(key, sizeof key);
    free(src);
    free(pt);
    free(ct);
    return ok_all ? 0 : 2;
}
