// Files: bounded reads, and writes that appear under their final name only when complete.
#include <gputravel/util.h>

#include <dirent.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

gt_err gt_file_open_regular(const char *path, FILE **fp, uint64_t *size)
{
    *fp = fopen(path, "rb");
    GT_ENSURE(*fp != NULL, errno == ENOENT ? GT_E_NOTFOUND : GT_E_IO, "%s: %s", path,
              strerror(errno));
    struct stat st;
    if (fstat(fileno(*fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(*fp);
        *fp = NULL;
        return gt_errf(GT_E_IO, "%s: not a regular file", path);
    }
    *size = (uint64_t)st.st_size;
    return GT_OK;
}

gt_err gt_file_read_all(const char *path, size_t max_len, gt_buf *out)
{
    gt_err err = GT_OK;
    FILE *fp = fopen(path, "rb");
    GT_ENSURE(fp != NULL, errno == ENOENT ? GT_E_NOTFOUND : GT_E_IO, "%s: %s", path,
              strerror(errno));
    gt_buf b = {0};
    uint8_t chunk[65536];
    for (;;) {
        size_t n = fread(chunk, 1, sizeof chunk, fp);
        if (n > 0) {
            GT_ENSURE_GOTO(err, n <= max_len - b.len, fail, GT_E_LIMIT,
                           "%s: larger than %zu bytes", path, max_len);
            GT_TRY_GOTO(err, gt_buf_append(&b, chunk, n), fail);
        }
        if (n < sizeof chunk) {
            GT_ENSURE_GOTO(err, !ferror(fp), fail, GT_E_IO, "%s: read error", path);
            break;
        }
    }
    fclose(fp);
    gt_secure_zero(chunk, sizeof chunk);
    *out = b;
    return GT_OK;
fail:
    fclose(fp);
    gt_secure_zero(chunk, sizeof chunk);
    gt_buf_free(&b);
    return err;
}

gt_err gt_atomic_file_open(gt_atomic_file *f, const char *path, unsigned mode)
{
    memset(f, 0, sizeof *f);
    GT_ENSURE(strlen(path) < sizeof f->path, GT_E_LIMIT, "path too long: %s", path);
    // A folder at path would refuse the final rename, after all the writing: refused now.
    struct stat st;
    GT_ENSURE(stat(path, &st) != 0 || !S_ISDIR(st.st_mode), GT_E_ARG,
              "%s is a folder: name the file to write (e.g. %s/NAME)", path, path);
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->tmp_path, sizeof f->tmp_path, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(f->tmp_path);
    GT_ENSURE(fd >= 0, GT_E_IO, "%s: cannot create: %s", path, strerror(errno));
    if (fchmod(fd, (mode_t)mode) != 0 || (f->fp = fdopen(fd, "wb")) == NULL) {
        gt_err err = gt_errf(GT_E_IO, "%s: %s", f->tmp_path, strerror(errno));
        close(fd);
        unlink(f->tmp_path);
        f->tmp_path[0] = '\0';
        return err;
    }
    return GT_OK;
}

gt_err gt_atomic_file_write(gt_atomic_file *f, const void *data, size_t len)
{
    GT_ENSURE(f->fp != NULL, GT_E_STATE, "%s: not open", f->path);
    GT_ENSURE(len == 0 || fwrite(data, 1, len, f->fp) == len, GT_E_IO, "%s: write failed: %s",
              f->path, strerror(errno));
    return GT_OK;
}

gt_err gt_atomic_file_commit(gt_atomic_file *f)
{
    gt_err err = GT_OK;
    GT_ENSURE(f->fp != NULL, GT_E_STATE, "%s: not open", f->path);
    bool ok = fflush(f->fp) == 0 && fsync(fileno(f->fp)) == 0;
    int saved = errno;
    ok = (fclose(f->fp) == 0) && ok;
    f->fp = NULL;
    GT_ENSURE_GOTO(err, ok, fail, GT_E_IO, "%s: write failed: %s", f->path, strerror(saved));
    GT_ENSURE_GOTO(err, rename(f->tmp_path, f->path) == 0, fail, GT_E_IO, "%s: rename: %s",
                   f->path, strerror(errno));
    f->tmp_path[0] = '\0';
    return GT_OK;
fail:
    gt_atomic_file_abort(f);
    return err;
}

void gt_atomic_file_abort(gt_atomic_file *f)
{
    if (f->fp != NULL) {
        fclose(f->fp);
        f->fp = NULL;
    }
    if (f->tmp_path[0] != '\0') {
        unlink(f->tmp_path);
        f->tmp_path[0] = '\0';
    }
}

gt_err gt_file_write_atomic(const char *path, const void *data, size_t len, unsigned mode)
{
    gt_atomic_file f;
    GT_TRY(gt_atomic_file_open(&f, path, mode));
    gt_err err = gt_atomic_file_write(&f, data, len);
    if (err.code != GT_E_NONE) {
        gt_atomic_file_abort(&f);
        return err;
    }
    return gt_atomic_file_commit(&f);
}

gt_err gt_mkdir_p(const char *path, unsigned mode)
{
    char buf[4096];
    GT_ENSURE(strlen(path) < sizeof buf, GT_E_LIMIT, "path too long: %s", path);
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                return gt_errf(GT_E_IO, "mkdir %s: %s", buf, strerror(errno));
            }
            *p = '/';
        }
    }
    if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST) {
        return gt_errf(GT_E_IO, "mkdir %s: %s", buf, strerror(errno));
    }
    struct stat st;
    GT_ENSURE(stat(buf, &st) == 0 && S_ISDIR(st.st_mode), GT_E_IO, "%s: not a directory", buf);
    return GT_OK;
}

