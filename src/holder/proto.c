// The holder protocol's trainer-to-holder messages (layout in holder.h), parsed field by field.
#include <gputravel/holder.h>

#include <string.h>

static gt_err hello_parse(gt_span body, gt_hp_hello *out)
{
    gt_reader r = gt_reader_init(body.data, body.len);
    uint16_t n = 0;
    GT_TRY(gt_reader_bytes(&r, out->agreement, sizeof out->agreement));
    GT_TRY(gt_reader_bytes(&r, out->signing_key, sizeof out->signing_key));
    GT_TRY(gt_reader_u16le(&r, &n));
    GT_ENSURE(n > 0 && n < sizeof out->trainer, GT_E_FORMAT, "hello: trainer name of %u bytes",
              n);
    GT_TRY(gt_reader_bytes(&r, out->trainer, n));
    GT_TRY(gt_reader_expect_end(&r, "hello"));
    for (uint16_t i = 0; i < n; i++) {
        GT_ENSURE(out->trainer[i] > 0x20 && out->trainer[i] < 0x7f, GT_E_FORMAT,
                  "hello: unprintable trainer name");
    }
    return GT_OK;
}

gt_err gt_hp_hello_parse(gt_span body, gt_hp_hello *out)
{
    memset(out, 0, sizeof *out);
    gt_err err = hello_parse(body, out);
    if (!gt_is_ok(err)) {
        memset(out, 0, sizeof *out);  // nothing half-parsed (a key without its trainer) survives
    }
    return err;
}

gt_err gt_hp_fetch_parse(gt_span body, gt_hp_fetch *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(body.data, body.len);
    GT_TRY(gt_reader_u8(&r, &out->mode));
    GT_TRY(gt_reader_u32le(&r, &out->chunk));
    GT_TRY(gt_reader_expect_end(&r, "fetch"));
    GT_ENSURE(out->mode == GT_FETCH_PLAIN || out->mode == GT_FETCH_KEYRELEASE, GT_E_FORMAT,
              "fetch: unknown mode %u", out->mode);
    return GT_OK;
}

gt_err gt_hp_travel_parse(gt_span body, gt_hp_travel *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(body.data, body.len);
    uint16_t n = 0;
    GT_TRY(gt_reader_u32le(&r, &out->chunk));
    GT_TRY(gt_reader_bytes(&r, out->ticket, sizeof out->ticket));
    GT_TRY(gt_reader_u16le(&r, &n));
    GT_ENSURE(n > 0 && n < sizeof out->device, GT_E_FORMAT, "travel: device address of %u bytes",
              n);
    GT_TRY(gt_reader_bytes(&r, out->device, n));
    GT_TRY(gt_reader_expect_end(&r, "travel"));
    GT_ENSURE(strlen(out->device) == n, GT_E_FORMAT, "travel: device address holds a NUL byte");
    return GT_OK;
}

gt_err gt_hp_used_parse(gt_span body, gt_hp_used *out)
{
    memset(out, 0, sizeof *out);
    gt_reader r = gt_reader_init(body.data, body.len);
    GT_TRY(gt_reader_u32le(&r, &out->chunk));
    GT_TRY(gt_reader_u64le(&r, &out->tokens));
    return gt_reader_expect_end(&r, "used");
}
