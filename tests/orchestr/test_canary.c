// orchestr/: a canary in a travelled chunk leaves no trace outside the device (issue 13). A
// holder's dataset holds a random canary; the holder agents run as processes of their own; the
// trainer is this process, training through devd by GPU travelling until every chunk has been
// used. Then this process's whole memory (every readable mapping, through /proc/self/mem) and
// every file the run left (state folder, ledgers, logs) are searched for the canary: it must be
// in none of them.
//
// The datasets are made in a child process, so this process never holds the plaintext. The
// canary itself is never held here either: only canary XOR mask and the mask, and the search
// compares byte by byte, so the search cannot find its own needle.
#include "collab_testlib.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CANARY_TOKENS 24  // 48 bytes of u16 tokens: nothing matches that by chance
#define TOKENS 3000
#define AT 1234           // where the canary sits in holder 0's text

typedef struct {
    uint8_t masked[2 * CANARY_TOKENS];
    uint8_t mask[2 * CANARY_TOKENS];
} needle;

// Tokens of holder h: the canary (mask ^ masked, formed one token at a time in the child that
// seals) at AT in holder 0's text, a fixed pattern elsewhere.
static uint16_t canary_token(void *ctx, int h, uint32_t i)
{
    const needle *n = ctx;
    if (h == 0 && i >= AT && i < AT + CANARY_TOKENS) {
        uint32_t k = 2 * (i - AT);
        return (uint16_t)((n->masked[k] ^ n->mask[k]) | (n->masked[k + 1] ^ n->mask[k + 1]) << 8);
    }
    return (uint16_t)((i * (uint32_t)(h + 5) + 3) % 97);
}

static size_t hits_in(const uint8_t *p, size_t len, const needle *n)
{
    const size_t N = sizeof n->masked;
    size_t hits = 0;
    for (size_t i = 0; i + N <= len; i++) {
        size_t k = 0;
        while (k < N && (uint8_t)(p[i + k] ^ n->mask[k]) == n->masked[k]) {
            k++;
        }
        hits += k == N;
    }
    return hits;
}

// Every readable mapping of this process (heap, stacks, anonymous maps, the data of every
// library), read through /proc/self/mem into a window of its own, which is skipped. Only pages
// that are in memory are read (mincore): a page never touched holds zeros, and sanitizer builds
// reserve terabytes of such shadow.
static size_t scan_range(int mem, uint8_t *win, size_t cap, uintptr_t lo, uintptr_t hi,
                         const needle *n, size_t *scanned)
{
    size_t hits = 0;
    // windows overlap by the needle's length, so no match straddles two of them unseen
    for (uintptr_t at = lo; at < hi; at += cap - sizeof n->masked) {
        size_t want = hi - at < cap ? hi - at : cap;
        ssize_t got = pread(mem, win, want, (off_t)at);
        if (got <= 0) {
            break;
        }
        hits += hits_in(win, (size_t)got, n);
        *scanned += (size_t)got;
        if ((size_t)got < want || want < cap) {
            break;
        }
    }
    return hits;
}

static size_t scan_memory(const needle *n, size_t *scanned)
{
    const size_t cap = 1u << 20, page = (size_t)sysconf(_SC_PAGESIZE), span = (size_t)1 << 30;
    uint8_t *win = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *vec = malloc(span / page);
    FILE *maps = fopen("/proc/self/maps", "r");
    int mem = open("/proc/self/mem", O_RDONLY);
    assert_true(win != MAP_FAILED && vec != NULL && maps != NULL && mem >= 0);
    size_t hits = 0;
    char line[512];
    *scanned = 0;
    while (fgets(line, sizeof line, maps) != NULL) {
        unsigned long lo = 0, hi = 0;
        char perms[8] = "";
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r' ||
            strstr(line, "[vvar") != NULL || strstr(line, "[vsyscall]") != NULL ||
            (lo <= (uintptr_t)win && (uintptr_t)win < hi)) {
            continue;
        }
        for (uintptr_t base = lo; base < hi; base += span) {
            size_t len = hi - base < span ? hi - base : span;
            if (mincore((void *)base, len, vec) != 0) {
                continue;
            }
            for (size_t p = 0; p < len / page;) {  // each run of resident pages
                size_t q = p;
                while (q < len / page && (vec[q] & 1)) {
                    q++;
                }
                if (q > p) {
                    // a run's end reads on by the needle's length, into the next page if mapped
                    uintptr_t end = base + q * page + sizeof n->masked;
                    hits += scan_range(mem, win, cap, base + p * page, end < hi ? end : hi, n,
                                       scanned);
                }
                p = q + 1;
            }
        }
    }
    gt_secure_zero(win, cap);
    munmap(win, cap);
    free(vec);
    close(mem);
    fclose(maps);
    return hits;
}

