// gputravel: one binary, one subcommand per file. main() parses the global options, sets the log
// level and the sim root once (the library reads no environment: the CLI does, here), and hands
// argv to the subcommand.
#include "cli.h"

#include <gputravel/attest.h>
#include <gputravel/kernels.h>

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gt_cli_globals gt_cli;

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
#define GT_CLI_COMMAND(name, summary) {#name, gt_cmd_##name, summary},
#include "commands.h"
#undef GT_CLI_COMMAND
};

// A table name spells '-' as '_' (C identifiers): "verify_dataset" is typed "verify-dataset".
static bool command_is(const char *table_name, const char *typed)
{
    for (; *table_name && *typed; table_name++, typed++) {
        char want = *table_name == '_' ? '-' : *table_name;
        if (want != *typed) {
            return false;
        }
    }
    return *table_name == *typed;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: gputravel [--quiet | --verbose] COMMAND [ARGS...]\n"
            "\n"
            "Confidential collaborative training: data holders lend their data to an attested,\n"
            "travelling confidential GPU without ever exposing it in plaintext outside it.\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s", commands[i].name);
        for (char *p = name; *p; p++) {
            *p = *p == '_' ? '-' : *p;
        }
        fprintf(out, "  %-16s %s\n", name, commands[i].summary);
    }
    fprintf(out,
            "\nenvironment:\n"
            "  GT_SIM_ROOT    the simulated platform root directory: sim evidence keys, and devd's\n"
            "                 vendor root and identity (a command's --sim-root DIR wins); the\n"
            "                 processes a command starts (devd, holders) inherit it\n"
            "  XDG_DATA_HOME  without GT_SIM_ROOT: $XDG_DATA_HOME/gputravel/sim-root\n"
            "  HOME           without either: $HOME/.local/share/gputravel/sim-root\n"
            "  (with none of them, commands that need a sim root fail and say what to set)\n"
            "  GPUTRAVEL_CPU_ISA  avx512, avx2 or scalar: the path of the cpu kernels' own loops\n"
            "                 (default: the best this CPU has; a path it lacks is refused). The\n"
            "                 processes a command starts inherit it. OpenBLAS's matmuls follow\n"
            "                 OPENBLAS_CORETYPE (e.g. Haswell for AVX2) instead\n"
            "  OPENBLAS_CORETYPE  unset: where OpenBLAS picks a generic core for a CPU newer than it\n"
            "                 knows, gputravel sets it (SkylakeX or Haswell, by the CPU's features)\n"
            "                 and restarts itself once; set (even empty), it is left alone\n"
            "  OMP_WAIT_POLICY  unset: 'devd --prefetch' and 'train --prefetch' set it to PASSIVE\n"
            "                 and restart themselves once, so that OpenMP's idle threads sleep\n"
            "                 instead of spinning on the core the pager's worker needs\n"
            "                 (docs/paging.md); set (even empty), it is left alone\n"
            "  GT_CPU_SIMD    off: the same as GPUTRAVEL_CPU_ISA=scalar (the older switch)\n"
            "\nRun 'gputravel COMMAND --help' for a command's options.\n");
}

gt_err gt_cli_sim_root_use(const char *dir)
{
    GT_TRY(gt_sim_root_set(dir));
    GT_ENSURE(setenv("GT_SIM_ROOT", dir, 1) == 0, GT_E_ARG, "cannot set GT_SIM_ROOT to %s", dir);
    return GT_OK;
}

// The default sim root, from the environment as usage() documents it.
static void sim_root_from_environment(void)
{
    const char *env = getenv("GT_SIM_ROOT"), *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    char dir[4096];
    int n = -1;
    if (env != NULL && env[0] != '\0') {
        n = snprintf(dir, sizeof dir, "%s", env);
    } else if (xdg != NULL && xdg[0] == '/') {
        n = snprintf(dir, sizeof dir, "%s/gputravel/sim-root", xdg);
    } else if (home != NULL && home[0] != '\0') {
        n = snprintf(dir, sizeof dir, "%s/.local/share/gputravel/sim-root", home);
    }
    if (n < 0) {
        return;  // none: a command that needs one fails with what to set
    }
    gt_err e = (size_t)n < sizeof dir ? gt_sim_root_set(dir)
                                       : gt_errf(GT_E_LIMIT, "sim root: path too long");
    if (!gt_is_ok(e)) {
        gt_log_warn("%s", e.msg);
    } else {
        // children (the enclave process's device appraisal, devd) find the same root
        setenv("GT_SIM_ROOT", dir, 0);
    }
}

int gt_cli_fail(const char *cmd, gt_err e)
{
    fprintf(stderr, "gputravel %s: error: %s\n", cmd, e.msg[0] ? e.msg : gt_code_text(e.code));
    return GT_EXIT_FAIL;
}

int gt_cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gputravel %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'gputravel %s --help'.\n", cmd);
    return GT_EXIT_USAGE;
}

bool gt_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            break;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            return true;
        }
    }
    return false;
}

int gt_cmd_version(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        printf("usage: gputravel version\n\nPrints the version and build configuration.\n");
        return GT_EXIT_OK;
    }
#ifdef GT_HAVE_CUDA
    const char *cuda = "yes";
#else
    const char *cuda = "no";
#endif
    printf("gputravel %s (cuda backend: %s)\n", GT_VERSION, cuda);
    return GT_EXIT_OK;
}

