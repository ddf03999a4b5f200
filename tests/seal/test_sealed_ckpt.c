// data/: sealed checkpoints and recipient keys. Round trips for 1 and 3 recipients; a
// non-recipient and a wrong secret; the signer's signature (verifies by hand; a file re-sealed
// by another signing key for the same recipients is refused when the signer is pinned; spliced
// signatures and signer keys fail); every flipped bit of the header (signer key included) and
// of the signature, and a sample of the body; truncation at every header and trailer offset;
// recipient lists swapped between files; and every failure leaves no output file behind.
#include "testlib.h"

#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// A gt_err call failed with this code and a message naming why.
#define NKEYS 4  // alice, bob, carol are recipients somewhere; mallory never
static const char *const names[NKEYS] = {"alice", "bob", "carol", "mallory"};
static char dir[256], out_dir[512], model_path[512], big_model_path[512];
static char key_dirs[NKEYS][512];
static gt_recipient_keys rk[NKEYS];
// The trainer's signing key, and a forger's (who knows the recipients' public keys too).
static uint8_t signer_sec[GT_ED25519_SECRET_BYTES], signer_pub[GT_ED25519_PUBLIC_BYTES];
static uint8_t forger_sec[GT_ED25519_SECRET_BYTES], forger_pub[GT_ED25519_PUBLIC_BYTES];
static gt_buf model, big_model;  // llm.c files: 1024-byte header + weights
static const gt_sckpt_model shapes = {.max_seq_len = 64, .vocab_size = 256, .num_layers = 2,
                                      .num_heads = 4, .channels = 32, .padded_vocab_size = 256};

// An llm.c fp32 file with the given shapes and n_floats pseudo-random weights.
static void make_llmc(gt_buf *b, const gt_sckpt_model *m, size_t n_floats, uint64_t seed)
{
    b->len = 0;
    assert_int_equal(gt_buf_reserve(b, 1024 + 4 * n_floats).code, GT_E_NONE);
    memset(b->data, 0, 1024);
    uint32_t h[8] = {GT_SCKPT_LLMC_MAGIC, GT_SCKPT_LLMC_VERSION, m->max_seq_len, m->vocab_size,
                     m->num_layers, m->num_heads, m->channels, m->padded_vocab_size};
    for (int i = 0; i < 8; i++) {
        gt_store_u32le(b->data + 4 * i, h[i]);
    }
    uint64_t x = seed;
    for (size_t i = 0; i < 4 * n_floats; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b->data[1024 + i] = (uint8_t)x;
    }
    b->len = 1024 + 4 * n_floats;
}

static int setup(void **state)
{
    (void)state;
    gt_test_tmpdir(dir, sizeof dir);
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    snprintf(model_path, sizeof model_path, "%s/model.bin", dir);
    snprintf(big_model_path, sizeof big_model_path, "%s/big.bin", dir);
    GT_ASSERT_OK(gt_mkdir_p(out_dir, 0700));
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key_dirs[i], sizeof key_dirs[i], "%s/keys-%s", dir, names[i]);
        GT_ASSERT_OK(gt_keydir_generate(key_dirs[i], false, NULL));
        GT_ASSERT_OK(gt_keydir_recipient_load(key_dirs[i], &rk[i]));
    }
    GT_ASSERT_OK(gt_ed25519_keypair(signer_pub, signer_sec));
    GT_ASSERT_OK(gt_ed25519_keypair(forger_pub, forger_sec));
    make_llmc(&model, &shapes, 300, 1);
    GT_ASSERT_OK(gt_file_write_atomic(model_path, model.data, model.len, 0600));
    // Larger than the streaming buffer (256 KiB), so the body crosses several pieces.
    make_llmc(&big_model, &shapes, 200000, 2);
    GT_ASSERT_OK(gt_file_write_atomic(big_model_path, big_model.data, big_model.len, 0600));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NKEYS; i++) {
        gt_recipient_keys_wipe(&rk[i]);
    }
    gt_secure_zero(signer_sec, sizeof signer_sec);
    gt_secure_zero(forger_sec, sizeof forger_sec);
    gt_buf_free(&model);
    gt_buf_free(&big_model);
    gt_test_rmtree(dir);
    return 0;
}

