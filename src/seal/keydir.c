// A holder's key folder: Ed25519 identity (signs manifests), the 32-byte dataset key (from
// which every chunk key is derived) and an X25519 recipient key (sealed checkpoints are wrapped
// to it). Formats: docs/formats.md "Key folder".
#include <gputravel/data.h>
#include <gputravel/seal.h>

#include <string.h>
#include <sys/stat.h>

#define SECRET_MAGIC "GTEDSEC1"
#define PUBLIC_MAGIC "GTEDPUB1"
#define DSKEY_MAGIC "GTDSKEY1"
#define XSEC_MAGIC "GTXSEC01"
#define XPUB_MAGIC "GTXPUB01"

void gt_holder_keys_wipe(gt_holder_keys *keys)
{
    gt_secure_zero(keys, sizeof *keys);
}

static gt_err write_key_file(const char *dir, const char *name, const char *magic,
                             const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len)
{
    char path[4096];
    GT_TRY(gt_path_join(path, sizeof path, dir, name));
    uint8_t buf[8 + 64];
    memcpy(buf, magic, 8);
    memcpy(buf + 8, a, a_len);
    if (b_len > 0) {
        memcpy(buf + 8 + a_len, b, b_len);
    }
    gt_err err = gt_file_write_atomic(path, buf, 8 + a_len + b_len, 0600);
    gt_secure_zero(buf, sizeof buf);
    return err;
}

// Reads DIR/name: exactly magic || out_len bytes.
static gt_err read_key_file(const char *dir, const char *name, const char *magic, uint8_t *out,
                            size_t out_len)
{
    char path[4096];
    GT_TRY(gt_path_join(path, sizeof path, dir, name));
    gt_buf b = {0};
    gt_err err = gt_file_read_all(path, 4096, &b);
    if (err.code == GT_E_NOTFOUND) {
        return gt_errf(GT_E_NOTFOUND, "%s: missing (is %s a key folder from gputravel keygen?)",
                       path, dir);
    }
    GT_TRY(err);
    gt_reader r = gt_reader_init(b.data, b.len);
    uint8_t m[8] = {0};
    GT_TRY_GOTO(err, gt_reader_bytes(&r, m, sizeof m), out);
    GT_ENSURE_GOTO(err, memcmp(m, magic, 8) == 0, out, GT_E_FORMAT, "bad magic (expected %.8s)",
                   magic);
    GT_TRY_GOTO(err, gt_reader_bytes(&r, out, out_len), out);
    GT_TRY_GOTO(err, gt_reader_expect_end(&r, name), out);
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & 077) != 0 && strcmp(magic, PUBLIC_MAGIC) != 0 &&
        strcmp(magic, XPUB_MAGIC) != 0) {
        gt_log_warn("%s is readable by other users (mode %03o); chmod 600 it", path,
                    (unsigned)(st.st_mode & 0777));
    }
out:
    gt_buf_free(&b);
    if (err.code != GT_E_NONE) {
        gt_secure_zero(out, out_len);
        return gt_err_wrap(err, "%s", path);
    }
    return GT_OK;
}

// The recipient key pair: secret file first, the .pub last (as for the identity).
static gt_err write_recipient(const char *dir, uint8_t pub_out[GT_X25519_BYTES])
{
    gt_recipient_keys k;
    memset(&k, 0, sizeof k);
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_x25519_keypair(k.pub, k.sec), out);
    GT_TRY_GOTO(err, write_key_file(dir, GT_KEYDIR_RECIPIENT_SECRET, XSEC_MAGIC, k.sec,
                                    sizeof k.sec, k.pub, sizeof k.pub), out);
    GT_TRY_GOTO(err, write_key_file(dir, GT_KEYDIR_RECIPIENT_PUBLIC, XPUB_MAGIC, k.pub,
                                    sizeof k.pub, NULL, 0), out);
    if (pub_out != NULL) {
        memcpy(pub_out, k.pub, sizeof k.pub);
    }
out:
    gt_recipient_keys_wipe(&k);
    return err;
}

