// bench_seal: sealing against the tool a holder would otherwise use, age (age-encryption.org),
// side by side in one run, and the per-core tables of the cipher alone.
//
//   bench_seal [--mib N] [--runs R] [--dir DIR] [--cli PATH] [--png FILE]   (vs age; default)
//   bench_seal --cpu [--mib N] [--rss-gib G] [--dir DIR] [--no-openssl-cli]
//
// vs age (issue 18): an N MiB token shard (default 512) in DIR (default /tmp: a real disk, so
// that durability costs what it costs) is sealed with `gputravel seal` and encrypted with
// `age -r`, then unsealed with `gputravel unseal` and decrypted with `age -d -i`, each a child
// process timed in wall seconds, run R times (default 5) interleaved pair by pair (the order
// within a pair alternates). Same bytes, same disk; before each decryption both inputs are read
// once so that both start from the page cache (seal writes past the cache, age through it). The
// copy row is what durability costs a plain buffered copy of the same bytes (read, write, fsync,
// like cp + sync) in this process, timed each round; sealing writes with O_DIRECT and can beat
// it. A one-core SHA-256 pass over the bytes shows seal's own floor (its hash is sequential). gputravel keeps what age does not
// do: a signed manifest, keyless verification, constant memory, atomic output and an fsync
// before the rename; so the table also shows what age's output takes to become durable (an
// fsync of it right after age exits). Medians with min..max; ratios are age / gputravel
// (>= 1: gputravel is at least as fast). A PNG (gt_plot_bars) goes to --png (default
// DIR/bench-seal-vs-age.png). age is installed with apt-get when missing.
//
// --cpu: the older per-core tables:
// 1. Reference: `openssl speed -evp aes-256-gcm -bytes 16384` (popen, 16384-byte column), and
//    the same cipher timed through EVP in this process (16 KiB updates on one stream).
// 2. Seal, verify-dataset and unseal an N MiB shard (default 256) with 64 MiB chunks, in DIR,
//    timed in CPU seconds of this process (user + system; openssl speed counts CPU time too)
//    (default /dev/shm when present, so that the file system is memory and fsync costs nothing:
//    this measures the sealing, not the disk). Best of 5.
// 3. Peak RSS of a child process that seals a G GiB (default 2) sparse shard in /tmp with the
//    default 512 MiB chunks, and of one sealing the N MiB shard with 64 MiB chunks.
#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <openssl/evp.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

// CPU seconds (user + system) this process has used: the "one core" clock. `openssl speed`
// also counts CPU time by default (it has -elapsed for wall time), so the two compare on a
// machine shared with other work.
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static void die(const char *what, gt_err e)
{
    fprintf(stderr, "bench_seal: %s: %s\n", what, e.msg);
    exit(1);
}

// OpenSSL's own number: the 16384-byte column of `openssl speed`, in bytes per second.
static double openssl_cli_gcm(void)
{
    FILE *p = popen("openssl speed -seconds 3 -bytes 16384 -evp aes-256-gcm 2>/dev/null", "r");
    if (p == NULL) {
        return 0;
    }
    char line[512];
    double kbs = 0;
    while (fgets(line, sizeof line, p) != NULL) {
        double v = 0;
        // "AES-256-GCM    3769761.79k" (the last table row)
        if (strncmp(line, "AES-256-GCM", 11) == 0 && sscanf(line + 11, " %lfk", &v) == 1) {
            kbs = v;
        }
    }
    pclose(p);
    return kbs * 1000.0;
}

// The same cipher through EVP in this process: one GCM stream, 16 KiB updates, ~1 s.
static double evp_gcm(void)
{
    enum { BLOCK = 16384 };
    static uint8_t buf[BLOCK];
    uint8_t key[32] = {1}, iv[12] = {2};
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, iv);
    int n = 0;
    uint64_t bytes = 0;
    double t0 = cpu_seconds(), t = t0;
    while (t - t0 < 1.0) {
        for (int i = 0; i < 256; i++) {
            EVP_EncryptUpdate(c, buf, &n, buf, BLOCK);
        }
        bytes += 256ull * BLOCK;
        t = cpu_seconds();
    }
    EVP_CIPHER_CTX_free(c);
    return (double)bytes / (t - t0);
}

