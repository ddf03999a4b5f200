// util/: gt_file_map_visit reads a file in place and survives the file shrinking under it
// (GT_E_IO, the process lives on, later visits work); outside a visit SIGBUS is its owner's.
#include "testlib.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILE_BYTES (1u << 20)

typedef struct {
    int fd;
    uint64_t sum;
    bool shrink_first;  // truncate the file to one page, then read on
} visit_ctx;

static gt_err sum_bytes(void *p, const uint8_t *data, size_t len)
{
    visit_ctx *c = p;
    if (c->shrink_first && ftruncate(c->fd, 4096) != 0) {
        return gt_errf(GT_E_IO, "ftruncate");
    }
    for (size_t i = 0; i < len; i++) {
        c->sum += data[i];
    }
    return GT_OK;
}

static int make_file(char *path, size_t cap, uint64_t *sum)
{
    char dir[256];
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(path, cap, "%s/f.bin", dir);
    uint8_t *b = malloc(FILE_BYTES);
    assert_non_null(b);
    *sum = 0;
    for (size_t i = 0; i < FILE_BYTES; i++) {
        b[i] = (uint8_t)(i * 7 + 3);
    }
    GT_ASSERT_OK(gt_file_write_atomic(path, b, FILE_BYTES, 0600));
    free(b);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    return fd;
}

static uint64_t expected_sum(uint64_t off, uint64_t len)
{
    uint64_t s = 0;
    for (uint64_t i = off; i < off + len; i++) {
        s += (uint8_t)(i * 7 + 3);
    }
    return s;
}

static void reads_in_place_at_any_offset(void **state)
{
    (void)state;
    char path[300];
    uint64_t unused = 0;
    int fd = make_file(path, sizeof path, &unused);
    static const uint64_t offs[] = {0, 1, 40, 4095, 4096, 4097, FILE_BYTES - 16};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        uint64_t len = offs[i] == FILE_BYTES - 16 ? 16 : 300000;
        visit_ctx c = {.fd = fd};
        GT_ASSERT_OK(gt_file_map_visit(fd, offs[i], len, sum_bytes, &c));
        assert_int_equal(c.sum, expected_sum(offs[i], len));
    }
    visit_ctx c = {.fd = fd};
    GT_ASSERT_OK(gt_file_map_visit(fd, 5, 0, sum_bytes, &c));  // nothing to read
    assert_int_equal(c.sum, 0);
    close(fd);
}

static void a_file_that_shrinks_is_an_io_error(void **state)
{
    (void)state;
    char path[300];
    uint64_t unused = 0;
    int fd = make_file(path, sizeof path, &unused);
    visit_ctx c = {.fd = fd, .shrink_first = true};
    GT_ASSERT_CODE(gt_file_map_visit(fd, 0, FILE_BYTES, sum_bytes, &c), GT_E_IO);
    // The process lives on and the next visit works.
    visit_ctx d = {.fd = fd};
    GT_ASSERT_OK(gt_file_map_visit(fd, 0, 4096, sum_bytes, &d));
    assert_int_equal(d.sum, expected_sum(0, 4096));
    close(fd);
}

static void sigbus_belongs_to_its_owner_outside_a_visit(void **state)
{
    (void)state;
    char path[300];
    uint64_t unused = 0;
    int fd = make_file(path, sizeof path, &unused);
    struct sigaction before, after;
    assert_int_equal(sigaction(SIGBUS, NULL, &before), 0);
    visit_ctx c = {.fd = fd, .shrink_first = true};
    GT_ASSERT_CODE(gt_file_map_visit(fd, 0, FILE_BYTES, sum_bytes, &c), GT_E_IO);
    visit_ctx d = {.fd = fd};
    GT_ASSERT_OK(gt_file_map_visit(fd, 0, 16, sum_bytes, &d));
    assert_int_equal(sigaction(SIGBUS, NULL, &after), 0);
    // Whoever handled SIGBUS before (here: the test framework) handles it again.
    assert_true(after.sa_handler == before.sa_handler);
    assert_int_equal(after.sa_flags, before.sa_flags);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_in_place_at_any_offset),
        cmocka_unit_test(a_file_that_shrinks_is_an_io_error),
        cmocka_unit_test(sigbus_belongs_to_its_owner_outside_a_visit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
