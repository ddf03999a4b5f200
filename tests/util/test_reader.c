// util/: the bounds-checked reader and writer, hex, sizes, atomic files and JSON getters.
#include "testlib.h"

#include <string.h>

static void reader_reads_both_byte_orders(void **state)
{
    (void)state;
    const uint8_t in[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b};
    gt_reader r = gt_reader_init(in, sizeof in);
    uint16_t a = 0;
    uint32_t b = 0, c = 0;
    uint8_t d = 0;
    GT_ASSERT_OK(gt_reader_u16le(&r, &a));
    GT_ASSERT_OK(gt_reader_u32be(&r, &b));
    GT_ASSERT_OK(gt_reader_u24be(&r, &c));
    GT_ASSERT_OK(gt_reader_u8(&r, &d));
    assert_int_equal(a, 0x0201);
    assert_int_equal(b, 0x03040506);
    assert_int_equal(c, 0x070809);
    assert_int_equal(d, 0x0a);
    assert_int_equal(gt_reader_left(&r), 1);
    GT_ASSERT_CODE(gt_reader_expect_end(&r, "test"), GT_E_FORMAT);

    uint64_t le = 0, be = 0;
    gt_reader r8 = gt_reader_init(in, 8);
    GT_ASSERT_OK(gt_reader_u64le(&r8, &le));
    assert_true(le == 0x0807060504030201ull);
    r8 = gt_reader_init(in, 8);
    GT_ASSERT_OK(gt_reader_u64be(&r8, &be));
    assert_true(be == 0x0102030405060708ull);
    GT_ASSERT_OK(gt_reader_expect_end(&r8, "test"));
}

// A failed read reports TRUNCATED and consumes nothing, for every read width.
static void reader_failed_read_consumes_nothing(void **state)
{
    (void)state;
    const uint8_t in[3] = {1, 2, 3};
    gt_reader r = gt_reader_init(in, sizeof in);
    uint32_t v32 = 0;
    uint64_t v64 = 0;
    uint8_t out[4] = {0};
    gt_span s = {0};
    gt_reader sub;
    GT_ASSERT_CODE(gt_reader_u32le(&r, &v32), GT_E_TRUNCATED);
    assert_int_equal(r.pos, 0);
    GT_ASSERT_CODE(gt_reader_u64be(&r, &v64), GT_E_TRUNCATED);
    GT_ASSERT_CODE(gt_reader_bytes(&r, out, 4), GT_E_TRUNCATED);
    GT_ASSERT_CODE(gt_reader_skip(&r, 4), GT_E_TRUNCATED);
    GT_ASSERT_CODE(gt_reader_span(&r, 4, &s), GT_E_TRUNCATED);
    GT_ASSERT_CODE(gt_reader_sub(&r, SIZE_MAX, &sub), GT_E_TRUNCATED);
    assert_int_equal(r.pos, 0);
    assert_int_equal(v32, 0);

    // A huge length after a partial read must not wrap the bounds check.
    GT_ASSERT_OK(gt_reader_skip(&r, 2));
    GT_ASSERT_CODE(gt_reader_skip(&r, SIZE_MAX), GT_E_TRUNCATED);
    GT_ASSERT_CODE(gt_reader_skip(&r, SIZE_MAX - 1), GT_E_TRUNCATED);
    assert_int_equal(r.pos, 2);
}

static void reader_sub_is_bounded(void **state)
{
    (void)state;
    const uint8_t in[] = {2, 0xaa, 0xbb, 0xcc};
    gt_reader r = gt_reader_init(in, sizeof in);
    uint8_t n = 0;
    gt_reader sub;
    GT_ASSERT_OK(gt_reader_u8(&r, &n));
    GT_ASSERT_OK(gt_reader_sub(&r, n, &sub));
    uint16_t v = 0;
    GT_ASSERT_OK(gt_reader_u16be(&sub, &v));
    assert_int_equal(v, 0xaabb);
    uint8_t extra = 0;
    GT_ASSERT_CODE(gt_reader_u8(&sub, &extra), GT_E_TRUNCATED);  // cannot read past the region
    GT_ASSERT_OK(gt_reader_u8(&r, &extra));
    assert_int_equal(extra, 0xcc);
}