static double sha256_speed(void)
{
    enum { BLOCK = 1 << 20 };
    uint8_t *buf = calloc(1, BLOCK), out[32];
    gt_hash_ctx *h = NULL;
    if (buf == NULL || gt_hash_new(&h, GT_HASH_SHA256).code != GT_E_NONE) {
        exit(1);
    }
    uint64_t bytes = 0;
    double t0 = cpu_seconds(), t = t0;
    while (t - t0 < 1.0) {
        if (gt_hash_update(h, buf, BLOCK).code != GT_E_NONE) {
            exit(1);
        }
        bytes += BLOCK;
        t = cpu_seconds();
    }
    if (gt_hash_final(h, out).code != GT_E_NONE) {
        exit(1);
    }
    gt_hash_free(h);
    free(buf);
    return (double)bytes / (t - t0);
}

// A shard of `tokens` pseudo-random GPT-2 tokens (or, sparse, all zero: a hole).
static void make_shard(const char *path, uint64_t tokens, bool sparse)
{
    FILE *fp = fopen(path, "wb");
    if (fp == NULL) {
        perror(path);
        exit(1);
    }
    uint8_t hdr[GT_SHARD_HEADER_BYTES];
    gt_shard_header_build(hdr, tokens);
    fwrite(hdr, 1, sizeof hdr, fp);
    if (sparse) {
        if (ftruncate(fileno(fp), (off_t)(sizeof hdr + 2 * tokens)) != 0) {
            perror("ftruncate");
            exit(1);
        }
    } else {
        enum { N = 1 << 19 };
        uint16_t *t = malloc(N * sizeof *t);
        uint64_t x = 88172645463325252ull;
        for (uint64_t done = 0; done < tokens;) {
            size_t n = tokens - done < N ? (size_t)(tokens - done) : N;
            for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                t[i] = (uint16_t)(x % 50257);
            }
            fwrite(t, 2, n, fp);
            done += n;
        }
        free(t);
    }
    fclose(fp);
}

// The I/O floor: read every chunk file of dsdir and write it into one new file, through the
// same GT_SEAL_IO_BYTES buffer and the same system calls as unseal, with no cryptography. Returns CPU s.
static double copy_floor(const char *dsdir, uint32_t chunks, const char *dst)
{
    uint8_t *buf = malloc(GT_SEAL_IO_BYTES);
    double t0 = cpu_seconds();
    FILE *out = fopen(dst, "wb");
    for (uint32_t i = 0; i < chunks && out != NULL && buf != NULL; i++) {
        char p[4096];
        if (gt_chunk_path(p, sizeof p, dsdir, i).code != GT_E_NONE) {
            break;
        }
        int fd = open(p, O_RDONLY);
        ssize_t n;
        while (fd >= 0 && (n = read(fd, buf, GT_SEAL_IO_BYTES)) > 0) {
            fwrite(buf, 1, (size_t)n, out);
        }
        if (fd >= 0) {
            close(fd);
        }
    }
    if (out != NULL) {
        fflush(out);
        fsync(fileno(out));
        fclose(out);
    }
    double t = cpu_seconds() - t0;
    unlink(dst);
    free(buf);
    return t;
}

// The travelling-device path: one whole chunk already in memory, opened with its key alone.
static double chunk_open_in_memory(const char *dsdir, const gt_holder_keys *keys)
{
    gt_manifest m;
    gt_err e = gt_manifest_load(&m, dsdir);
    if (e.code != GT_E_NONE) {
        die("manifest", e);
    }
    char p[4096];
    gt_buf file = {0};
    if ((e = gt_chunk_path(p, sizeof p, dsdir, 0)).code != GT_E_NONE ||
        (e = gt_file_read_all(p, 1ull << 31, &file)).code != GT_E_NONE) {
        die("chunk", e);
    }
    size_t cap = (size_t)m.chunks[0].plaintext_len, len = 0;
    uint8_t *pt = malloc(cap), key[GT_AEAD_KEY_BYTES];
    if (pt == NULL || (e = gt_chunk_key_derive(key, keys->dataset_key, &m, 0)).code != GT_E_NONE) {
        die("chunk key", e);
    }
    memset(pt, 0, cap);  // touch once: measure the cipher, not first-touch page faults
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = cpu_seconds();
        if ((e = gt_chunk_open(pt, cap, &len, file.data, file.len, &m, 0, key)).code != GT_E_NONE) {
            die("chunk open", e);
        }
        double t = cpu_seconds() - t0;
        best = t < best ? t : best;
    }
    gt_secure_zero(key, sizeof key);
    gt_secure_zero(pt, cap);
    free(pt);
    gt_buf_free_nowipe(&file);
    gt_manifest_free(&m);
    return (double)cap / best;
}

