// device/: the CUDA IPC handoff primitive. The "holder" (this process) loads two buffers into
// GPU memory (exportable allocations: 2 MiB granules) and exports them, after finding a plain
// buffer's export refused; a "trainer" (this program re-executed as a child, a separate CUDA
// context as in production) imports each handle, finds a claimed size past the 2 MiB allocation
// refused, finds copy_out refused under NO_READBACK while kernels still read the data (a sum of
// squares matching the holder's), and frees it, which wipes: the holder then reads zeros.
// Skipped (exit 77) without a usable GPU.
#include "testlib.h"
#include "float_chunk.h"

#include <gputravel/device.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gputravel/device_cuda.h>
#include <gputravel/kernels.h>

// Two buffers, neither a multiple of CUDA IPC's 2 MiB granule: 1 MiB + 12 bytes, and a trip
// chunk's size (~800 bytes), which cudaMalloc alone would carve out of a block shared with
// other buffers. Exportable allocations make each its own 2 MiB driver allocation.
static const size_t nfloats[2] = {(1u << 18) + 3, 200};

static bool have_gpu;
static char gpu_why[256];

static int read_all(int fd, uint8_t *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, p + got, n - got);
        if (k <= 0) {
            return -1;
        }
        got += (size_t)k;
    }
    return 0;
}

// One imported buffer: claims past the allocation refused, no readback, the sum of squares of
// the holder's pattern, then the return (free: wipes the holder's memory, unmaps it). Returns 0
// or an exit code (base + 1 ..).
static int check_import(gt_device *d, const gt_cuda_ipc_desc *desc, size_t n, int base)
{
    int rc = 0;
    gt_dbuf buf = 0, sum = 0;
    // 2 MiB + 4: past the exporter's own (rounded) allocation, so refused whatever the
    // neighbourhood; 2^34: far past anything
    uint64_t claims[2] = {GT_CUDA_IPC_GRANULE + 4, (uint64_t)1 << 34};
    for (int i = 0; i < 2; i++) {
        gt_cuda_ipc_desc big = *desc;
        big.bytes = claims[i];
        gt_err e = gt_device_cuda_ipc_import(d, &big, GT_DBUF_NO_READBACK, &buf);
        if (e.code != GT_E_ARG || buf != 0) {
            fprintf(stderr, "child: claim of %llu bytes: %s (%s)\n",
                    (unsigned long long)claims[i], gt_code_name(e.code), e.msg);
            return base + 1;
        }
    }
    gt_err e = gt_device_cuda_ipc_import(d, desc, GT_DBUF_NO_READBACK, &buf);
    if (e.code != GT_E_NONE) {
        fprintf(stderr, "child: import: %s\n", e.msg);
        return base + 2;
    }
    float f = 0.0f;
    if (gt_device_copy_out(d, &f, buf, 0, 4).code != GT_E_POLICY) {
        fprintf(stderr, "child: no-readback import was readable\n");
        rc = base + 3;
        goto out;
    }
    e = gt_device_alloc(d, 8, 0, &sum);
    gt_op ss = {.kind = GT_OP_SUMSQ, .refs = {{sum, 0}, {buf, 0}}, .ints = {(int64_t)n}};
    if (e.code == GT_E_NONE) {
        e = gt_device_launch(d, &ss);
    }
    double s = 0.0;
    if (e.code == GT_E_NONE) {
        e = gt_device_copy_out(d, &s, sum, 0, 8);
    }
    double want = gt_test_pattern_sumsq(n);
    if (e.code != GT_E_NONE || fabs(s - want) > 1e-9 * want) {
        fprintf(stderr, "child: sum of squares %.17g, holder's %.17g (%s)\n", s, want, e.msg);
        rc = base + 4;
        goto out;
    }
out:
    if (buf != 0) {
        e = gt_device_free(d, buf);  // return: wipes the holder's memory, unmaps it
        if (e.code != GT_E_NONE && rc == 0) {
            fprintf(stderr, "child: free: %s\n", e.msg);
            rc = base + 5;
        }
    }
    if (sum != 0) {
        e = gt_device_free(d, sum);
        if (e.code != GT_E_NONE && rc == 0) {
            fprintf(stderr, "child: free: %s\n", e.msg);
            rc = base + 6;
        }
    }
    return rc;
}