static void writer_fixed_and_dynamic(void **state)
{
    (void)state;
    uint8_t buf[6];
    gt_writer w = gt_writer_init_fixed(buf, sizeof buf);
    GT_ASSERT_OK(gt_writer_u32le(&w, 0x11223344));
    GT_ASSERT_CODE(gt_writer_u32be(&w, 1), GT_E_LIMIT);
    assert_int_equal(w.len, 4);
    GT_ASSERT_OK(gt_writer_u16be(&w, 0x5566));
    const uint8_t want[] = {0x44, 0x33, 0x22, 0x11, 0x55, 0x66};
    assert_memory_equal(buf, want, sizeof want);

    gt_writer d = gt_writer_init_dynamic();
    for (uint32_t i = 0; i < 10000; i++) {
        GT_ASSERT_OK(gt_writer_u32le(&d, i));
    }
    gt_reader r = gt_reader_init(d.data, d.len);
    for (uint32_t i = 0; i < 10000; i++) {
        uint32_t v = 0;
        GT_ASSERT_OK(gt_reader_u32le(&r, &v));
        assert_int_equal(v, i);
    }
    GT_ASSERT_OK(gt_reader_expect_end(&r, "round trip"));
    gt_writer_free(&d);
}

static void hex_round_trip_and_errors(void **state)
{
    (void)state;
    const uint8_t in[] = {0x00, 0x9f, 0xa0, 0xff};
    char hex[9];
    gt_hex_encode(hex, sizeof hex, in, sizeof in);
    assert_string_equal(hex, "009fa0ff");
    uint8_t out[4] = {0};
    size_t n = 0;
    GT_ASSERT_OK(gt_hex_decode(out, sizeof out, &n, "009FA0ff"));
    assert_int_equal(n, 4);
    assert_memory_equal(out, in, 4);
    GT_ASSERT_CODE(gt_hex_decode(out, sizeof out, &n, "abc"), GT_E_FORMAT);
    GT_ASSERT_CODE(gt_hex_decode(out, sizeof out, &n, "zz"), GT_E_FORMAT);
    GT_ASSERT_CODE(gt_hex_decode(out, 1, &n, "0000"), GT_E_LIMIT);
    GT_ASSERT_CODE(gt_hex_decode_exact(out, 4, "00"), GT_E_FORMAT);
}

static void sizes_parse_and_format(void **state)
{
    (void)state;
    struct { const char *in; uint64_t want; } ok[] = {
        {"4096", 4096}, {"512MiB", 512ull << 20}, {"64M", 64ull << 20}, {"1G", 1ull << 30},
        {"1.5GiB", 3ull << 29}, {"2k", 2048}, {"7B", 7}, {"10MB", 10ull << 20},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 0;
        GT_ASSERT_OK(gt_parse_size(ok[i].in, &v));
        assert_true(v == ok[i].want);
    }
    const char *bad[] = {"", "-1", "12X", "M", "5Mx", "1e400"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 0;
        GT_ASSERT_CODE(gt_parse_size(bad[i], &v), GT_E_ARG);
    }
    char s[32];
    gt_format_size(s, sizeof s, 512ull << 20);
    assert_string_equal(s, "512.0 MiB");
    gt_format_size(s, sizeof s, 100);
    assert_string_equal(s, "100 B");
}