static void rm_dataset(const char *dsdir, uint32_t max_chunks)
{
    char p[4400];
    for (uint32_t i = 0; i < max_chunks; i++) {
        if (gt_chunk_path(p, sizeof p, dsdir, i).code == GT_E_NONE) {
            unlink(p);
        }
    }
    snprintf(p, sizeof p, "%s/%s", dsdir, GT_MANIFEST_FILE);
    unlink(p);
    rmdir(dsdir);
}

// Peak RSS (KiB) of a child that seals `shard` into `dsdir`.
static long child_seal_rss(const char *shard, const char *dsdir, uint64_t chunk,
                           const gt_holder_keys *keys, double *secs)
{
    double t0 = gt_now_seconds();
    pid_t pid = fork();
    if (pid == 0) {
        const char *shards[] = {shard};
        gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = dsdir,
                            .chunk_size = chunk, .vocab_size = 50257};
        gt_seal_result r;
        gt_err e = gt_seal(&p, keys, &r);
        if (e.code != GT_E_NONE) {
            fprintf(stderr, "seal: %s\n", e.msg);
        }
        _exit(e.code == GT_E_NONE ? 0 : 1);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    wait4(pid, &status, 0, &ru);
    *secs = gt_now_seconds() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_seal: child seal failed\n");
        exit(1);
    }
    return ru.ru_maxrss;
}

