// cli/: `gputravel inspect STATE-DIR` names every file of a run's state folder (sealed
// checkpoint, device-sealed resume state, journal, resume key, other) and flags plaintext model
// data: an llm.c checkpoint or a plaintext training state makes it exit 1 naming the file.
#include "testlib.h"

#include <gputravel/seal.h>
#include <gputravel/train.h>
#include <gputravel/travel.h>

#include <string.h>

static const gt_sckpt_model shapes = {.max_seq_len = 8, .vocab_size = 64, .num_layers = 1,
                                      .num_heads = 2, .channels = 16, .padded_vocab_size = 64};

static void write_sealed_files(const char *dir, const gt_buf *model)
{
    char p[700];
    // a checkpoint sealed for one recipient
    uint8_t xs[32], signer[32], spub[32];
    gt_sckpt_recipient r = {.name = "h0"};
    GT_ASSERT_OK(gt_x25519_keypair(r.pub, xs));
    GT_ASSERT_OK(gt_ed25519_keypair(spub, signer));
    gt_sckpt_seal_params sp = {.step = 7, .model = shapes, .recipients = &r,
                               .recipient_count = 1, .signing_secret = signer};
    gt_buf sealed = {0};
    GT_ASSERT_OK(gt_sckpt_seal_mem(&sp, gt_buf_span(model), &sealed, NULL));
    GT_ASSERT_OK(gt_path_join(p, sizeof p, dir, "model.sealed"));
    GT_ASSERT_OK(gt_file_write_atomic(p, sealed.data, sealed.len, 0644));
    gt_buf_free_nowipe(&sealed);
    // a resume state under a cpu resume key
    gt_resume_device rd;
    GT_ASSERT_OK(gt_resume_device_load(dir, &rd));
    gt_resume_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.device_id, rd.id, sizeof h.device_id);
    h.model = shapes;
    h.params_bytes = model->len - GT_SCKPT_LLMC_HEADER_BYTES;
    gt_span part = {model->data + GT_SCKPT_LLMC_HEADER_BYTES, (size_t)h.params_bytes};
    gt_seal_spans spans = {.spans = &part, .count = 1};
    gt_seal_source src = gt_seal_spans_source(&spans);
    gt_buf st = {0};
    GT_ASSERT_OK(gt_resume_seal(&h, rd.secret, &src, &st));
    GT_ASSERT_OK(gt_path_join(p, sizeof p, dir, "resume.sealed"));
    GT_ASSERT_OK(gt_file_write_atomic(p, st.data, st.len, 0600));
    gt_buf_free_nowipe(&st);
    GT_ASSERT_OK(gt_path_join(p, sizeof p, dir, "journal"));
    GT_ASSERT_OK(gt_file_write_atomic(p, "use 20 0 0 4096\n", 16, 0600));
}

static void state_folder_is_named_and_plaintext_flagged(void **state)
{
    (void)state;
    char dir[256], p[700];
    gt_test_tmpdir(dir, sizeof dir);
    gt_buf model = {0};
    GT_ASSERT_OK(gt_buf_reserve(&model, GT_SCKPT_LLMC_HEADER_BYTES + 4096));
    gt_sckpt_llmc_header(model.data, &shapes);
    memset(model.data + GT_SCKPT_LLMC_HEADER_BYTES, 0x3c, 4096);
    model.len = GT_SCKPT_LLMC_HEADER_BYTES + 4096;
    write_sealed_files(dir, &model);
    gt_buf out = {0};
    int rc = gt_test_run_cli(&out, (const char *[]){"inspect", dir, NULL});
    const char *o = (const char *)out.data;
    if (rc != 0 || strstr(o, "model.sealed") == NULL || strstr(o, "sealed checkpoint: step 7") ==
                       NULL || strstr(o, "device-sealed resume state") == NULL ||
        strstr(o, "journal") == NULL || strstr(o, "resume key") == NULL ||
        strstr(o, "4 file(s); none is plaintext model data") == NULL) {
        fail_msg("inspect (%d):\n%s", rc, o);
    }
    gt_buf_free(&out);
    // A plaintext checkpoint and a plaintext training state beside them: flagged, exit 1.
    GT_ASSERT_OK(gt_path_join(p, sizeof p, dir, "model.bin"));
    GT_ASSERT_OK(gt_file_write_atomic(p, model.data, model.len, 0644));
    uint8_t ts[64] = {0};
    gt_store_u32le(ts, GT_TRAIN_STATE_MAGIC);
    GT_ASSERT_OK(gt_path_join(p, sizeof p, dir, "model.bin.state"));
    GT_ASSERT_OK(gt_file_write_atomic(p, ts, sizeof ts, 0600));
    rc = gt_test_run_cli(&out, (const char *[]){"inspect", dir, NULL});
    o = (const char *)out.data;
    if (rc != 1 || strstr(o, "model.bin ") == NULL ||
        strstr(o, "PLAINTEXT llm.c checkpoint") == NULL ||
        strstr(o, "PLAINTEXT training state") == NULL ||
        strstr(o, "2 of 6 file(s) hold PLAINTEXT model data") == NULL) {
        fail_msg("inspect with plaintext (%d):\n%s", rc, o);
    }
    gt_buf_free(&out);
    rc = gt_test_run_cli(&out, (const char *[]){"inspect", dir, "--json", NULL});
    o = (const char *)out.data;
    if (rc != 1 || strstr(o, "\"plaintext_model_files\":\t2") == NULL) {
        fail_msg("inspect --json (%d):\n%s", rc, o);
    }
    gt_buf_free(&out);
    gt_buf_free(&model);
    gt_test_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(state_folder_is_named_and_plaintext_flagged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