// Seals `in` for the recipients listed by index (into names/rk), signed by `sec`.
static gt_err seal_signed(const char *in, const char *out, const int *who, uint32_t n,
                          uint64_t step, const uint8_t *sec, gt_sckpt_header *h)
{
    gt_sckpt_recipient r[GT_SCKPT_MAX_RECIPIENTS];
    memset(r, 0, sizeof r);
    for (uint32_t i = 0; i < n; i++) {
        snprintf(r[i].name, sizeof r[i].name, "%s", names[who[i]]);
        memcpy(r[i].pub, rk[who[i]].pub, GT_X25519_BYTES);
    }
    gt_sckpt_seal_params p = {.model_path = in, .out_path = out, .step = step, .model = shapes,
                              .recipients = r, .recipient_count = n, .signing_secret = sec};
    memset(p.agreement_hash, 0xA5, sizeof p.agreement_hash);
    return gt_sckpt_seal(&p, h);
}

// ... signed by the trainer's key.
static gt_err seal_for(const char *in, const char *out, const int *who, uint32_t n,
                       uint64_t step, gt_sckpt_header *h)
{
    return seal_signed(in, out, who, n, step, signer_sec, h);
}

static void opened_path(char *out, size_t cap)
{
    snprintf(out, cap, "%s/opened.bin", out_dir);
}

static void assert_nothing_left(void)
{
    assert_int_equal(gt_test_count_files(out_dir), 0);
}

static void assert_opens_to(const char *sealed, int who, const gt_buf *want)
{
    char out[600];
    opened_path(out, sizeof out);
    gt_sckpt_header h;
    uint32_t me = 99;
    GT_ASSERT_OK(gt_sckpt_open(sealed, &rk[who], signer_pub, out, &h, &me));
    assert_string_equal(h.recipients[me].name, names[who]);
    assert_memory_equal(h.signer_pub, signer_pub, GT_ED25519_PUBLIC_BYTES);
    gt_buf got = {0};
    GT_ASSERT_OK(gt_file_read_all(out, 1u << 24, &got));
    assert_int_equal(got.len, want->len);
    assert_memory_equal(got.data, want->data, want->len);
    gt_buf_free(&got);
    struct stat st;
    assert_int_equal(stat(out, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);  // plaintext weights: owner only
    unlink(out);
}

static void round_trip_one_and_three(void **state)
{
    (void)state;
    char sealed[600];
    snprintf(sealed, sizeof sealed, "%s/one.sealed", dir);
    gt_sckpt_header h;
    GT_ASSERT_OK(seal_for(model_path, sealed, (const int[]){0}, 1, 17, &h));
    assert_int_equal(h.recipient_count, 1);
    assert_int_equal(h.header_len, GT_SCKPT_FIXED_BYTES + 96 + 48);
    assert_int_equal(h.version, 2);
    assert_memory_equal(h.signer_pub, signer_pub, GT_ED25519_PUBLIC_BYTES);
    assert_opens_to(sealed, 0, &model);

    snprintf(sealed, sizeof sealed, "%s/three.sealed", dir);
    GT_ASSERT_OK(seal_for(big_model_path, sealed, (const int[]){0, 1, 2}, 3, 600, &h));
    gt_sckpt_header r;
    GT_ASSERT_OK(gt_sckpt_read_header(sealed, &r));  // keyless: what inspect shows
    assert_int_equal(r.step, 600);
    assert_int_equal(r.recipient_count, 3);
    assert_string_equal(r.recipients[2].name, "carol");
    assert_memory_equal(r.recipients[1].pub, rk[1].pub, GT_X25519_BYTES);
    assert_int_equal(r.model.channels, 32);
    assert_int_equal(r.agreement_hash[31], 0xA5);
    assert_int_equal(r.plaintext_len, big_model.len);
    assert_int_equal(gt_sckpt_file_bytes(&r), r.header_len + big_model.len + 16 + 64);
    assert_memory_equal(r.signer_pub, signer_pub, GT_ED25519_PUBLIC_BYTES);
    for (int who = 0; who < 3; who++) {
        assert_opens_to(sealed, who, &big_model);
    }
    // Two seals of the same file differ (fresh content key, IV and ephemeral key).
    char again[600];
    snprintf(again, sizeof again, "%s/again.sealed", dir);
    GT_ASSERT_OK(seal_for(big_model_path, again, (const int[]){0, 1, 2}, 3, 600, NULL));
    gt_sckpt_header r2;
    GT_ASSERT_OK(gt_sckpt_read_header(again, &r2));
    assert_memory_not_equal(r.ephemeral_pub, r2.ephemeral_pub, GT_X25519_BYTES);
    assert_memory_not_equal(r.wraps[0], r2.wraps[0], GT_SCKPT_WRAP_BYTES);
    assert_nothing_left();
}

static void non_recipient_and_wrong_key(void **state)
{
    (void)state;
    char sealed[600], out[600];
    snprintf(sealed, sizeof sealed, "%s/ab.sealed", dir);
    opened_path(out, sizeof out);
    GT_ASSERT_OK(seal_for(model_path, sealed, (const int[]){0, 1}, 2, 5, NULL));
    gt_err e = gt_sckpt_open(sealed, &rk[3], NULL, out, NULL, NULL);
    assert_int_equal(e.code, GT_E_NOTFOUND);
    assert_non_null(strstr(e.msg, "not a recipient"));
    assert_non_null(strstr(e.msg, "alice, bob"));
    assert_nothing_left();
    // alice's public key with another secret: the key it was wrapped to is not this one.
    gt_recipient_keys forged = rk[3];
    memcpy(forged.pub, rk[0].pub, GT_X25519_BYTES);
    e = gt_sckpt_open(sealed, &forged, NULL, out, NULL, NULL);
    assert_int_equal(e.code, GT_E_AUTH);
    assert_non_null(strstr(e.msg, "'alice'"));
    gt_recipient_keys_wipe(&forged);
    assert_nothing_left();
}

static void flip_bit(const char *path, size_t at, int bit)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b = 0;
    assert_int_equal(pread(fd, &b, 1, (off_t)at), 1);
    b ^= (uint8_t)(1u << bit);
    assert_int_equal(pwrite(fd, &b, 1, (off_t)at), 1);
    close(fd);
}