static int cpu_tables(int argc, char **argv)
{
    uint64_t mib = 256, rss_gib = 2;
    const char *dir = NULL;
    bool cli = true;
    static const struct option opts[] = {{"mib", required_argument, NULL, 'm'},
                                         {"rss-gib", required_argument, NULL, 'r'},
                                         {"dir", required_argument, NULL, 'd'},
                                         {"no-openssl-cli", no_argument, NULL, 'n'},
                                         {"cpu", no_argument, NULL, 'C'},
                                         {0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mib = strtoull(optarg, NULL, 10); break;
        case 'r': rss_gib = strtoull(optarg, NULL, 10); break;
        case 'd': dir = optarg; break;
        case 'n': cli = false; break;
        case 'C': break;
        default:
            fprintf(stderr, "usage: bench_seal [--mib N] [--rss-gib G] [--dir DIR] "
                            "[--no-openssl-cli]\n");
            return 64;
        }
    }
    struct stat st;
    if (dir == NULL) {
        dir = stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp";
    }
    char work[4096], keys_dir[4200], shard[4200], ds[4200], out[4200];
    snprintf(work, sizeof work, "%s/bench-seal-XXXXXX", dir);
    if (mkdtemp(work) == NULL) {
        perror(work);
        return 1;
    }
    snprintf(keys_dir, sizeof keys_dir, "%s/keys", work);
    snprintf(shard, sizeof shard, "%s/in.bin", work);
    snprintf(ds, sizeof ds, "%s/ds", work);
    snprintf(out, sizeof out, "%s/out.bin", work);
    gt_holder_keys keys;
    gt_err e = gt_keydir_generate(keys_dir, false, &keys);
    if (e.code != GT_E_NONE) {
        die("keygen", e);
    }

    printf("bench_seal: one core, AES-256-GCM; files in %s\n\n", dir);
    double ref_cli = cli ? openssl_cli_gcm() : 0;
    double ref_evp = 0, sha = 0;

    uint64_t tokens = mib << 19;  // mib MiB of uint16 tokens
    make_shard(shard, tokens, false);
    const uint64_t chunk = 64ull << 20;
    double best_seal = 1e9, best_verify = 1e9, best_unseal = 1e9, best_copy = 1e9;
    uint32_t chunk_count = (uint32_t)((2 * tokens + chunk - 1) / chunk);
    for (int rep = 0; rep < 5; rep++) {
        double v = evp_gcm();  // interleaved, so that reference and subject see the same load
        ref_evp = v > ref_evp ? v : ref_evp;
        v = sha256_speed();
        sha = v > sha ? v : sha;
        rm_dataset(ds, 1024);
        unlink(out);
        const char *shards[] = {shard};
        gt_seal_params p = {.shards = shards, .shard_count = 1, .out_dir = ds,
                            .chunk_size = chunk, .vocab_size = 50257};
        gt_seal_result r;
        double t0 = cpu_seconds();
        if ((e = gt_seal(&p, &keys, &r)).code != GT_E_NONE) {
            die("seal", e);
        }
        double t1 = cpu_seconds();
        if ((e = gt_dataset_verify(ds, NULL, false, NULL)).code != GT_E_NONE) {
            die("verify", e);
        }
        double t2 = cpu_seconds();
        if ((e = gt_unseal(ds, &keys, out, false, NULL)).code != GT_E_NONE) {
            die("unseal", e);
        }
        double t3 = cpu_seconds();
        best_seal = t1 - t0 < best_seal ? t1 - t0 : best_seal;
        best_verify = t2 - t1 < best_verify ? t2 - t1 : best_verify;
        best_unseal = t3 - t2 < best_unseal ? t3 - t2 : best_unseal;
        unlink(out);
        double tc = copy_floor(ds, chunk_count, out);
        best_copy = tc < best_copy ? tc : best_copy;
    }
    double in_memory = chunk_open_in_memory(ds, &keys);
    double bytes = (double)(2 * tokens);
    double seal = bytes / best_seal, verify = bytes / best_verify, unseal = bytes / best_unseal;
    double copy = bytes / best_copy;
    // the best a pipeline can do that moves the bytes through files and runs the cipher (and,
    // for seal, SHA-256) on one core: 1 / (sum of the per-byte costs)
    double unseal_bound = 1.0 / (1.0 / copy + 1.0 / ref_evp);
    double seal_io_bound = 1.0 / (1.0 / copy + 1.0 / ref_evp + 1.0 / sha);
    // seal = encrypt + SHA-256 of every ciphertext byte: at best 1 / (1/gcm + 1/sha)
    double seal_bound = 1.0 / (1.0 / ref_evp + 1.0 / sha);

    const double M = 1e6;
    struct {
        const char *what;
        double rate;
    } rows[] = {
        {"openssl speed -evp aes-256-gcm (16384 B)", ref_cli},
        {"EVP aes-256-gcm in this process (16 KiB)", ref_evp},
        {"SHA-256 in this process (1 MiB)", sha},
        {"unseal (read, GCM decrypt+verify, write)", unseal},
        {"seal (read, GCM encrypt, SHA-256, write)", seal},
        {"verify-dataset (read, SHA-256; no key)", verify},
        {"I/O floor: read + write files, no crypto", copy},
        {"  seal bound without I/O: 1/(1/GCM + 1/SHA)", seal_bound},
        {"  unseal bound: 1/(1/I/O + 1/GCM)", unseal_bound},
        {"  seal bound: 1/(1/I/O + 1/GCM + 1/SHA-256)", seal_io_bound},
        {"one 64 MiB chunk opened in memory (device)", in_memory},
    };
    printf("%-44s %8s %14s %12s\n", "operation (one core)", "MB/s", "/openssl speed", "/EVP here");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        printf("%-44s %8.0f %14.2f %12.2f\n", rows[i].what, rows[i].rate / M,
               ref_cli > 0 ? rows[i].rate / ref_cli : 0.0, rows[i].rate / ref_evp);
    }
    printf("unseal reaches %.0f%% of its I/O + GCM bound, seal %.0f%% of its I/O + GCM + SHA "
           "bound\n",
           100 * unseal / unseal_bound, 100 * seal / seal_io_bound);
    printf("(MB/s per CPU-second, user + system; %llu MiB of tokens, 64 MiB chunks, best of 5;\n"
           " 'EVP here' is measured interleaved with each run; target: >= 0.80 of OpenSSL)\n\n",
           (unsigned long long)mib);

    printf("%-44s %10s %10s\n", "peak RSS of a child process sealing", "RSS MiB", "seconds");
    double secs = 0;
    rm_dataset(ds, 1024);
    long rss = child_seal_rss(shard, ds, chunk, &keys, &secs);
    printf("%-44s %10.1f %10.2f\n", "  the shard above, 64 MiB chunks", rss / 1024.0, secs);
    rm_dataset(ds, 1024);
    unlink(out);
    unlink(shard);
    if (rss_gib > 0) {
        char big[4200], big_ds[4200];
        snprintf(big, sizeof big, "/tmp/bench-seal-big-%d.bin", (int)getpid());
        snprintf(big_ds, sizeof big_ds, "/tmp/bench-seal-big-%d.ds", (int)getpid());
        make_shard(big, rss_gib << 29, true);
        rss = child_seal_rss(big, big_ds, 0, &keys, &secs);
        char label[64];
        snprintf(label, sizeof label, "  %llu GiB sparse shard in /tmp, 512 MiB chunks",
                 (unsigned long long)rss_gib);
        printf("%-44s %10.1f %10.2f\n", label, rss / 1024.0, secs);
        rm_dataset(big_ds, 1024);
        unlink(big);
    }
    printf("(target: < 64 MiB peak RSS for a 2 GiB dataset)\n");
    gt_holder_keys_wipe(&keys);
    char p[4300];
    snprintf(p, sizeof p, "%s/%s", keys_dir, GT_KEYDIR_HOLDER_SECRET);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", keys_dir, GT_KEYDIR_HOLDER_PUBLIC);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", keys_dir, GT_KEYDIR_DATASET_KEY);
    unlink(p);
    rmdir(keys_dir);
    rmdir(work);
    return 0;
}