// The trainer side; returns a process exit code (0: every check held).
static int child(int fd)
{
    uint8_t wire[2][GT_CUDA_IPC_DESC_BYTES];
    if (read_all(fd, &wire[0][0], sizeof wire) != 0) {
        fprintf(stderr, "child: short read\n");
        return 2;
    }
    gt_cuda_ipc_desc desc[2];
    gt_reader r = gt_reader_init(wire[0], GT_CUDA_IPC_DESC_BYTES - 1);
    if (gt_cuda_ipc_desc_read(&r, &desc[0]).code != GT_E_TRUNCATED) {
        fprintf(stderr, "child: truncated descriptor accepted\n");
        return 3;
    }
    for (int i = 0; i < 2; i++) {
        r = gt_reader_init(wire[i], GT_CUDA_IPC_DESC_BYTES);
        gt_err e = gt_cuda_ipc_desc_read(&r, &desc[i]);
        if (e.code != GT_E_NONE || desc[i].bytes != (uint64_t)nfloats[i] * 4) {
            fprintf(stderr, "child: descriptor %d: %s\n", i, e.msg);
            return 4;
        }
    }
    gt_device *d = NULL;
    gt_device_config cfg = {.kind = GT_DEVICE_CUDA};
    gt_err e = gt_device_open(&d, &cfg);
    if (e.code != GT_E_NONE) {
        fprintf(stderr, "child: open: %s\n", e.msg);
        return 5;
    }
    int rc = check_import(d, &desc[0], nfloats[0], 10);
    if (rc == 0) {
        rc = check_import(d, &desc[1], nfloats[1], 20);
    }
    gt_device_close(d);  // also wipes and unmaps an import left open
    return rc;
}

static void handoff(void **state)
{
    (void)state;
    if (!have_gpu) {
        print_message("SKIPPED: %s\n", gpu_why);
        skip();
    }
    gt_device *d = NULL;
    gt_device_config cfg = {.kind = GT_DEVICE_CUDA};
    GT_ASSERT_OK(gt_device_open(&d, &cfg));
    // a buffer of gt_device_alloc may share its driver allocation: never exported
    gt_dbuf plain = 0;
    GT_ASSERT_OK(gt_device_alloc(d, 800, GT_DBUF_NO_READBACK, &plain));
    gt_cuda_ipc_desc desc;
    GT_ASSERT_CODE(gt_device_cuda_ipc_export(d, plain, &desc), GT_E_STATE);
    gt_dbuf buf[2] = {0};
    uint8_t wire[2][GT_CUDA_IPC_DESC_BYTES];
    for (int i = 0; i < 2; i++) {
        size_t n = nfloats[i];
        float *host = malloc(n * 4);
        assert_non_null(host);
        for (size_t j = 0; j < n; j++) {
            host[j] = gt_test_pattern(j);
        }
        GT_ASSERT_OK(gt_device_cuda_alloc_exportable(d, (uint64_t)n * 4, GT_DBUF_NO_READBACK,
                                                     &buf[i]));
        uint64_t sz = 0;
        GT_ASSERT_OK(gt_device_buf_size(d, buf[i], &sz));
        assert_int_equal(sz, (uint64_t)n * 4);  // the rounding is the allocation's, not the size
        GT_ASSERT_OK(gt_device_copy_in(d, buf[i], 0, host, (uint64_t)n * 4));
        GT_ASSERT_OK(gt_device_cuda_ipc_export(d, buf[i], &desc));
        assert_int_equal(desc.bytes, (uint64_t)n * 4);
        gt_cuda_ipc_desc_write(wire[i], &desc);
        free(host);
    }
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        // No CUDA call between fork and exec: the child starts a fresh process and context.
        close(fds[1]);
        char fd[16];
        snprintf(fd, sizeof fd, "%d", fds[0]);
        execl("/proc/self/exe", "test_cuda_ipc", "--ipc-child", fd, (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    assert_int_equal(write(fds[1], wire, sizeof wire), (ssize_t)sizeof wire);
    close(fds[1]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    // The holder's buffers are no-readback too: check the wipe with a kernel (sum of squares 0).
    gt_dbuf sum = 0;
    GT_ASSERT_OK(gt_device_alloc(d, 8, 0, &sum));
    for (int i = 0; i < 2; i++) {
        gt_op ss = {.kind = GT_OP_SUMSQ, .refs = {{sum, 0}, {buf[i], 0}},
                    .ints = {(int64_t)nfloats[i]}};
        GT_ASSERT_OK(gt_device_launch(d, &ss));
        double s = -1.0;
        GT_ASSERT_OK(gt_device_copy_out(d, &s, sum, 0, 8));
        assert_true(s == 0.0);
    }
    gt_device_close(d);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--ipc-child") == 0) {
        return child(atoi(argv[2]));
    }
    have_gpu = gt_cuda_probe(gpu_why, sizeof gpu_why);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(handoff),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (!have_gpu) {
        printf("SKIPPED (no GPU): %s\n", gpu_why);
        return rc == 0 ? 77 : rc;
    }
    return rc;
}