// Fields whose flips only the AEADs can notice: they must fail with GT_E_AUTH exactly.
static bool auth_only(size_t at, const gt_sckpt_header *h)
{
    return (at >= 20 && at < 60) ||    // agreement hash, step
           (at >= 92 && at < 168) ||   // body IV, ephemeral public key, signer key
           (at >= h->bound_len && at < h->header_len);  // every recipient's wrap
}

static void every_header_bit_and_sampled_body_bits(void **state)
{
    (void)state;
    char sealed[600], out[600];
    snprintf(sealed, sizeof sealed, "%s/flip.sealed", dir);
    opened_path(out, sizeof out);
    gt_sckpt_header h;
    GT_ASSERT_OK(seal_for(model_path, sealed, (const int[]){0, 1, 2}, 3, 9, &h));
    const uint64_t total = gt_sckpt_file_bytes(&h);
    // Opened by bob (the middle entry): a flip in anyone's entry or wrap must fail too.
    for (size_t at = 0; at < h.header_len; at++) {
        for (int bit = 0; bit < 8; bit++) {
            flip_bit(sealed, at, bit);
            gt_err e = gt_sckpt_open(sealed, &rk[1], NULL, out, NULL, NULL);
            flip_bit(sealed, at, bit);
            if (e.code == GT_E_NONE || (auth_only(at, &h) && e.code != GT_E_AUTH)) {
                fail_msg("header byte %zu bit %d: %s (%s)", at, bit, gt_code_name(e.code),
                         e.msg);
            }
            assert_false(gt_path_exists(out));
        }
    }
    // The body: every byte of the llm.c header part and a stride through the weights and tag;
    // then every bit of the signature.
    const uint64_t sig_at = total - GT_SCKPT_SIG_BYTES;
    for (uint64_t at = h.header_len; at < sig_at; at += (at < h.header_len + 64 ? 1 : 37)) {
        flip_bit(sealed, (size_t)at, (int)(at % 8));
        gt_err e = gt_sckpt_open(sealed, &rk[0], NULL, out, NULL, NULL);
        flip_bit(sealed, (size_t)at, (int)(at % 8));
        if (e.code != GT_E_AUTH) {
            fail_msg("body byte %llu: %s (%s)", (unsigned long long)at, gt_code_name(e.code),
                     e.msg);
        }
        assert_false(gt_path_exists(out));
    }
    for (uint64_t at = sig_at; at < total; at++) {
        for (int bit = 0; bit < 8; bit++) {
            flip_bit(sealed, (size_t)at, bit);
            gt_err e = gt_sckpt_open(sealed, &rk[0], NULL, out, NULL, NULL);
            flip_bit(sealed, (size_t)at, bit);
            if (e.code != GT_E_AUTH || strstr(e.msg, "signature does not verify") == NULL) {
                fail_msg("signature byte %llu bit %d: %s (%s)", (unsigned long long)at, bit,
                         gt_code_name(e.code), e.msg);
            }
            assert_false(gt_path_exists(out));
        }
    }
    flip_bit(sealed, (size_t)sig_at - 1, 7);  // the tag's last bit
    GT_ASSERT_CODE(gt_sckpt_open(sealed, &rk[2], NULL, out, NULL, NULL), GT_E_AUTH);
    flip_bit(sealed, (size_t)sig_at - 1, 7);
    assert_opens_to(sealed, 2, &model);  // unchanged after all that
    assert_nothing_left();
}