static void atomic_file_leaves_nothing_on_abort(void **state)
{
    (void)state;
    char dir[256], path[512];
    gt_test_tmpdir(dir, sizeof dir);
    GT_ASSERT_OK(gt_path_join(path, sizeof path, dir, "out.bin"));

    gt_atomic_file f;
    GT_ASSERT_OK(gt_atomic_file_open(&f, path, 0600));
    GT_ASSERT_OK(gt_atomic_file_write(&f, "half", 4));
    assert_false(gt_path_exists(path));  // not visible under its name before commit
    gt_atomic_file_abort(&f);
    assert_int_equal(gt_test_count_files(dir), 0);

    GT_ASSERT_OK(gt_file_write_atomic(path, "whole", 5, 0600));
    gt_buf b = {0};
    GT_ASSERT_OK(gt_file_read_all(path, 100, &b));
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.data, "whole", 5);
    gt_buf_free(&b);
    GT_ASSERT_CODE(gt_file_read_all(path, 4, &b), GT_E_LIMIT);
    assert_int_equal(gt_test_count_files(dir), 1);
    char missing[600];
    GT_ASSERT_OK(gt_path_join(missing, sizeof missing, dir, "nope"));
    GT_ASSERT_CODE(gt_file_read_all(missing, 4, &b), GT_E_NOTFOUND);
    gt_test_rmtree(dir);
}

static void json_getters_name_the_field(void **state)
{
    (void)state;
    const char *text = "{\"a\":\"x\",\"n\":42,\"big\":\"18446744073709551615\",\"f\":1.5,"
                       "\"b\":true,\"h\":\"0a0B\"}";
    cJSON *doc = NULL;
    GT_ASSERT_OK(gt_json_parse(text, strlen(text), &doc));
    const char *s = NULL;
    uint64_t n = 0;
    bool b = false;
    uint8_t h[2] = {0};
    GT_ASSERT_OK(gt_json_get_string(doc, "a", &s));
    assert_string_equal(s, "x");
    GT_ASSERT_OK(gt_json_get_u64(doc, "n", &n));
    assert_int_equal(n, 42);
    GT_ASSERT_OK(gt_json_get_u64(doc, "big", &n));
    assert_true(n == UINT64_MAX);
    GT_ASSERT_OK(gt_json_get_bool(doc, "b", &b));
    assert_true(b);
    GT_ASSERT_OK(gt_json_get_hex(doc, "h", h, 2));
    assert_int_equal(h[1], 0x0b);
    gt_err e = gt_json_get_u64(doc, "f", &n);
    assert_int_equal(e.code, GT_E_FORMAT);
    assert_non_null(strstr(e.msg, "'f'"));
    e = gt_json_get_string(doc, "missing", &s);
    assert_non_null(strstr(e.msg, "'missing'"));
    GT_ASSERT_CODE(gt_json_get_hex(doc, "h", h, 1), GT_E_FORMAT);
    cJSON_Delete(doc);
    GT_ASSERT_CODE(gt_json_parse("{\"a\":", 5, &doc), GT_E_FORMAT);
    assert_null(doc);
}

static void errors_wrap_and_name(void **state)
{
    (void)state;
    gt_err e = gt_err_wrap(gt_errf(GT_E_AUTH, "chunk %d", 3), "dataset %s", "d1");
    assert_int_equal(e.code, GT_E_AUTH);
    assert_string_equal(e.msg, "dataset d1: chunk 3");
    assert_string_equal(gt_code_name(GT_E_AUTH), "AUTH");
    assert_true(gt_is_ok(gt_err_wrap(GT_OK, "ignored")));
    uint8_t a[4] = {1, 2, 3, 4}, c[4] = {1, 2, 3, 5};
    assert_true(gt_ct_equal(a, a, 4));
    assert_false(gt_ct_equal(a, c, 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reader_reads_both_byte_orders),
        cmocka_unit_test(reader_failed_read_consumes_nothing),
        cmocka_unit_test(reader_sub_is_bounded),
        cmocka_unit_test(writer_fixed_and_dynamic),
        cmocka_unit_test(hex_round_trip_and_errors),
        cmocka_unit_test(sizes_parse_and_format),
        cmocka_unit_test(atomic_file_leaves_nothing_on_abort),
        cmocka_unit_test(json_getters_name_the_field),
        cmocka_unit_test(errors_wrap_and_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
