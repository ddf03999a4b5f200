// device/: the CUDA IPC handoff primitive. The "holder" (this process) loads a buffer into GPU
// memory and exports it; a "trainer" (this program re-executed as a child, a separate CUDA
// context as in production) imports the handle, finds a claimed size beyond the allocation
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

#define NFLOATS ((1u << 18) + 3)

static bool have_gpu;
static char gpu_why[256];

// The trainer side; returns a process exit code (0: every check held).
static int child(int fd)
{
    uint8_t wire[GT_CUDA_IPC_DESC_BYTES];
    size_t got = 0;
    while (got < sizeof wire) {
        ssize_t n = read(fd, wire + got, sizeof wire - got);
        if (n <= 0) {
            fprintf(stderr, "child: short read\n");
            return 2;
        }
        got += (size_t)n;
    }
    gt_reader r = gt_reader_init(wire, sizeof wire - 1);
    gt_cuda_ipc_desc desc;
    if (gt_cuda_ipc_desc_read(&r, &desc).code != GT_E_TRUNCATED) {
        fprintf(stderr, "child: truncated descriptor accepted\n");
        return 3;
    }
    r = gt_reader_init(wire, sizeof wire);
    gt_err e = gt_cuda_ipc_desc_read(&r, &desc);
    if (e.code != GT_E_NONE || desc.bytes != (uint64_t)NFLOATS * 4) {
        fprintf(stderr, "child: descriptor: %s\n", e.msg);
        return 4;
    }
    gt_device *d = NULL;
    gt_device_config cfg = {.kind = GT_DEVICE_CUDA};
    e = gt_device_open(&d, &cfg);
    if (e.code != GT_E_NONE) {
        fprintf(stderr, "child: open: %s\n", e.msg);
        return 5;
    }
    int rc = 0;
    gt_dbuf buf = 0, sum = 0;
    gt_cuda_ipc_desc big = desc;
    big.bytes = (uint64_t)1 << 34;
    e = gt_device_cuda_ipc_import(d, &big, GT_DBUF_NO_READBACK, &buf);
    if (e.code != GT_E_ARG || buf != 0) {
        fprintf(stderr, "child: oversized claim: %s (%s)\n", gt_code_name(e.code), e.msg);
        rc = 6;
        goto out;
    }
    e = gt_device_cuda_ipc_import(d, &desc, GT_DBUF_NO_READBACK, &buf);
    if (e.code != GT_E_NONE) {
        fprintf(stderr, "child: import: %s\n", e.msg);
        rc = 7;
        goto out;
    }
    float f = 0.0f;
    if (gt_device_copy_out(d, &f, buf, 0, 4).code != GT_E_POLICY) {
        fprintf(stderr, "child: no-readback import was readable\n");
        rc = 8;
        goto out;
    }
    e = gt_device_alloc(d, 8, 0, &sum);
    gt_op ss = {.kind = GT_OP_SUMSQ, .refs = {{sum, 0}, {buf, 0}}, .ints = {NFLOATS}};
    if (e.code == GT_E_NONE) {
        e = gt_device_launch(d, &ss);
    }
    double s = 0.0;
    if (e.code == GT_E_NONE) {
        e = gt_device_copy_out(d, &s, sum, 0, 8);
    }
    double want = gt_test_pattern_sumsq(NFLOATS);
    if (e.code != GT_E_NONE || fabs(s - want) > 1e-9 * want) {
        fprintf(stderr, "child: sum of squares %.17g, holder's %.17g (%s)\n", s, want, e.msg);
        rc = 9;
        goto out;
    }
    e = gt_device_free(d, buf);  // return: wipes the holder's memory, unmaps it
    buf = 0;
    if (e.code != GT_E_NONE) {
        fprintf(stderr, "child: free: %s\n", e.msg);
        rc = 10;
    }
out:
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
    float *host = malloc((size_t)NFLOATS * 4);
    for (size_t i = 0; i < NFLOATS; i++) {
        host[i] = gt_test_pattern(i);
    }
    gt_dbuf buf = 0;
    GT_ASSERT_OK(gt_device_alloc(d, (uint64_t)NFLOATS * 4, GT_DBUF_NO_READBACK, &buf));
    GT_ASSERT_OK(gt_device_copy_in(d, buf, 0, host, (uint64_t)NFLOATS * 4));
    gt_cuda_ipc_desc desc;
    GT_ASSERT_OK(gt_device_cuda_ipc_export(d, buf, &desc));
    assert_int_equal(desc.bytes, (uint64_t)NFLOATS * 4);
    uint8_t wire[GT_CUDA_IPC_DESC_BYTES];
    gt_cuda_ipc_desc_write(wire, &desc);
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
    // The holder's buffer is no-readback too: check the wipe with a kernel (sum of squares 0).
    gt_dbuf sum = 0;
    GT_ASSERT_OK(gt_device_alloc(d, 8, 0, &sum));
    gt_op ss = {.kind = GT_OP_SUMSQ, .refs = {{sum, 0}, {buf, 0}}, .ints = {NFLOATS}};
    GT_ASSERT_OK(gt_device_launch(d, &ss));
    double s = -1.0;
    GT_ASSERT_OK(gt_device_copy_out(d, &s, sum, 0, 8));
    assert_true(s == 0.0);
    free(host);
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