// ---- vs age -------------------------------------------------------------------------------

// Runs argv (PATH search) with stdout and stderr to /dev/null; returns its wall seconds, or a
// negative number if it failed.
static double run_timed(char *const *argv)
{
    double t0 = gt_now_seconds();
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        return -1;
    }
    double t = gt_now_seconds() - t0;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? t : -1;
}

static void must(double t, const char *what)
{
    if (t < 0) {
        fprintf(stderr, "bench_seal: %s failed\n", what);
        exit(1);
    }
}

// Reads a file once (so that it is in the page cache) without timing it.
static void warm(const char *path)
{
    static uint8_t buf[1 << 20];
    int fd = open(path, O_RDONLY);
    while (fd >= 0 && read(fd, buf, sizeof buf) > 0) {
    }
    if (fd >= 0) {
        close(fd);
    }
}

// fsync of an existing file: what it still takes to make it durable.
static double fsync_seconds(const char *path)
{
    double t0 = gt_now_seconds();
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fsync(fd) != 0) {
        perror(path);
        exit(1);
    }
    close(fd);
    return gt_now_seconds() - t0;
}

// The I/O floor: the same bytes read, written to a new file in 1 MiB pieces and fsynced. Returns
// the wall seconds; *fsync_s gets the fsync's share.
static double copy_fsync(const char *src, const char *dst, double *fsync_s)
{
    static uint8_t buf[1 << 20];
    double t0 = gt_now_seconds();
    int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0) {
        perror("copy");
        exit(1);
    }
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0) {
        if (write(out, buf, (size_t)n) != n) {
            perror("copy: write");
            exit(1);
        }
    }
    double t1 = gt_now_seconds();
    if (fsync(out) != 0) {
        perror("copy: fsync");
        exit(1);
    }
    close(out);
    close(in);
    double t2 = gt_now_seconds();
    *fsync_s = t2 - t1;
    unlink(dst);
    return t2 - t0;
}