// Plain write, no fsync: for the many short-lived files of the loops below.
static void write_plain(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(n == 0 || fwrite(data, 1, n, fp) == n, 1);
    assert_int_equal(fclose(fp), 0);
}

static void truncation_at_every_header_offset(void **state)
{
    (void)state;
    char sealed[600], cut[600], out[600];
    snprintf(sealed, sizeof sealed, "%s/whole.sealed", dir);
    snprintf(cut, sizeof cut, "%s/cut.sealed", dir);
    opened_path(out, sizeof out);
    gt_sckpt_header h;
    GT_ASSERT_OK(seal_for(model_path, sealed, (const int[]){0, 1}, 2, 3, &h));
    gt_buf whole = {0};
    GT_ASSERT_OK(gt_file_read_all(sealed, 1u << 20, &whole));
    // The parser on every prefix of the header: truncated, nothing half-filled.
    for (size_t n = 0; n < h.header_len; n++) {
        gt_sckpt_header p;
        GT_ASSERT_CODE(gt_sckpt_header_parse(&p, whole.data, n), GT_E_TRUNCATED);
        assert_int_equal(p.recipient_count, 0);
        assert_int_equal(p.header_len, 0);
    }
    // The file cut at every header offset and at sampled body offsets: truncated, no output.
    for (size_t n = 0; n < whole.len;
         n += (n <= h.header_len + 40 || n + 100 >= whole.len ? 1 : 101)) {
        write_plain(cut, whole.data, n);
        gt_err e = gt_sckpt_open(cut, &rk[0], NULL, out, NULL, NULL);
        if (e.code != GT_E_TRUNCATED) {
            fail_msg("cut at %zu: %s (%s)", n, gt_code_name(e.code), e.msg);
        }
        assert_false(gt_path_exists(out));
    }
    // One byte too many is refused as well.
    GT_ASSERT_OK(gt_buf_append(&whole, "x", 1));
    GT_ASSERT_OK(gt_file_write_atomic(cut, whole.data, whole.len, 0644));
    GT_ASSERT_CODE(gt_sckpt_open(cut, &rk[0], NULL, out, NULL, NULL), GT_E_FORMAT);
    gt_buf_free_nowipe(&whole);
    assert_nothing_left();
}

