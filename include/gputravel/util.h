// gputravel/util.h: the bottom layer. Errors, the bounds-checked reader and writer that every
// untrusted byte goes through, owned buffers that wipe, hex, files written atomically, levelled
// logging, a progress bar, and JSON (cJSON underneath).
//
// Trusts: its callers to pass valid pointers (misuse may assert). Does not trust: any byte read
// through gt_reader; every read checks what is left and a failed read consumes nothing.
#ifndef GPUTRAVEL_UTIL_H
#define GPUTRAVEL_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

// ---------------------------------------------------------------------------------------------
// Errors: one return type, one code table, three macros (STYLE.md §6).

#define GT_ERR_CODES(X)                                          \
    X(GT_E_TRUNCATED, "input ends early")                        \
    X(GT_E_FORMAT, "malformed input")                            \
    X(GT_E_UNSUPPORTED, "unsupported")                           \
    X(GT_E_AUTH, "authentication failed")                        \
    X(GT_E_POLICY, "rejected by policy")                         \
    X(GT_E_STATE, "not allowed in this state")                   \
    X(GT_E_IO, "I/O error")                                      \
    X(GT_E_NOMEM, "out of memory")                               \
    X(GT_E_ARG, "invalid argument")                              \
    X(GT_E_CRYPTO, "cryptographic library error")                \
    X(GT_E_NOTFOUND, "not found")                                \
    X(GT_E_LIMIT, "limit exceeded")                              \
    X(GT_E_PEER, "peer failed or went away")                     \
    X(GT_E_TIMEOUT, "timed out")                                 \
    X(GT_E_RETRY, "this attempt was interrupted; it may be retried")

#define GT_CODE_ENUM(code, text) code,
typedef enum { GT_E_NONE = 0, GT_ERR_CODES(GT_CODE_ENUM) GT_E_COUNT_ } gt_code;
#undef GT_CODE_ENUM

// msg is formatted text for an operator, never a secret.
typedef struct {
    gt_code code;
    char msg[192];
} gt_err;

#define GT_OK ((gt_err){.code = GT_E_NONE})
#define GT_MUST_USE __attribute__((warn_unused_result))