_Static_assert(GT_ED25519_SECRET_BYTES == 32 && GT_ED25519_PUBLIC_BYTES == 32 &&
                   GT_X25519_BYTES == 32, "read_key_pair reads 32-byte halves");

// A key file holding secret (32) || public (32), both 32-byte keys of one scheme: the public half
// must be the one `derive` computes from the secret half.
static gt_err read_key_pair(const char *dir, const char *name, const char *magic,
                            uint8_t sec[32], uint8_t pub[32],
                            gt_err (*derive)(uint8_t pub[32], const uint8_t sec[32]))
{
    uint8_t sec_pub[64] = {0}, derived[32] = {0};
    gt_err err = read_key_file(dir, name, magic, sec_pub, sizeof sec_pub);
    if (err.code == GT_E_NONE) {
        memcpy(sec, sec_pub, 32);
        memcpy(pub, sec_pub + 32, 32);
        err = derive(derived, sec);
    }
    if (err.code == GT_E_NONE && memcmp(derived, pub, sizeof derived) != 0) {
        err = gt_errf(GT_E_FORMAT, "%s/%s: the public key does not belong to the secret key", dir,
                      name);
    }
    gt_secure_zero(sec_pub, sizeof sec_pub);
    return err;
}

gt_err gt_keydir_generate(const char *dir, bool overwrite, gt_holder_keys *keys_out)
{
    static const char *const names[] = {GT_KEYDIR_HOLDER_SECRET, GT_KEYDIR_HOLDER_PUBLIC,
                                        GT_KEYDIR_DATASET_KEY, GT_KEYDIR_RECIPIENT_SECRET,
                                        GT_KEYDIR_RECIPIENT_PUBLIC};
    GT_TRY(gt_mkdir_p(dir, 0700));
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !overwrite; i++) {
        char path[4096];
        GT_TRY(gt_path_join(path, sizeof path, dir, names[i]));
        GT_ENSURE(!gt_path_exists(path), GT_E_STATE,
                  "%s already exists: refusing to replace keys (--force replaces them, and "
                  "datasets sealed with the old keys can then no longer be opened)",
                  path);
    }
    gt_holder_keys k;
    memset(&k, 0, sizeof k);
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_ed25519_keypair(k.holder_pub, k.holder_sec), out);
    GT_TRY_GOTO(err, gt_random_bytes(k.dataset_key, sizeof k.dataset_key), out);
    GT_TRY_GOTO(err, write_recipient(dir, NULL), out);
    // the public key last: a folder with a .pub has its secrets complete
    GT_TRY_GOTO(err, write_key_file(dir, GT_KEYDIR_DATASET_KEY, DSKEY_MAGIC, k.dataset_key,
                                    sizeof k.dataset_key, NULL, 0), out);
    GT_TRY_GOTO(err, write_key_file(dir, GT_KEYDIR_HOLDER_SECRET, SECRET_MAGIC, k.holder_sec,
                                    sizeof k.holder_sec, k.holder_pub, sizeof k.holder_pub), out);
    GT_TRY_GOTO(err, write_key_file(dir, GT_KEYDIR_HOLDER_PUBLIC, PUBLIC_MAGIC, k.holder_pub,
                                    sizeof k.holder_pub, NULL, 0), out);
    if (keys_out != NULL) {
        *keys_out = k;
    }
out:
    gt_holder_keys_wipe(&k);
    return err;
}

gt_err gt_keydir_load(const char *dir, gt_holder_keys *keys)
{
    memset(keys, 0, sizeof *keys);
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, read_key_pair(dir, GT_KEYDIR_HOLDER_SECRET, SECRET_MAGIC, keys->holder_sec,
                                   keys->holder_pub, gt_ed25519_public), out);
    GT_TRY_GOTO(err, read_key_file(dir, GT_KEYDIR_DATASET_KEY, DSKEY_MAGIC, keys->dataset_key,
                                   sizeof keys->dataset_key), out);
out:
    if (err.code != GT_E_NONE) {
        gt_holder_keys_wipe(keys);
    }
    return err;
}