// Recipient lists (and wraps) moved from one file into another never open.
static void recipient_lists_swapped(void **state)
{
    (void)state;
    char a_path[600], b_path[600], mixed[600], out[600];
    snprintf(a_path, sizeof a_path, "%s/a.sealed", dir);
    snprintf(b_path, sizeof b_path, "%s/b.sealed", dir);
    snprintf(mixed, sizeof mixed, "%s/mixed.sealed", dir);
    opened_path(out, sizeof out);
    gt_sckpt_header ha, hb;
    GT_ASSERT_OK(seal_for(model_path, a_path, (const int[]){0, 1}, 2, 4, &ha));  // alice, bob
    GT_ASSERT_OK(seal_for(model_path, b_path, (const int[]){0, 2}, 2, 4, &hb));  // alice, carol
    assert_int_equal(ha.header_len, hb.header_len);
    gt_buf a = {0}, b = {0};
    GT_ASSERT_OK(gt_file_read_all(a_path, 1u << 20, &a));
    GT_ASSERT_OK(gt_file_read_all(b_path, 1u << 20, &b));
    const size_t list = GT_SCKPT_FIXED_BYTES;
    // 1. A's file with B's recipient list: carol is named but A was never sealed for her.
    memcpy(a.data + list, b.data + list, ha.bound_len - list);
    write_plain(mixed, a.data, a.len);
    GT_ASSERT_CODE(gt_sckpt_open(mixed, &rk[2], NULL, out, NULL, NULL), GT_E_AUTH);
    GT_ASSERT_CODE(gt_sckpt_open(mixed, &rk[0], NULL, out, NULL, NULL), GT_E_AUTH);
    GT_ASSERT_CODE(gt_sckpt_open(mixed, &rk[1], NULL, out, NULL, NULL), GT_E_NOTFOUND);
    // 2. B's whole list and wraps (its ephemeral key too) on A's body.
    memcpy(a.data + 104, b.data + 104, hb.header_len - 104);
    write_plain(mixed, a.data, a.len);
    GT_ASSERT_CODE(gt_sckpt_open(mixed, &rk[2], NULL, out, NULL, NULL), GT_E_AUTH);
    GT_ASSERT_CODE(gt_sckpt_open(mixed, &rk[0], NULL, out, NULL, NULL), GT_E_AUTH);
    // 3. Two entries' order swapped (names, keys and wraps together) in B.
    memcpy(a.data, b.data, b.len);
    uint8_t tmp[GT_SCKPT_RECIPIENT_BYTES];
    memcpy(tmp, a.data + list, sizeof tmp);
    memcpy(a.data + list, a.data + list + sizeof tmp, sizeof tmp);
    memcpy(a.data + list + sizeof tmp, tmp, sizeof tmp);
    uint8_t w[GT_SCKPT_WRAP_BYTES];
    memcpy(w, a.data + hb.bound_len, sizeof w);
    memcpy(a.data + hb.bound_len, a.data + hb.bound_len + sizeof w, sizeof w);
    memcpy(a.data + hb.bound_len + sizeof w, w, sizeof w);
    write_plain(mixed, a.data, a.len);
    GT_ASSERT_CODE(gt_sckpt_open(mixed, &rk[0], NULL, out, NULL, NULL), GT_E_AUTH);
    GT_ASSERT_CODE(gt_sckpt_open(mixed, &rk[2], NULL, out, NULL, NULL), GT_E_AUTH);
    gt_buf_free_nowipe(&a);
    gt_buf_free_nowipe(&b);
    assert_nothing_left();
}