GT_MUST_USE gt_err gt_errf(gt_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Prefixes e's message with context ("manifest: " + msg); keeps the code.
GT_MUST_USE gt_err gt_err_wrap(gt_err e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// "TRUNCATED", "AUTH", ... (the code's name without GT_E_), and its one-line description.
const char *gt_code_name(gt_code code);
const char *gt_code_text(gt_code code);
static inline bool gt_is_ok(gt_err e) { return e.code == GT_E_NONE; }

#define GT_TRY(expr)                                 \
    do {                                             \
        gt_err e_ = (expr);                          \
        if (e_.code != GT_E_NONE) {                  \
            return e_;                               \
        }                                            \
    } while (0)
#define GT_ENSURE(cond, code, ...)                   \
    do {                                             \
        if (!(cond)) {                               \
            return gt_errf((code), __VA_ARGS__);     \
        }                                            \
    } while (0)
#define GT_TRY_GOTO(err, expr, label)                \
    do {                                             \
        (err) = (expr);                              \
        if ((err).code != GT_E_NONE) {               \
            goto label;                              \
        }                                            \
    } while (0)
#define GT_ENSURE_GOTO(err, cond, label, code, ...)  \
    do {                                             \
        if (!(cond)) {                               \
            (err) = gt_errf((code), __VA_ARGS__);    \
            goto label;                              \
        }                                            \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Secrets. OPENSSL_cleanse / CRYPTO_memcmp underneath; util holds them (not crypto/) because
// gt_buf_free below must wipe.

void gt_secure_zero(void *p, size_t n);
// Constant time in n; answers only "equal?", never an ordering.
bool gt_ct_equal(const void *a, const void *b, size_t n);

// ---------------------------------------------------------------------------------------------
// Borrowed bytes and owned buffers.

typedef struct {
    const uint8_t *data;
    size_t len;
} gt_span;

// Owned heap bytes. gt_buf_free wipes (the default); gt_buf_free_nowipe is for ciphertext and
// public data only.
typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
} gt_buf;

GT_MUST_USE gt_err gt_buf_reserve(gt_buf *b, size_t cap);      // grows; keeps contents
GT_MUST_USE gt_err gt_buf_append(gt_buf *b, const void *p, size_t n);
void gt_buf_free(gt_buf *b);
void gt_buf_free_nowipe(gt_buf *b);
static inline gt_span gt_buf_span(const gt_buf *b) { return (gt_span){b->data, b->len}; }

// ---------------------------------------------------------------------------------------------
// gt_reader: a cursor over untrusted bytes. The only place where input lengths meet pointers.
// Every read checks what is left; a failed read leaves pos unchanged and returns GT_E_TRUNCATED.

typedef struct {
    const uint8_t *data;
    size_t len;
    size_t pos;
} gt_reader;

static inline gt_reader gt_reader_init(const void *data, size_t len)
{
    return (gt_reader){.data = (const uint8_t *)data, .len = len, .pos = 0};
}
static inline size_t gt_reader_left(const gt_reader *r) { return r->len - r->pos; }

GT_MUST_USE gt_err gt_reader_u8(gt_reader *r, uint8_t *v);
GT_MUST_USE gt_err gt_reader_u16le(gt_reader *r, uint16_t *v);
GT_MUST_USE gt_err gt_reader_u32le(gt_reader *r, uint32_t *v);
GT_MUST_USE gt_err gt_reader_u64le(gt_reader *r, uint64_t *v);
GT_MUST_USE gt_err gt_reader_u16be(gt_reader *r, uint16_t *v);
GT_MUST_USE gt_err gt_reader_u24be(gt_reader *r, uint32_t *v);
GT_MUST_USE gt_err gt_reader_u32be(gt_reader *r, uint32_t *v);
GT_MUST_USE gt_err gt_reader_u64be(gt_reader *r, uint64_t *v);
GT_MUST_USE gt_err gt_reader_i32le(gt_reader *r, int32_t *v);
// Copies n bytes out.
GT_MUST_USE gt_err gt_reader_bytes(gt_reader *r, void *out, size_t n);
GT_MUST_USE gt_err gt_reader_skip(gt_reader *r, size_t n);
// Borrows the next n bytes (no copy); the span lives as long as the reader's data.
GT_MUST_USE gt_err gt_reader_span(gt_reader *r, size_t n, gt_span *out);
// A reader over the next n bytes (a length-prefixed region); advances r past them.
GT_MUST_USE gt_err gt_reader_sub(gt_reader *r, size_t n, gt_reader *sub);
// Fails with GT_E_FORMAT unless every byte has been read (for exact-length messages).
GT_MUST_USE gt_err gt_reader_expect_end(const gt_reader *r, const char *what);

// ---------------------------------------------------------------------------------------------
// gt_writer: appends to a fixed caller buffer (cap checked, GT_E_LIMIT when full) or, when
// initialised with gt_writer_init_dynamic, to a growing heap buffer that gt_writer_free wipes.

typedef struct {
    uint8_t *data;
    size_t cap;
    size_t len;
    bool dynamic;
} gt_writer;

static inline gt_writer gt_writer_init_fixed(void *buf, size_t cap)
{
    return (gt_writer){.data = (uint8_t *)buf, .cap = cap, .len = 0, .dynamic = false};
}
static inline gt_writer gt_writer_init_dynamic(void)
{
    return (gt_writer){.data = NULL, .cap = 0, .len = 0, .dynamic = true};
}
void gt_writer_free(gt_writer *w);  // dynamic only; wipes
GT_MUST_USE gt_err gt_writer_u8(gt_writer *w, uint8_t v);
GT_MUST_USE gt_err gt_writer_u16le(gt_writer *w, uint16_t v);
GT_MUST_USE gt_err gt_writer_u32le(gt_writer *w, uint32_t v);
GT_MUST_USE gt_err gt_writer_u64le(gt_writer *w, uint64_t v);
GT_MUST_USE gt_err gt_writer_u16be(gt_writer *w, uint16_t v);
GT_MUST_USE gt_err gt_writer_u32be(gt_writer *w, uint32_t v);
GT_MUST_USE gt_err gt_writer_u64be(gt_writer *w, uint64_t v);
GT_MUST_USE gt_err gt_writer_i32le(gt_writer *w, int32_t v);
GT_MUST_USE gt_err gt_writer_bytes(gt_writer *w, const void *p, size_t n);
// Reserves n bytes and returns where to fill them (for in-place encryption).
GT_MUST_USE gt_err gt_writer_reserve(gt_writer *w, size_t n, uint8_t **at);

// Byte-order helpers for trusted, in-memory use (protocol numbers we build ourselves).
static inline void gt_store_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void gt_store_u64le(uint8_t *p, uint64_t v)
{
    gt_store_u32le(p, (uint32_t)v);
    gt_store_u32le(p + 4, (uint32_t)(v >> 32));
}
static inline void gt_store_u32be(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void gt_store_u64be(uint8_t *p, uint64_t v)
{
    gt_store_u32be(p, (uint32_t)(v >> 32));
    gt_store_u32be(p + 4, (uint32_t)v);
}

// ---------------------------------------------------------------------------------------------
// Hex. Encoding writes 2n lower-case digits and a NUL (out_cap >= 2n+1). Decoding accepts upper
// or lower case, no separators, and fails with GT_E_FORMAT on odd length or a non-digit.

void gt_hex_encode(char *out, size_t out_cap, const void *in, size_t n);
GT_MUST_USE gt_err gt_hex_decode(uint8_t *out, size_t out_cap, size_t *out_len, const char *hex);
// Decodes exactly n bytes (GT_E_FORMAT if the string has another length).
GT_MUST_USE gt_err gt_hex_decode_exact(uint8_t *out, size_t n, const char *hex);

// ---------------------------------------------------------------------------------------------
// Files. Reads are bounded by max_len (GT_E_LIMIT beyond it). Writes go to "PATH.tmp-XXXXXX" in
// the same folder, are fsynced, and renamed over PATH only on gt_atomic_file_commit, so a reader
// never sees a half-written file and a failure leaves nothing behind.

GT_MUST_USE gt_err gt_file_read_all(const char *path, size_t max_len, gt_buf *out);
// Opens path for reading ("rb") if it is a regular file and gives its size. Missing:
// GT_E_NOTFOUND; not a regular file (a folder, a fifo): GT_E_IO, nothing left open.
GT_MUST_USE gt_err gt_file_open_regular(const char *path, FILE **fp, uint64_t *size);
// Calls fn(ctx, data, len) on a read-only mapping of fd's bytes [offset, offset + len): the
// bytes are read once, in place, with no copy. If the file shrinks while fn runs (the process
// that owns it may truncate it), the SIGBUS ends fn early and the call returns GT_E_IO instead of
// killing the process; fn must therefore only read the mapping and keep nothing (locks, memory)
// that a cut-short call would leak. Outside such calls SIGBUS keeps whatever handling it had.
GT_MUST_USE gt_err gt_file_map_visit(int fd, uint64_t offset, uint64_t len,
                                     gt_err (*fn)(void *ctx, const uint8_t *data, size_t len),
                                     void *ctx);
GT_MUST_USE gt_err gt_file_write_atomic(const char *path, const void *data, size_t len,
                                        unsigned mode);

typedef struct {
    FILE *fp;
    char path[4096];
    char tmp_path[4096 + 16];
} gt_atomic_file;

GT_MUST_USE gt_err gt_atomic_file_open(gt_atomic_file *f, const char *path, unsigned mode);
GT_MUST_USE gt_err gt_atomic_file_write(gt_atomic_file *f, const void *data, size_t len);
// Flushes, fsyncs and renames; on failure the temporary file is removed.
GT_MUST_USE gt_err gt_atomic_file_commit(gt_atomic_file *f);
// Removes the temporary file (safe to call after commit, or twice).
void gt_atomic_file_abort(gt_atomic_file *f);
// Temporaries that an interrupted earlier run left next to path (path.tmp-XXXXXX, a file or a
// folder): each is named in a warning ("never read; remove it, or rerun with FLAG"; flag may be
// NULL), or removed when remove is true. *count (may be NULL) is how many there were.
GT_MUST_USE gt_err gt_stale_temps(const char *path, bool remove, const char *flag,
                                  unsigned *count);

// mkdir -p with the given mode on the last component.
GT_MUST_USE gt_err gt_mkdir_p(const char *path, unsigned mode);
bool gt_path_exists(const char *path);
// Joins dir and name into out ("dir/name"); GT_E_LIMIT if it does not fit.
GT_MUST_USE gt_err gt_path_join(char *out, size_t cap, const char *dir, const char *name);

// ---------------------------------------------------------------------------------------------
// Sizes and time.

// Parses "512MiB", "64M", "1G", "4096", "1.5GiB" (K/M/G/T are binary; "B" optional).
GT_MUST_USE gt_err gt_parse_size(const char *s, uint64_t *out);
// Formats bytes as "512.0 MiB" into out.
void gt_format_size(char *out, size_t cap, uint64_t bytes);
double gt_now_seconds(void);  // monotonic

// Interrupts for long commands that stop cleanly (train, tokenize, seal): once installed, the
// first SIGINT or SIGTERM only sets a flag that their loops read between units of work (a step,
// a chunk); it also restores the default action, so a second one ends the process at once.
void gt_interrupt_install(void);
int gt_interrupted(void);  // the signal that asked to stop, 0 if none
// The flag itself, for a library loop that takes a stop pointer (orchestr's collab config).
const volatile int *gt_interrupt_flag(void);

// ---------------------------------------------------------------------------------------------
// Logging. main() sets the level and sink once, before any thread starts; library code logs
// through gt_log and never prints otherwise.

typedef enum { GT_LOG_ERROR = 0, GT_LOG_WARN, GT_LOG_INFO, GT_LOG_DEBUG } gt_log_level;

void gt_log_set_level(gt_log_level level);
void gt_log_set_stream(FILE *stream);  // default stderr
gt_log_level gt_log_get_level(void);
void gt_log(gt_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define gt_log_error(...) gt_log(GT_LOG_ERROR, __VA_ARGS__)
#define gt_log_warn(...) gt_log(GT_LOG_WARN, __VA_ARGS__)
#define gt_log_info(...) gt_log(GT_LOG_INFO, __VA_ARGS__)
#define gt_log_debug(...) gt_log(GT_LOG_DEBUG, __VA_ARGS__)

// ---------------------------------------------------------------------------------------------
// Progress bar on stderr: label, bytes done / total, rate, ETA. Drawn only when stderr is a TTY
// and quiet is false; redrawn at most 10 times a second.

typedef struct {
    const char *label;
    uint64_t total;
    uint64_t done;
    double start;
    double last_draw;
    bool enabled;
} gt_progress;

void gt_progress_start(gt_progress *p, const char *label, uint64_t total, bool quiet);
void gt_progress_add(gt_progress *p, uint64_t bytes);
void gt_progress_finish(gt_progress *p);

// ---------------------------------------------------------------------------------------------
// JSON helpers over cJSON for documents we parse from files (policies, agreements, collateral).
// Every getter names the field in its error message.

GT_MUST_USE gt_err gt_json_parse(const char *text, size_t len, cJSON **out);  // caller cJSON_Delete
GT_MUST_USE gt_err gt_json_load_file(const char *path, size_t max_len, cJSON **out);
GT_MUST_USE gt_err gt_json_get_string(const cJSON *obj, const char *field, const char **out);
GT_MUST_USE gt_err gt_json_get_u64(const cJSON *obj, const char *field, uint64_t *out);
GT_MUST_USE gt_err gt_json_get_bool(const cJSON *obj, const char *field, bool *out);
// Decodes a hex-string field of exactly n bytes.
GT_MUST_USE gt_err gt_json_get_hex(const cJSON *obj, const char *field, uint8_t *out, size_t n);
// Writes cJSON_Print(obj) to path atomically.
GT_MUST_USE gt_err gt_json_write_file(const char *path, const cJSON *obj, unsigned mode);

// ---------------------------------------------------------------------------------------------
// Option files (a command's --config FILE, src/util/config.c): one JSON object whose keys are the
// command's long option names without "--". An option that takes a value takes a string or a
// number (a list of them when it is repeatable), a flag true or false (false: not given).
// Strict: a key that is not one of opts (by its exact name), a key given twice, a wrong type or
// a document that is not one object is an error naming the key. The options of given_argv (the
// command line, "--name" or "--name=V") are left out: the command line overrides the file.
// out receives the file's options as arguments ("--name", value), NULL-terminated.
struct option;  // getopt.h
typedef struct {
    int argc;
    char **argv;
} gt_args;
GT_MUST_USE gt_err gt_config_args(const char *doc, size_t len, const struct option *opts,
                                  const char *const *repeatable, int given_argc,
                                  char *const *given_argv, gt_args *out);
void gt_args_free(gt_args *a);

// ---------------------------------------------------------------------------------------------
// Plots: PNG files drawn by gnuplot (Debian's gnuplot-nox) through a pipe, data inline. When
// gnuplot is not installed the call fails with GT_E_UNSUPPORTED and writes nothing; the PNG
// appears under its name only when complete.

typedef struct {
    const char *name;  // legend entry
    const double *x;
    const double *y;
    size_t n;
} gt_plot_series;

typedef struct {
    const char *title;
    const char *xlabel;
    const char *ylabel;
    bool log_y;
    bool points;  // draw points as well as lines
} gt_plot_style;

GT_MUST_USE gt_err gt_plot_lines(const char *png_path, const gt_plot_style *style,
                                 const gt_plot_series *series, size_t nseries);
// Grouped bars: ngroups groups (labels[g]), one bar per series in each group; values[s][g] with
// optional error ranges lo[s][g]..hi[s][g] (NULL: none).
GT_MUST_USE gt_err gt_plot_bars(const char *png_path, const gt_plot_style *style,
                                const char *const *group_labels, size_t ngroups,
                                const char *const *series_names, size_t nseries,
                                const double *values, const double *lo, const double *hi);

// ---------------------------------------------------------------------------------------------
// Child processes (devd, holder agents, the CLI under test) and scratch trees. A child is started
// with execve (no PATH search, no shell), dies with its parent (PR_SET_PDEATHSIG), and is always
// reaped by gt_proc_stop. Not for untrusted argv: it runs what it is given.

#include <sys/types.h>

typedef struct {
    char *const *argv;         // argv[0] is the file executed; NULL-terminated
    const char *log_path;      // NULL: inherit stdout and stderr; else both go to this file
    bool log_append;           // with log_path: append instead of truncating
    const char *const *env;    // NULL, or NULL-terminated "NAME=VALUE" set (or replaced) for
                               // the child only
    const int *inherit_fds;    // descriptors (> 2) the child keeps open under the same numbers,
    size_t inherit_count;      // e.g. a listening socket it serves on ("fd:N"); all others close
} gt_proc_spec;

typedef struct {
    pid_t pid;    // 0: not running (never started, or reaped)
    int status;   // wait status once reaped
    bool exited;  // reaped: status is valid
} gt_proc;

typedef enum {
    GT_PROC_READY_SOCKET = 1,  // path is a Unix socket that is listening (not connected to)
    GT_PROC_READY_FILE,        // path exists
    GT_PROC_READY_LOG_LINE,    // the file at path contains text
} gt_proc_ready_kind;

typedef struct {
    gt_proc_ready_kind kind;
    const char *path;
    const char *text;     // GT_PROC_READY_LOG_LINE only
    int timeout_ms;       // 0: 15 s
    const char *what;     // for messages ("devd", "holder bank"); NULL: argv[0]
} gt_proc_ready;

GT_MUST_USE gt_err gt_proc_spawn(gt_proc *p, const gt_proc_spec *spec);
// Polls until r holds. Fails with GT_E_PEER (the child exited; it is reaped) or GT_E_TIMEOUT
// (it is left running: the caller stops it).
GT_MUST_USE gt_err gt_proc_wait_ready(gt_proc *p, const gt_proc_ready *r);
// True while the child runs; reaps it (and records its status) once it has exited.
bool gt_proc_alive(gt_proc *p);
// SIGTERM, then SIGKILL after grace_ms (0: 5 s); always reaps. Returns the wait status (the
// recorded one when the child had already been reaped; 0 when none was started).
int gt_proc_stop(gt_proc *p, int grace_ms);
// A variable a process sets for its own next run (gt_proc_reexec).
typedef struct {
    const char *name, *value;
} gt_env_var;
// Replaces this process with a new run of its own executable (/proc/self/exe) and argv, with
// the n variables set in its environment first: for what a library reads only as a process
// starts (OpenBLAS's core, OpenMP's wait policy). Same pid, same descriptors. n == 0: nothing to
// do, GT_OK. Returns only on failure (GT_E_NOMEM, or GT_E_IO with errno's reason), with the
// variables unset again, since they are not in effect in this process.
GT_MUST_USE gt_err gt_proc_reexec(char **argv, const gt_env_var *vars, size_t n);

// rm -rf path (no symbolic link is followed), refusing "" and "/", and any path that does not
// resolve to somewhere strictly below scratch_root. A missing path is no error.
GT_MUST_USE gt_err gt_rmtree_below(const char *path, const char *scratch_root);

#endif