bool gt_path_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

gt_err gt_path_join(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    GT_ENSURE(n >= 0 && (size_t)n < cap, GT_E_LIMIT, "path too long: %s/%s", dir, name);
    return GT_OK;
}

gt_err gt_stale_temps(const char *path, bool remove, const char *flag, unsigned *count)
{
    if (count != NULL) {
        *count = 0;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? path + (slash - dir) + 1 : path;
    if (slash == NULL) {
        snprintf(dir, sizeof dir, ".");
    } else if (slash == dir) {
        dir[1] = '\0';
    } else {
        *slash = '\0';
    }
    DIR *d = opendir(dir);
    if (d == NULL) {
        return GT_OK;  // no folder yet: nothing left in it
    }
    size_t blen = strlen(base);
    gt_err err = GT_OK;
    for (struct dirent *e; (e = readdir(d)) != NULL && gt_is_ok(err);) {
        // Exactly what mkstemp / mkdtemp made for this path: base ".tmp-" and six characters.
        if (strncmp(e->d_name, base, blen) != 0 || strncmp(e->d_name + blen, ".tmp-", 5) != 0 ||
            strlen(e->d_name + blen + 5) != 6) {
            continue;
        }
        char stale[4400];
        snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
        if (count != NULL) {
            (*count)++;
        }
        if (remove) {
            err = gt_rmtree_below(stale, dir);
            if (gt_is_ok(err)) {
                gt_log_info("removed %s, left by an interrupted earlier run", stale);
            }
        } else {
            gt_log_warn("%s was left by an interrupted earlier run; it is never read: remove it%s%s",
                        stale, flag ? ", or rerun with " : "", flag ? flag : "");
        }
    }
    closedir(d);
    return err;
}

// ---- rm -rf below a scratch root ---------------------------------------------------------------

static __thread int rm_errno;
static __thread char rm_failed[256];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    if (rc != 0 && errno != ENOENT) {
        rm_errno = errno;
        snprintf(rm_failed, sizeof rm_failed, "%s", path);
        return 1;  // stop: what is left is reported, not skipped
    }
    return 0;
}

gt_err gt_rmtree_below(const char *path, const char *scratch_root)
{
    GT_ENSURE(path != NULL && path[0] != '\0', GT_E_ARG, "remove: empty path");
    GT_ENSURE(strcmp(path, "/") != 0, GT_E_ARG, "remove: refusing to remove /");
    struct stat st;
    if (lstat(path, &st) != 0) {
        GT_ENSURE(errno == ENOENT, GT_E_IO, "remove %s: %s", path, strerror(errno));
        return GT_OK;
    }
    char root[PATH_MAX], parent[PATH_MAX], dir[PATH_MAX];
    GT_ENSURE(scratch_root != NULL && realpath(scratch_root, root) != NULL, GT_E_ARG,
              "remove %s: scratch root %s: %s", path, scratch_root ? scratch_root : "(none)",
              strerror(errno));
    // The folder holding path, resolved; path's last component itself is never followed.
    GT_ENSURE(strlen(path) < sizeof dir, GT_E_LIMIT, "remove: path too long");
    snprintf(dir, sizeof dir, "%s", path);
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') {
        dir[--n] = '\0';
    }
    char *slash = strrchr(dir, '/');
    const char *last = slash ? slash + 1 : dir;
    GT_ENSURE(strcmp(last, ".") != 0 && strcmp(last, "..") != 0 && last[0] != '\0', GT_E_ARG,
              "remove %s: not a plain name", path);
    if (slash == dir) {
        snprintf(parent, sizeof parent, "/");
    } else {
        if (slash != NULL) {
            *slash = '\0';
        }
        GT_ENSURE(realpath(slash ? dir : ".", parent) != NULL, GT_E_IO, "remove %s: %s", path,
                  strerror(errno));
    }
    size_t rl = strlen(root);
    bool below = strcmp(parent, root) == 0 ||
                 (strncmp(parent, root, rl) == 0 && parent[rl] == '/');
    GT_ENSURE(below && strcmp(root, "/") != 0, GT_E_ARG,
              "remove %s: not below the scratch folder %s", path, root);
    rm_errno = 0;
    rm_failed[0] = '\0';
    int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    GT_ENSURE(rc == 0, GT_E_IO, "cannot remove %s: %s", rm_failed[0] ? rm_failed : path,
              strerror(rm_errno ? rm_errno : errno));
    return GT_OK;
}