// Who sealed it: the signature verifies by hand over SHA-256(everything before it); a file
// re-sealed by another signing key for the same recipients opens only when nobody pins the
// signer, and is refused (GT_E_POLICY, before decrypting) when the trainer's key is pinned;
// splicing the trainer's key or signature into the forgery fails (GT_E_AUTH).
static void signer_is_proved(void **state)
{
    (void)state;
    char genuine[600], forged[600], mixed[600], out[600];
    snprintf(genuine, sizeof genuine, "%s/genuine.sealed", dir);
    snprintf(forged, sizeof forged, "%s/forged.sealed", dir);
    snprintf(mixed, sizeof mixed, "%s/spliced.sealed", dir);
    opened_path(out, sizeof out);
    gt_sckpt_header hg, hf;
    GT_ASSERT_OK(seal_for(model_path, genuine, (const int[]){0, 1}, 2, 8, &hg));
    GT_ASSERT_OK(seal_signed(model_path, forged, (const int[]){0, 1}, 2, 8, forger_sec, &hf));
    assert_memory_equal(hf.signer_pub, forger_pub, GT_ED25519_PUBLIC_BYTES);
    assert_int_equal(hg.header_len, hf.header_len);

    gt_buf g = {0}, f = {0};
    GT_ASSERT_OK(gt_file_read_all(genuine, 1u << 20, &g));
    GT_ASSERT_OK(gt_file_read_all(forged, 1u << 20, &f));
    assert_int_equal(g.len, gt_sckpt_file_bytes(&hg));
    // The signature by hand: Ed25519(signer, SHA-256(header | ciphertext | tag)), at the end.
    uint8_t digest[GT_SHA256_BYTES];
    const size_t signed_len = g.len - GT_SCKPT_SIG_BYTES;
    GT_ASSERT_OK(gt_hash(GT_HASH_SHA256, digest, g.data, signed_len));
    GT_ASSERT_OK(gt_ed25519_verify(g.data + signed_len, digest, sizeof digest, signer_pub));
    GT_ASSERT_CODE(gt_ed25519_verify(g.data + signed_len, digest, sizeof digest, forger_pub),
                   GT_E_AUTH);
    assert_memory_equal(g.data + GT_SCKPT_SIGNER_OFFSET, signer_pub, GT_ED25519_PUBLIC_BYTES);

    // The forgery is a well-formed file: unpinned, the recipient can open it ...
    GT_ASSERT_OK(gt_sckpt_open(forged, &rk[0], NULL, out, NULL, NULL));
    unlink(out);
    // ... pinned to the trainer's key (what the ledger holds), it is refused before decrypting.
    gt_err e = gt_sckpt_open(forged, &rk[0], signer_pub, out, NULL, NULL);
    assert_int_equal(e.code, GT_E_POLICY);
    assert_non_null(strstr(e.msg, "sealed by signing key"));
    assert_false(gt_path_exists(out));
    GT_ASSERT_CODE(gt_sckpt_open(genuine, &rk[1], forger_pub, out, NULL, NULL), GT_E_POLICY);
    assert_false(gt_path_exists(out));
    assert_opens_to(genuine, 1, &model);

    // Splices: the trainer's key named in the forgery (the wraps bind it) ...
    memcpy(f.data + GT_SCKPT_SIGNER_OFFSET, signer_pub, GT_ED25519_PUBLIC_BYTES);
    write_plain(mixed, f.data, f.len);
    GT_ASSERT_CODE(gt_sckpt_open(mixed, &rk[0], signer_pub, out, NULL, NULL), GT_E_AUTH);
    memcpy(f.data + GT_SCKPT_SIGNER_OFFSET, forger_pub, GT_ED25519_PUBLIC_BYTES);
    // ... the genuine signature on the forgery, and the forger's signature on the genuine file.
    memcpy(f.data + signed_len, g.data + signed_len, GT_SCKPT_SIG_BYTES);
    write_plain(mixed, f.data, f.len);
    GT_ASSERT_CODE(gt_sckpt_open(mixed, &rk[0], NULL, out, NULL, NULL), GT_E_AUTH);
    gt_buf_free_nowipe(&f);
    GT_ASSERT_OK(gt_file_read_all(forged, 1u << 20, &f));
    memcpy(g.data + signed_len, f.data + signed_len, GT_SCKPT_SIG_BYTES);
    write_plain(mixed, g.data, g.len);
    e = gt_sckpt_open(mixed, &rk[0], signer_pub, out, NULL, NULL);
    assert_int_equal(e.code, GT_E_AUTH);
    assert_non_null(strstr(e.msg, "signature does not verify"));
    // A version-1 (unsigned) header is refused as such.
    gt_buf_free_nowipe(&g);
    GT_ASSERT_OK(gt_file_read_all(genuine, 1u << 20, &g));
    gt_store_u32le(g.data + 8, 1);
    gt_sckpt_header p;
    e = gt_sckpt_header_parse(&p, g.data, g.len);
    assert_int_equal(e.code, GT_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "unsigned"));
    gt_buf_free_nowipe(&g);
    gt_buf_free_nowipe(&f);
    assert_nothing_left();
}