// One pass of SHA-256 (or AES-256-GCM) over the shard's bytes on one core, from the page cache
// in 1 MiB pieces: SHA-256 of every chunk file byte is sequential, so it bounds what any seal
// of this format can do, however many cores it has.
static double one_core_pass(const char *src, bool sha)
{
    static uint8_t buf[1 << 20], ct[1 << 20];
    uint8_t key[32] = {1}, iv[12] = {2}, digest[32];
    int in = open(src, O_RDONLY), n = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    if (in < 0 || md == NULL || c == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 ||
        EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, key, iv) != 1) {
        fprintf(stderr, "bench_seal: one-core pass setup failed\n");
        exit(1);
    }
    double busy = 0;
    ssize_t r;
    while ((r = read(in, buf, sizeof buf)) > 0) {  // only the cryptography is timed
        double t0 = gt_now_seconds();
        if (sha) {
            EVP_DigestUpdate(md, buf, (size_t)r);
        } else {
            EVP_EncryptUpdate(c, ct, &n, buf, (int)r);
        }
        busy += gt_now_seconds() - t0;
    }
    unsigned dl = 0;
    EVP_DigestFinal_ex(md, digest, &dl);
    EVP_MD_CTX_free(md);
    EVP_CIPHER_CTX_free(c);
    close(in);
    return busy;
}

static void ensure_age(void)
{
    if (system("command -v age >/dev/null 2>&1 && command -v age-keygen >/dev/null 2>&1") == 0) {
        return;
    }
    fprintf(stderr, "bench_seal: age is missing: installing the Debian package age\n");
    const char *cmd = geteuid() == 0
                          ? "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq age >/dev/null"
                          : "sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq age "
                            ">/dev/null";
    if (system(cmd) != 0 || system("command -v age >/dev/null 2>&1") != 0) {
        fprintf(stderr, "bench_seal: could not install age (apt-get install age)\n");
        exit(1);
    }
}

static void stats(const double *v, int n, double *med, double *lo, double *hi)
{
    double s[64];
    memcpy(s, v, (size_t)n * sizeof *v);
    for (int i = 1; i < n; i++) {  // insertion sort: n is small
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    }
    *med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    *lo = s[0];
    *hi = s[n - 1];
}

static void rm_rf_dataset(const char *ds)
{
    rm_dataset(ds, 1 << 16);
}

