// cli/: the only layer that prints to stdout or exits. Each subcommand is one file, cmd_<name>.c,
// with `int gt_cmd_<name>(int argc, char **argv)` returning the process exit status.
#ifndef GPUTRAVEL_CLI_H
#define GPUTRAVEL_CLI_H

#include <gputravel/holder.h>
#include <gputravel/util.h>

#include <stdbool.h>

enum {
    GT_EXIT_OK = 0,
    GT_EXIT_FAIL = 1,      // the operation failed, or verification rejected the input
    GT_EXIT_INVALID = 2,   // the input itself is invalid (evidence, files)
    GT_EXIT_USAGE = 64,    // bad command line (sysexits EX_USAGE)
};

// Options every command accepts, parsed by main() before the command runs.
typedef struct {
    bool quiet;    // no progress bars, warnings only
    bool verbose;  // debug logging
} gt_cli_globals;

extern gt_cli_globals gt_cli;  // set once in main(), read-only afterwards

// Prints "gputravel CMD: error: MSG" to stderr and returns GT_EXIT_FAIL.
int gt_cli_fail(const char *cmd, gt_err e);
// Prints a usage error and a hint to run --help; returns GT_EXIT_USAGE.
int gt_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// True when argv holds -h or --help (checked before getopt so help never fails on other args).
bool gt_cli_wants_help(int argc, char **argv);

// Strict flag values (cli_args.c): the whole string is a number in [min, max], else GT_E_ARG
// with a message naming the flag ("--steps '12x': not a whole number", "--runs 0: must be 1..50").
GT_MUST_USE gt_err gt_cli_parse_u64(const char *flag, const char *s, uint64_t min, uint64_t max,
                                    uint64_t *out);
GT_MUST_USE gt_err gt_cli_parse_u32(const char *flag, const char *s, uint32_t min, uint32_t max,
                                    uint32_t *out);
GT_MUST_USE gt_err gt_cli_parse_int(const char *flag, const char *s, int min, int max, int *out);
GT_MUST_USE gt_err gt_cli_parse_double(const char *flag, const char *s, double min, double max,
                                       double *out);
// The sim root for this process (the library's gt_sim_root_set) and for the processes it
// starts (GT_SIM_ROOT): a command's --sim-root, or a demo's own directory.
GT_MUST_USE gt_err gt_cli_sim_root_use(const char *dir);
// A benchmark's output folder in dir[cap]: `out` (--out, made if missing), or a fresh
// /tmp/gputravel-bench-NAME-XXXXXX.
GT_MUST_USE gt_err gt_cli_bench_dir(char *dir, size_t cap, const char *out, const char *name);

// `gputravel train --agreement ...` (collaborative training), in cmd_train_agreement.c.
int gt_cli_train_agreement(int argc, char **argv);
// `gputravel holder status ...` (a ledger's summary, keyless), in cmd_holder_status.c.
int gt_cli_holder_status(int argc, char **argv);
// `gputravel holder enclave-keys import ...` and enclave mode's start (cmd_holder_enclave.c).
int gt_cli_holder_enclave_keys(int argc, char **argv);
// The holder enclave folder: given, or enclaves/ beside this executable.
GT_MUST_USE gt_err gt_cli_holder_enclave_dir(const char *given, char *out, size_t cap);
// Seals DIR/dataset.key in the holder enclave and deletes it (holder enclave-keys import).
// indent: prefix of what is printed (NULL: print nothing).
GT_MUST_USE gt_err gt_cli_holder_enclave_import(const char *key_dir, const char *enclave_dir,
                                                const char *platform_dir, const char *sim_root,
                                                const char *indent);
// Starts the holder enclave on the platform folder and prints its identity (indent as above).
GT_MUST_USE gt_err gt_cli_holder_enclave_start(gt_holder_enclave **out, const char *enclave_dir,
                                               const char *platform_dir, const char *sim_root,
                                               const char *indent);
// gputravel enclave seal|unseal|quote (cmd_enclave_keys.c); argv[1] is the action.
int gt_cli_enclave_keys(int argc, char **argv);

#define GT_CLI_COMMAND(name, summary) int gt_cmd_##name(int argc, char **argv);
#include "commands.h"
#undef GT_CLI_COMMAND

// `gputravel inspect STATE-DIR` in text to out (NULL: silent): GT_EXIT_OK when no file of the
// run's state folder holds plaintext model data, GT_EXIT_FAIL when one does.
int gt_cli_inspect_state(const char *dir, FILE *out);
// `gputravel inspect FILE` for llm.c checkpoints, shards, tokenizer files and training states
// (inspect_files.c): the exit status, or -1 when FILE is none of these.
int gt_cli_inspect_plain_file(const char *path, bool json);
// Calls each(ctx, body, hash) for the first `max` entries of a ledger's bytes, verified before
// (holder.h: BODY ' ' HASH ' ' SIG '\n'): body is the entry's parsed JSON ({"seq", "time",
// "prev", "kind", "detail"}), hash its hex hash. Stops at the first error (cmd_ledger.c).
typedef gt_err (*gt_cli_ledger_entry_fn)(void *ctx, const cJSON *body, gt_span hash);
GT_MUST_USE gt_err gt_cli_ledger_entries(const gt_buf *b, uint64_t max,
                                         gt_cli_ledger_entry_fn each, void *ctx);
// --config FILE (holder, train): the file's options (util.h gt_config_args: strict, the command
// line overrides it) go before the command line's arguments in a new argv; *argc and *argv are
// replaced, and c holds them until gt_cli_config_free. repeatable names the options that may
// take a list. GT_EXIT_OK (also without --config: nothing changes), or the exit status of an
// error already printed, naming the file and the key.
typedef struct {
    gt_args file;
    char **argv;
} gt_cli_config;
struct option;
int gt_cli_config_expand(const char *cmd, const struct option *opts,
                         const char *const *repeatable, int *argc, char ***argv,
                         gt_cli_config *c);
void gt_cli_config_free(gt_cli_config *c);
// Whether argv's --config FILE has this key (false without one, or when it does not parse).
bool gt_cli_config_has(int argc, char **argv, const char *key);
// Prints o indented on stdout and frees it: GT_EXIT_OK (or the failure's status).
int gt_cli_print_json(cJSON *o);
// After a failure on path: when the file is recognisably another kind than `wanted` ("a token
// shard", "an llm.c model checkpoint"), says what it is and what to run (file_hint.c).
void gt_cli_file_hint(const char *cmd, const char *path, const char *wanted);

#endif