static void seal_refuses_bad_input(void **state)
{
    (void)state;
    char sealed[600];
    snprintf(sealed, sizeof sealed, "%s/out/refused.sealed", dir);
    // duplicate names or keys
    GT_ASSERT_CODE(seal_for(model_path, sealed, (const int[]){1, 1}, 2, 1, NULL), GT_E_FORMAT);
    GT_ASSERT_CODE(seal_for(model_path, sealed, (const int[]){0}, 0, 1, NULL), GT_E_FORMAT);
    // no signing key
    GT_ASSERT_CODE(seal_signed(model_path, sealed, (const int[]){0}, 1, 1, NULL, NULL), GT_E_ARG);
    // a model whose llm.c header disagrees with the sealed config
    gt_buf other = {0};
    gt_sckpt_model m = shapes;
    m.channels = 64;
    make_llmc(&other, &m, 10, 3);
    char other_path[600];
    snprintf(other_path, sizeof other_path, "%s/other.bin", dir);
    GT_ASSERT_OK(gt_file_write_atomic(other_path, other.data, other.len, 0600));
    gt_err e = seal_for(other_path, sealed, (const int[]){0}, 1, 1, NULL);
    assert_int_equal(e.code, GT_E_FORMAT);
    assert_non_null(strstr(e.msg, "differ from the sealed config"));
    // too short to be an llm.c file; missing
    GT_ASSERT_OK(gt_file_write_atomic(other_path, other.data, 20, 0600));
    GT_ASSERT_CODE(seal_for(other_path, sealed, (const int[]){0}, 1, 1, NULL), GT_E_FORMAT);
    unlink(other_path);
    GT_ASSERT_CODE(seal_for(other_path, sealed, (const int[]){0}, 1, 1, NULL), GT_E_NOTFOUND);
    gt_buf_free(&other);
    assert_nothing_left();
}

static void recipient_keys_in_key_folders(void **state)
{
    (void)state;
    char kd[600], p[700];
    snprintf(kd, sizeof kd, "%s/old-keys", dir);
    GT_ASSERT_OK(gt_keydir_generate(kd, false, NULL));
    gt_recipient_keys k;
    GT_ASSERT_OK(gt_keydir_recipient_load(kd, &k));
    uint8_t pub[GT_X25519_BYTES], derived[GT_X25519_BYTES];
    GT_ASSERT_OK(gt_x25519_public(derived, k.sec));
    assert_memory_equal(derived, k.pub, GT_X25519_BYTES);
    GT_ASSERT_OK(gt_recipient_pub_load(kd, pub));
    assert_memory_equal(pub, k.pub, GT_X25519_BYTES);
    snprintf(p, sizeof p, "%s/%s", kd, GT_KEYDIR_RECIPIENT_SECRET);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    // A folder from before recipient keys: loading says how to add one; adding keeps the rest.
    gt_holder_keys before, after;
    GT_ASSERT_OK(gt_keydir_load(kd, &before));
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", kd, GT_KEYDIR_RECIPIENT_PUBLIC);
    unlink(p);
    gt_err e = gt_keydir_recipient_load(kd, &k);
    assert_int_equal(e.code, GT_E_NOTFOUND);
    assert_non_null(strstr(e.msg, "--add-recipient-key"));
    assert_int_equal(k.sec[0] | k.pub[0], 0);
    GT_ASSERT_OK(gt_keydir_recipient_generate(kd, false, pub));
    GT_ASSERT_CODE(gt_keydir_recipient_generate(kd, false, NULL), GT_E_STATE);
    GT_ASSERT_OK(gt_keydir_recipient_load(kd, &k));
    assert_memory_equal(pub, k.pub, GT_X25519_BYTES);
    GT_ASSERT_OK(gt_keydir_load(kd, &after));
    assert_memory_equal(&before, &after, sizeof before);
    // Not a key folder at all.
    GT_ASSERT_CODE(gt_keydir_recipient_generate(out_dir, false, NULL), GT_E_NOTFOUND);
    // A secret whose public half was replaced.
    snprintf(p, sizeof p, "%s/%s", kd, GT_KEYDIR_RECIPIENT_SECRET);
    gt_buf f = {0};
    GT_ASSERT_OK(gt_file_read_all(p, 4096, &f));
    f.data[8 + 32] ^= 1;
    GT_ASSERT_OK(gt_file_write_atomic(p, f.data, f.len, 0600));
    GT_ASSERT_CODE(gt_keydir_recipient_load(kd, &k), GT_E_FORMAT);
    gt_buf_free(&f);
    gt_holder_keys_wipe(&before);
    gt_holder_keys_wipe(&after);
    gt_recipient_keys_wipe(&k);
}