static int vs_age(int argc, char **argv)
{
    uint64_t mib = 512;
    int runs = 5;
    const char *dir = "/tmp", *cli = NULL, *png = NULL;
    static const struct option opts[] = {{"mib", required_argument, NULL, 'm'},
                                         {"runs", required_argument, NULL, 'r'},
                                         {"dir", required_argument, NULL, 'd'},
                                         {"cli", required_argument, NULL, 'c'},
                                         {"png", required_argument, NULL, 'p'},
                                         {0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mib = strtoull(optarg, NULL, 10); break;
        case 'r': runs = atoi(optarg); break;
        case 'd': dir = optarg; break;
        case 'c': cli = optarg; break;
        case 'p': png = optarg; break;
        default:
            fprintf(stderr, "usage: bench_seal [--mib N] [--runs R] [--dir DIR] [--cli PATH] "
                            "[--png FILE]\n       bench_seal --cpu ...\n");
            return 64;
        }
    }
    if (runs < 1 || runs > 64 || mib < 1) {
        fprintf(stderr, "bench_seal: --runs 1..64, --mib >= 1\n");
        return 64;
    }
    char self[4096], cli_buf[4200];
    if (cli == NULL) {  // the gputravel next to this binary (both are in the build folder)
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) {
            perror("/proc/self/exe");
            return 1;
        }
        self[n] = '\0';
        snprintf(cli_buf, sizeof cli_buf, "%s/gputravel", dirname(self));
        cli = cli_buf;
    }
    ensure_age();
    char work[4096], keys_dir[4200], agekey[4200], shard[4200], ds[4200], out[4200], enc[4200],
        dec[4200], cp[4200], png_buf[4200], recipient[256] = {0};
    snprintf(work, sizeof work, "%s/bench-seal-XXXXXX", dir);
    if (mkdtemp(work) == NULL) {
        perror(work);
        return 1;
    }
    snprintf(keys_dir, sizeof keys_dir, "%s/keys", work);
    snprintf(agekey, sizeof agekey, "%s/age.key", work);
    snprintf(shard, sizeof shard, "%s/in.bin", work);
    snprintf(ds, sizeof ds, "%s/ds", work);
    snprintf(out, sizeof out, "%s/out.bin", work);
    snprintf(enc, sizeof enc, "%s/in.age", work);
    snprintf(dec, sizeof dec, "%s/out.age.bin", work);
    snprintf(cp, sizeof cp, "%s/copy.bin", work);
    if (png == NULL) {
        snprintf(png_buf, sizeof png_buf, "%s/bench-seal-vs-age.png", dir);
        png = png_buf;
    }
    gt_holder_keys keys;
    gt_err e = gt_keydir_generate(keys_dir, false, &keys);
    if (e.code != GT_E_NONE) {
        die("keygen", e);
    }
    gt_holder_keys_wipe(&keys);
    must(run_timed((char *[]){"age-keygen", "-o", agekey, NULL}), "age-keygen");
    FILE *kf = fopen(agekey, "r");
    char line[512];
    while (kf != NULL && fgets(line, sizeof line, kf) != NULL) {
        if (sscanf(line, "# public key: %200s", recipient) == 1) {
            break;
        }
    }
    if (kf != NULL) {
        fclose(kf);
    }
    if (recipient[0] == '\0') {
        fprintf(stderr, "bench_seal: no public key in %s\n", agekey);
        return 1;
    }
    uint64_t tokens = mib << 19;
    make_shard(shard, tokens, false);
    fsync_seconds(shard);  // start every round with the input on disk and in the cache

    enum { SEAL, AGE_ENC, UNSEAL, AGE_DEC, COPY, COPY_FSYNC, AGE_FSYNC, SHA, GCM, ROWS };
    double t[ROWS][64];
    for (int r = 0; r < runs; r++) {
        rm_rf_dataset(ds);
        unlink(out);
        unlink(enc);
        unlink(dec);
        char *seal_argv[] = {(char *)cli, "seal", shard, "--key", keys_dir, "--out", ds, NULL};
        char *enc_argv[] = {"age", "-r", recipient, "-o", enc, shard, NULL};
        char *unseal_argv[] = {(char *)cli, "unseal", ds, "--key", keys_dir, "--out", out, NULL};
        char *dec_argv[] = {"age", "-d", "-i", agekey, "-o", dec, enc, NULL};
        bool age_first = r % 2 == 1;  // alternate who goes first within each pair
        for (int k = 0; k < 2; k++) {
            if ((k == 0) == age_first) {
                must(t[AGE_ENC][r] = run_timed(enc_argv), "age -r");
                t[AGE_FSYNC][r] = t[AGE_ENC][r] + fsync_seconds(enc);
            } else {
                must(t[SEAL][r] = run_timed(seal_argv), "gputravel seal");
            }
        }
        for (int k = 0; k < 2; k++) {
            if ((k == 0) == age_first) {
                warm(enc);
                must(t[AGE_DEC][r] = run_timed(dec_argv), "age -d");
            } else {
                for (uint32_t i = 0; i < 1u << 16; i++) {
                    char p[4300];
                    snprintf(p, sizeof p, "%s/chunk-%06u.gtc", ds, i);
                    if (access(p, F_OK) != 0) {
                        break;
                    }
                    warm(p);
                }
                must(t[UNSEAL][r] = run_timed(unseal_argv), "gputravel unseal");
            }
        }
        t[COPY][r] = copy_fsync(shard, cp, &t[COPY_FSYNC][r]);
        t[SHA][r] = one_core_pass(shard, true);
        t[GCM][r] = one_core_pass(shard, false);
        fprintf(stderr, "run %d/%d: seal %.3f age %.3f | unseal %.3f age -d %.3f | copy %.3f s\n",
                r + 1, runs, t[SEAL][r], t[AGE_ENC][r], t[UNSEAL][r], t[AGE_DEC][r], t[COPY][r]);
    }
    // the unsealed shard must be the input, and age's round trip too
    if (run_timed((char *[]){"cmp", "-s", shard, out, NULL}) < 0 ||
        run_timed((char *[]){"cmp", "-s", shard, dec, NULL}) < 0) {
        fprintf(stderr, "bench_seal: a round trip did not give the input back\n");
        return 1;
    }
    double med[ROWS], lo[ROWS], hi[ROWS], pair_seal[64], pair_unseal[64];
    for (int i = 0; i < ROWS; i++) {
        stats(t[i], runs, &med[i], &lo[i], &hi[i]);
    }
    for (int r = 0; r < runs; r++) {
        pair_seal[r] = t[AGE_ENC][r] / t[SEAL][r];
        pair_unseal[r] = t[AGE_DEC][r] / t[UNSEAL][r];
    }
    double ps, ps_lo, ps_hi, pu, pu_lo, pu_hi;
    stats(pair_seal, runs, &ps, &ps_lo, &ps_hi);
    stats(pair_unseal, runs, &pu, &pu_lo, &pu_hi);

    double bytes = (double)(2 * tokens);
    const char *names[ROWS] = {
        "gputravel seal (manifest signed, fsync)", "age -r (encrypt, no fsync)",
        "gputravel unseal (all tags, fsync)", "age -d -i (decrypt, no fsync)",
        "cp-like copy: read + write + fsync", "  of which the fsync",
        "age -r, then fsync of its output", "SHA-256 of the bytes, one core (in memory)",
        "AES-256-GCM of the bytes, one core"};
    printf("bench_seal vs age: %llu MiB shard in %s, %d runs interleaved pair by pair, wall s\n",
           (unsigned long long)mib, dir, runs);
    printf("%-42s %8s %8s %8s %8s\n", "operation", "median", "min", "max", "MB/s");
    for (int i = 0; i < ROWS; i++) {
        printf("%-42s %8.3f %8.3f %8.3f %8.0f\n", names[i], med[i], lo[i], hi[i],
               i == COPY_FSYNC ? 0.0 : bytes / med[i] / 1e6);
    }
    printf("seal vs age -r:   %.2fx (medians), paired per run %.2fx (%.2f .. %.2f)\n",
           med[AGE_ENC] / med[SEAL], ps, ps_lo, ps_hi);
    printf("unseal vs age -d: %.2fx (medians), paired per run %.2fx (%.2f .. %.2f)\n",
           med[AGE_DEC] / med[UNSEAL], pu, pu_lo, pu_hi);
    printf("seal vs age -r + fsync: %.2fx; seal / copy: %.2f, unseal / copy: %.2f\n",
           med[AGE_FSYNC] / med[SEAL], med[SEAL] / med[COPY], med[UNSEAL] / med[COPY]);
    printf("seal / its one-core SHA-256 floor: %.2f (the manifest hashes every chunk byte in "
           "order)\n",
           med[SEAL] / med[SHA]);
    printf("(x >= 1: gputravel at least as fast as age; every run's numbers are on stderr)\n");

    const char *groups[] = {"seal / age -r", "unseal / age -d"};
    const char *series[] = {"gputravel", "age", "cp-like copy + fsync"};
    double v[6] = {med[SEAL], med[UNSEAL], med[AGE_ENC], med[AGE_DEC], med[COPY], med[COPY]};
    double vl[6] = {lo[SEAL], lo[UNSEAL], lo[AGE_ENC], lo[AGE_DEC], lo[COPY], lo[COPY]};
    double vh[6] = {hi[SEAL], hi[UNSEAL], hi[AGE_ENC], hi[AGE_DEC], hi[COPY], hi[COPY]};
    char title[160];
    snprintf(title, sizeof title, "%llu MiB, median of %d (lower is better)",
             (unsigned long long)mib, runs);
    gt_plot_style st = {.title = title, .xlabel = "", .ylabel = "wall seconds"};
    gt_err perr = gt_plot_bars(png, &st, groups, 2, series, 3, v, vl, vh);
    printf(gt_is_ok(perr) ? "plot: %s\n" : "(no plot: %s)\n", gt_is_ok(perr) ? png : perr.msg);

    rm_rf_dataset(ds);
    unlink(out);
    unlink(enc);
    unlink(dec);
    unlink(shard);
    unlink(agekey);
    char p[4300];
    const char *kfiles[] = {GT_KEYDIR_HOLDER_SECRET, GT_KEYDIR_HOLDER_PUBLIC,
                            GT_KEYDIR_DATASET_KEY, GT_KEYDIR_RECIPIENT_SECRET,
                            GT_KEYDIR_RECIPIENT_PUBLIC};
    for (size_t i = 0; i < sizeof kfiles / sizeof kfiles[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", keys_dir, kfiles[i]);
        unlink(p);
    }
    rmdir(keys_dir);
    rmdir(work);
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cpu") == 0) {
            return cpu_tables(argc, argv);
        }
    }
    return vs_age(argc, argv);
}