static size_t scan_files(const char *dir, const needle *n, int *files)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return 0;
    }
    size_t hits = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0) {
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            hits += scan_files(path, n, files);
        } else if (S_ISREG(st.st_mode)) {
            gt_buf b = {0};
            if (gt_is_ok(gt_file_read_all(path, 1u << 28, &b))) {
                hits += hits_in(b.data, b.len, n);
                (*files)++;
            }
            gt_buf_free_nowipe(&b);
        }
    }
    closedir(d);
    return hits;
}

static void canary_stays_in_the_device(void **state)
{
    (void)state;
    // The needle: random mask and masked canary, in shared memory so the sealing child sees it.
    needle *n = mmap(NULL, sizeof *n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    gt_tc_fixture *f = mmap(NULL, sizeof *f, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                            -1, 0);
    assert_true(n != MAP_FAILED && f != MAP_FAILED);
    GT_ASSERT_OK(gt_random_bytes(n->mask, sizeof n->mask));
    GT_ASSERT_OK(gt_random_bytes(n->masked, sizeof n->masked));
    for (size_t k = 0; k < sizeof n->masked; k += 2) {  // canary tokens below the vocabulary
        n->masked[k + 1] = n->mask[k + 1];               // high byte 0
        n->masked[k] = (uint8_t)(((n->masked[k] ^ n->mask[k]) % 97) ^ n->mask[k]);
    }
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        gt_tc_setup(f, 2, TOKENS, 500, canary_token, n);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    // what gt_tc_setup set in the child, again in this process
    setenv("GT_SIM_ROOT", f->sim_root, 1);
    GT_ASSERT_OK(gt_sim_root_set(f->sim_root));
    memset(&f->sim_root_bytes, 0, sizeof f->sim_root_bytes);
    GT_ASSERT_OK(gt_file_read_all(f->sim_root_pub, 1 << 16, &f->sim_root_bytes));
    f->root = (gt_attest_file){f->sim_root_pub, gt_buf_span(&f->sim_root_bytes)};

    char sock[600], devd_dir[600], state_dir[600];
    snprintf(devd_dir, sizeof devd_dir, "%s/devd", f->dir);
    snprintf(state_dir, sizeof state_dir, "%s/state", f->dir);
    GT_ASSERT_OK(gt_mkdir_p(devd_dir, 0700));
    GT_ASSERT_OK(gt_mkdir_p(state_dir, 0700));
    static const char *const no_args[] = {NULL};
    pid_t devd = gt_test_devd_start(sock, sizeof sock, devd_dir, no_args);
    gt_tc_holder runs[2];
    memset(runs, 0, sizeof runs);
    int ports[2];
    gt_tc_listen(f, runs, ports);
    gt_agreement *a = malloc(sizeof *a);
    gt_tc_agreement(f, a, ports, &(gt_tc_terms){.steps = 40, .token_budget = 100000});
    for (int h = 0; h < 2; h++) {
        gt_tc_serve_process(f, &runs[h], h, a, NULL);
    }
    gt_collab_report rep;
    GT_ASSERT_OK(gt_tc_train(&(gt_tc_train_opts){.a = a, .state_dir = state_dir,
                                                 .devd_socket = sock},
                             &rep, NULL));
    assert_true(rep.holders[0].uses >= 1);  // holder 0's chunks, the canary's too, travelled
    for (int h = 0; h < 2; h++) {
        gt_tc_stop(&runs[h], false);
    }
    gt_test_devd_stop(devd);

    // The search works: the holder's sealing child had the canary, and so does this probe.
    uint8_t probe[2 * CANARY_TOKENS + 8];
    for (size_t k = 0; k < 2 * CANARY_TOKENS; k++) {
        probe[4 + k] = n->masked[k] ^ n->mask[k];
    }
    assert_int_equal(hits_in(probe, sizeof probe, n), 1);
    gt_secure_zero(probe, sizeof probe);

    // And the memory scan finds a canary that is there: one copy put on the heap, then wiped.
    size_t scanned = 0;
    uint8_t *planted = malloc(4096);
    for (size_t k = 0; k < 2 * CANARY_TOKENS; k++) {
        planted[100 + k] = n->masked[k] ^ n->mask[k];
    }
    assert_true(scan_memory(n, &scanned) >= 1);
    gt_secure_zero(planted, 4096);
    free(planted);

    size_t in_memory = scan_memory(n, &scanned);
    int files = 0;
    size_t in_files = scan_files(f->dir, n, &files);
    print_message("scanned %zu bytes of this process's memory and %d files: %zu + %zu hits\n",
                  scanned, files, in_memory, in_files);
    assert_true(scanned > (1u << 20) && files >= 4);
    assert_int_equal(in_memory, 0);
    assert_int_equal(in_files, 0);
    free(a);
    gt_tc_teardown(f);
    munmap(f, sizeof *f);
    munmap(n, sizeof *n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(canary_stays_in_the_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