// Sealing from memory, and from pieces through a source callback into a sink callback, is the
// file path's format: gt_sckpt_open gives back the plaintext byte for byte; a source whose
// header disagrees with the config, or that ends early, is refused and nothing is handed back.
typedef struct {
    const gt_buf *b;
    size_t at, calls;
} pieces_ctx;

static gt_err pieces_read(void *ctx, uint8_t *out, size_t n)
{
    pieces_ctx *c = ctx;
    // Hands out at most 1000 bytes per call, so the core must ask again.
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 1000 ? n - done : 1000;
        if (c->at + k > c->b->len) {
            return gt_errf(GT_E_TRUNCATED, "test source ends at %zu", c->b->len);
        }
        memcpy(out + done, c->b->data + c->at, k);
        c->at += k;
        done += k;
        c->calls++;
    }
    return GT_OK;
}

static gt_err file_sink(void *ctx, const uint8_t *data, size_t n)
{
    return gt_atomic_file_write(ctx, data, n);
}

static void sealed_from_memory_and_pieces(void **state)
{
    (void)state;
    gt_sckpt_recipient r[2];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 2; i++) {
        snprintf(r[i].name, sizeof r[i].name, "%s", names[i]);
        memcpy(r[i].pub, rk[i].pub, GT_X25519_BYTES);
    }
    gt_sckpt_seal_params p = {.step = 9, .model = shapes, .recipients = r, .recipient_count = 2,
                              .signing_secret = signer_sec};
    memset(p.agreement_hash, 0xA5, sizeof p.agreement_hash);
    gt_buf sealed = {0};
    gt_sckpt_header h;
    GT_ASSERT_OK(gt_sckpt_seal_mem(&p, gt_buf_span(&big_model), &sealed, &h));
    assert_int_equal(sealed.len, gt_sckpt_file_bytes(&h));
    char path[600];
    snprintf(path, sizeof path, "%s/mem.sealed", dir);
    GT_ASSERT_OK(gt_file_write_atomic(path, sealed.data, sealed.len, 0644));
    assert_opens_to(path, 0, &big_model);
    assert_opens_to(path, 1, &big_model);
    gt_buf_free_nowipe(&sealed);

    // Pieces through the callbacks, straight into a file.
    pieces_ctx c = {.b = &model};
    gt_seal_source src = {.len = model.len, .read = pieces_read, .ctx = &c};
    gt_atomic_file f;
    GT_ASSERT_OK(gt_atomic_file_open(&f, path, 0644));
    gt_seal_sink sink = {.write = file_sink, .ctx = &f};
    GT_ASSERT_OK(gt_sckpt_seal_to(&p, &src, &sink, NULL));
    GT_ASSERT_OK(gt_atomic_file_commit(&f));
    assert_true(c.calls > 1);
    assert_int_equal(c.at, model.len);
    assert_opens_to(path, 1, &model);

    // A source that claims more than it has: refused, nothing handed back.
    c = (pieces_ctx){.b = &model};
    src.len = model.len + 5000;
    gt_buf none = {0};
    GT_ASSERT_OK(gt_atomic_file_open(&f, path, 0644));
    GT_ASSERT_ERR(gt_sckpt_seal_to(&p, &src, &sink, NULL), GT_E_TRUNCATED, "test source ends");
    gt_atomic_file_abort(&f);
    // Other shapes than the config: refused before any byte is written.
    gt_sckpt_seal_params q = p;
    q.model.channels = 64;
    GT_ASSERT_ERR(gt_sckpt_seal_mem(&q, gt_buf_span(&model), &none, NULL), GT_E_FORMAT,
                  "differ from the sealed config");
    assert_int_equal(none.len, 0);
    gt_buf_free_nowipe(&none);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_one_and_three),
        cmocka_unit_test(non_recipient_and_wrong_key),
        cmocka_unit_test(every_header_bit_and_sampled_body_bits),
        cmocka_unit_test(truncation_at_every_header_offset),
        cmocka_unit_test(recipient_lists_swapped),
        cmocka_unit_test(signer_is_proved),
        cmocka_unit_test(seal_refuses_bad_input),
        cmocka_unit_test(recipient_keys_in_key_folders),
        cmocka_unit_test(sealed_from_memory_and_pieces),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
