// gputravel holder enclave-keys import, and starting a holder's enclave (enclave mode,
// docs/holder-enclave.md): the dataset key sealed in the holder enclave under its MRSIGNER
// policy; `gputravel holder --enclave-platform DIR` then runs with the key in the enclave only.
#include "cli.h"

#include <gputravel/holder.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

static void usage(void)
{
    printf("usage: gputravel holder enclave-keys import --key DIR --enclave-platform PFDIR\n"
           "           [--enclave EDIR] [--sim-root DIR]\n"
           "\n"
           "Moves the holder's dataset key into the holder enclave: starts the holder enclave\n"
           "(EDIR/holder.bin and holder.sig; default: the enclaves/ folder beside this program)\n"
           "in the enclave process on the platform PFDIR (its root sealed to the host TEE; sim\n"
           "here: INSECURE SIMULATION), hands it DIR/dataset.key once, writes what the enclave\n"
           "sealed under its MRSIGNER policy to DIR/" GT_HOLDER_ENCLAVE_SEALED_KEY " (0600), then\n"
           "overwrites DIR/dataset.key with zeros and deletes it. From then on only an enclave\n"
           "signed by the same signer, on the same platform, opens the key (a new version of\n"
           "the holder enclave does; another signer's enclave does not): run the holder with\n"
           "'gputravel holder ... --enclave-platform PFDIR'. 'gputravel seal' needs the plain\n"
           "key, so seal the dataset before importing. Keep a backup of dataset.key offline if\n"
           "the platform may be lost: a sealed key dies with its platform.\n"
           "\n"
           "  --key DIR               the holder key folder (gputravel keygen)\n"
           "  --enclave-platform PFDIR  the enclave platform folder (gputravel enclave seal)\n"
           "  --enclave EDIR          where holder.bin / holder.sig are\n"
           "  --sim-root DIR          the sim root the platform is sealed under\n"
           "  -h, --help              this help\n");
}

gt_err gt_cli_holder_enclave_dir(const char *given, char *out, size_t cap)
{
    if (given != NULL) {
        GT_ENSURE((size_t)snprintf(out, cap, "%s", given) < cap, GT_E_ARG, "--enclave too long");
        return GT_OK;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    GT_ENSURE(n > 0, GT_E_IO, "cannot find this executable (/proc/self/exe)");
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash != NULL) {
        *slash = '\0';
    }
    GT_ENSURE((size_t)snprintf(out, cap, "%s/enclaves", self) < cap, GT_E_ARG, "path too long");
    return GT_OK;
}

gt_err gt_cli_holder_enclave_start(gt_holder_enclave **out, const char *enclave_dir,
                                   const char *platform_dir, const char *sim_root,
                                   const char *indent)
{
    char dir[PATH_MAX - 16], image[PATH_MAX], sig[PATH_MAX];
    GT_TRY(gt_cli_holder_enclave_dir(enclave_dir, dir, sizeof dir));
    snprintf(image, sizeof image, "%s/holder.bin", dir);
    snprintf(sig, sizeof sig, "%s/holder.sig", dir);
    gt_sgx_platform_options po = {.host = GT_TEE_SIM, .sim_root = sim_root};
    gt_holder_enclave_config cfg = {.image_path = image, .sigstruct_path = sig,
                                    .platform_dir = platform_dir, .platform_options = &po};
    GT_TRY(gt_holder_enclave_start(out, &cfg));
    const gt_sgx_identity *id = gt_holder_enclave_identity(*out);
    char mre[65], mrs[65];
    gt_hex_encode(mre, sizeof mre, id->mrenclave, 32);
    gt_hex_encode(mrs, sizeof mrs, id->mrsigner, 32);
    if (indent != NULL) {
        printf("%sholder enclave: MRENCLAVE %s\n%s                MRSIGNER  %s\n"
               "%s                ISVSVN %u, enclave process pid %d (INSECURE SIMULATION: a "
               "process, not a TEE)\n", indent, mre, indent, mrs, indent, id->isvsvn,
               gt_holder_enclave_pid(*out));
    }
    return GT_OK;
}

gt_err gt_cli_holder_enclave_import(const char *key_dir, const char *enclave_dir,
                                    const char *platform_dir, const char *sim_root,
                                    const char *indent)
{
    gt_holder_keys keys;
    GT_TRY(gt_keydir_load(key_dir, &keys));
    gt_holder_enclave *he = NULL;
    gt_buf sealed = {0};
    char plain[PATH_MAX], out[PATH_MAX];
    gt_err err = GT_OK;
    GT_TRY_GOTO(err, gt_path_join(plain, sizeof plain, key_dir, GT_KEYDIR_DATASET_KEY), done);
    GT_TRY_GOTO(err, gt_path_join(out, sizeof out, key_dir, GT_HOLDER_ENCLAVE_SEALED_KEY), done);
    GT_TRY_GOTO(err, gt_cli_holder_enclave_start(&he, enclave_dir, platform_dir, sim_root,
                                                 indent),
                done);
    GT_TRY_GOTO(err, gt_holder_enclave_import(he, keys.dataset_key, &sealed), done);
    gt_holder_keys_wipe(&keys);
    // the sealed copy must open before the plain one goes
    GT_TRY_GOTO(err, gt_holder_enclave_open_key(he, sealed.data, sealed.len), done);
    GT_TRY_GOTO(err, gt_file_write_atomic(out, sealed.data, sealed.len, 0600), done);
    uint8_t zeros[64] = {0};
    GT_TRY_GOTO(err, gt_file_write_atomic(plain, zeros, sizeof zeros, 0600), done);
    GT_ENSURE_GOTO(err, unlink(plain) == 0, done, GT_E_IO, "%s: %s", plain, strerror(errno));
    if (indent != NULL) {
        printf("%sthe dataset key is now sealed in %s (MRSIGNER policy);\n%s%s was overwritten "
               "and deleted\n", indent, out, indent, plain);
    }
done:
    gt_holder_keys_wipe(&keys);
    gt_buf_free_nowipe(&sealed);
    gt_holder_enclave_stop(he);
    return err;
}

int gt_cli_holder_enclave_keys(int argc, char **argv)
{
    if (gt_cli_wants_help(argc, argv)) {
        usage();
        return GT_EXIT_OK;
    }
    if (argc < 2 || strcmp(argv[1], "import") != 0) {
        return gt_cli_usage("holder enclave-keys", "the subcommand is 'import'");
    }
    static const struct option opts[] = {
        {"key", required_argument, NULL, 'k'}, {"enclave-platform", required_argument, NULL, 'p'},
        {"enclave", required_argument, NULL, 'e'}, {"sim-root", required_argument, NULL, 's'},
        {0}};
    const char *key = NULL, *platform = NULL, *enclave = NULL, *sim_root = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc - 1, argv + 1, "", opts, NULL)) != -1) {
        switch (c) {
        case 'k': key = optarg; break;
        case 'p': platform = optarg; break;
        case 'e': enclave = optarg; break;
        case 's': sim_root = optarg; break;
        default: return gt_cli_usage("holder enclave-keys", "unknown option");
        }
    }
    if (key == NULL || platform == NULL) {
        return gt_cli_usage("holder enclave-keys", "--key and --enclave-platform are required");
    }
    if (optind != argc - 1) {
        return gt_cli_usage("holder enclave-keys", "unexpected argument '%s'", argv[optind + 1]);
    }
    gt_err err = gt_cli_holder_enclave_import(key, enclave, platform, sim_root, "");
    return gt_is_ok(err) ? GT_EXIT_OK : gt_cli_fail("holder enclave-keys", err);
}