gt_err gt_keydir_load_identity(const char *dir, gt_holder_keys *keys)
{
    memset(keys, 0, sizeof *keys);
    gt_err err = read_key_pair(dir, GT_KEYDIR_HOLDER_SECRET, SECRET_MAGIC, keys->holder_sec,
                               keys->holder_pub, gt_ed25519_public);
    if (err.code != GT_E_NONE) {
        gt_holder_keys_wipe(keys);
    }
    return err;
}

// A public key given as a key folder (its file `name_in_dir`), 2*len hex digits, or a .pub file.
static gt_err public_key_load(const char *spec, const char *name_in_dir, const char *magic,
                              uint8_t *pub, size_t len)
{
    struct stat st;
    if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
        return read_key_file(spec, name_in_dir, magic, pub, len);
    }
    if (stat(spec, &st) != 0 && strlen(spec) == 2 * len) {
        return gt_hex_decode_exact(pub, len, spec);
    }
    // a .pub file: read it through its folder and name
    char dir[4096];
    GT_ENSURE(strlen(spec) < sizeof dir, GT_E_LIMIT, "path too long: %s", spec);
    snprintf(dir, sizeof dir, "%s", spec);
    char *slash = strrchr(dir, '/');
    const char *name = spec;
    if (slash != NULL) {
        *slash = '\0';
        name = spec + (slash - dir) + 1;
    } else {
        snprintf(dir, sizeof dir, ".");
    }
    return read_key_file(dir, name, magic, pub, len);
}

gt_err gt_holder_pub_load(const char *spec, uint8_t pub[GT_ED25519_PUBLIC_BYTES])
{
    return public_key_load(spec, GT_KEYDIR_HOLDER_PUBLIC, PUBLIC_MAGIC, pub,
                           GT_ED25519_PUBLIC_BYTES);
}

void gt_recipient_keys_wipe(gt_recipient_keys *k)
{
    gt_secure_zero(k, sizeof *k);
}

gt_err gt_keydir_recipient_generate(const char *dir, bool overwrite,
                                    uint8_t pub_out[GT_X25519_BYTES])
{
    char path[4096];
    GT_TRY(gt_path_join(path, sizeof path, dir, GT_KEYDIR_HOLDER_PUBLIC));
    GT_ENSURE(gt_path_exists(path), GT_E_NOTFOUND,
              "%s: missing (is %s a key folder from gputravel keygen?)", path, dir);
    for (int i = 0; i < 2 && !overwrite; i++) {
        GT_TRY(gt_path_join(path, sizeof path, dir,
                            i == 0 ? GT_KEYDIR_RECIPIENT_SECRET : GT_KEYDIR_RECIPIENT_PUBLIC));
        GT_ENSURE(!gt_path_exists(path), GT_E_STATE,
                  "%s already exists: refusing to replace the recipient key (--force replaces "
                  "it, and checkpoints sealed to the old key can then no longer be opened)",
                  path);
    }
    return write_recipient(dir, pub_out);
}

gt_err gt_keydir_recipient_load(const char *dir, gt_recipient_keys *k)
{
    memset(k, 0, sizeof *k);
    char path[4096];
    GT_TRY(gt_path_join(path, sizeof path, dir, GT_KEYDIR_RECIPIENT_SECRET));
    char ident[4096];
    GT_TRY(gt_path_join(ident, sizeof ident, dir, GT_KEYDIR_HOLDER_SECRET));
    GT_ENSURE(gt_path_exists(path) || !gt_path_exists(ident), GT_E_NOTFOUND,
              "no recipient key (the folder predates sealed checkpoints): add one with "
              "`gputravel keygen --add-recipient-key --out %s`", dir);
    gt_err err = read_key_pair(dir, GT_KEYDIR_RECIPIENT_SECRET, XSEC_MAGIC, k->sec, k->pub,
                               gt_x25519_public);
    if (err.code != GT_E_NONE) {
        gt_recipient_keys_wipe(k);
    }
    return err;
}

gt_err gt_recipient_pub_load(const char *spec, uint8_t pub[GT_X25519_BYTES])
{
    return public_key_load(spec, GT_KEYDIR_RECIPIENT_PUBLIC, XPUB_MAGIC, pub, GT_X25519_BYTES);
}