// GPUTRAVEL_CPU_ISA, else the older GT_CPU_SIMD=off; false (said on stderr) for a path this CPU
// lacks or a name that is none.
static bool cpu_isa_from_environment(void)
{
    const char *isa = getenv("GPUTRAVEL_CPU_ISA"), *simd = getenv("GT_CPU_SIMD");
    if ((isa == NULL || isa[0] == '\0') && simd != NULL && strcmp(simd, "off") == 0) {
        isa = "scalar";
    }
    gt_err e = gt_ops_cpu_select_isa(isa);
    if (!gt_is_ok(e)) {
        fprintf(stderr, "gputravel: GPUTRAVEL_CPU_ISA=%s: %s\n", isa, e.msg);
        return false;
    }
    return true;
}

// gputravel's own run, set up before anything computes, from what libraries read only as a
// process starts; whatever is missing is set and the process restarts once, with all of it:
// - OpenBLAS's core where its own pick is a fallback (kernels.h gt_blas_core_env);
// - for devd and train with --prefetch (the pager's worker thread, docs/paging.md), OpenMP's
//   wait policy PASSIVE: spinning between parallel regions (libgomp's default), its idle threads
//   hold the core the worker would seal and open pages on (a sixth of devd's samples at GPT-2
//   124M under a 512 MiB cap). Only where the user left it unset. The command's options are
//   scanned here, before it parses them, as far as a "--".
static void restart_tuned(int argc, char **argv, int cmd)
{
    gt_env_var vars[4];
    size_t n = gt_blas_core_env(getenv("OPENBLAS_CORETYPE"), vars);
    bool pager_worker = false;
    if (strcmp(argv[cmd], "devd") == 0 || strcmp(argv[cmd], "train") == 0) {
        for (int k = cmd + 1; k < argc && strcmp(argv[k], "--") != 0; k++) {
            pager_worker = pager_worker || strcmp(argv[k], "--prefetch") == 0;
        }
    }
    if (pager_worker && getenv("OMP_WAIT_POLICY") == NULL) {
        vars[n++] = (gt_env_var){"OMP_WAIT_POLICY", "PASSIVE"};
        vars[n++] = (gt_env_var){"GPUTRAVEL_OMP_PASSIVE", "1"};
    }
    gt_err err = gt_proc_reexec(argv, vars, n);
    if (!gt_is_ok(err)) {
        gt_log_warn("gputravel goes on as it started (OpenBLAS core %s, OpenMP's own wait "
                    "policy): %s", gt_blas_core_name(), err.msg);
    }
}

// Programs that run the cpu kernels say once, at startup, which path they take.
static bool runs_cpu_kernels(const char *name)
{
    return strncmp(name, "train", 5) == 0 || strcmp(name, "devd") == 0 ||
           strncmp(name, "bench", 5) == 0 || strcmp(name, "demo") == 0;
}

int main(int argc, char **argv)
{
    // A peer that disconnects mid-write must surface as an error from write(), not kill us.
    signal(SIGPIPE, SIG_IGN);
    // The cpu kernels' path, for every subcommand (devd's too): the environment is read here,
    // never inside the library.
    if (!cpu_isa_from_environment()) {
        return GT_EXIT_USAGE;
    }
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--quiet") == 0 || strcmp(argv[i], "-q") == 0) {
            gt_cli.quiet = true;
        } else if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) {
            gt_cli.verbose = true;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return GT_EXIT_OK;
        } else if (strcmp(argv[i], "--version") == 0) {
            return gt_cmd_version(1, argv);
        } else {
            fprintf(stderr, "gputravel: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return GT_EXIT_USAGE;
        }
    }
    if (i == argc) {
        usage(stderr);
        return GT_EXIT_USAGE;
    }
    restart_tuned(argc, argv, i);  // before anything computes
    const char *name = argv[i];
    if (strcmp(name, "help") == 0) {
        if (i + 1 == argc) {
            usage(stdout);
            return GT_EXIT_OK;
        }
        name = argv[i + 1];
        for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
            if (command_is(commands[c].name, name)) {
                char *help_argv[] = {(char *)name, "--help", NULL};
                return commands[c].run(2, help_argv);
            }
        }
    }
    gt_log_set_level(gt_cli.verbose ? GT_LOG_DEBUG : gt_cli.quiet ? GT_LOG_WARN : GT_LOG_INFO);
    sim_root_from_environment();
    if (runs_cpu_kernels(name)) {
        char line[160];
        gt_ops_cpu_describe(line, sizeof line);
        const char *fallback = getenv("GPUTRAVEL_BLAS_FALLBACK");
        if (fallback != NULL) {
            gt_log_info("%s (OPENBLAS_CORETYPE set by gputravel: OpenBLAS picked %s on this cpu)",
                        line, fallback);
        } else {
            gt_log_info("%s", line);
        }
        if (getenv("GPUTRAVEL_OMP_PASSIVE") != NULL) {
            gt_log_info("OMP_WAIT_POLICY=PASSIVE set by gputravel: --prefetch's pager worker "
                        "gets the cores idle OpenMP threads would spin on");
        }
    }
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        if (command_is(commands[c].name, name)) {
            optind = 1;  // each command runs its own getopt_long over argv[i..]
            return commands[c].run(argc - i, argv + i);
        }
    }
    fprintf(stderr, "gputravel: unknown command '%s'\n\n", name);
    usage(stderr);
    return GT_EXIT_USAGE;
}
