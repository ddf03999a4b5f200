// The training agreement: parsed from JSON, hashed over its exact bytes.
#include <gputravel/travel.h>

#include <math.h>
#include <string.h>

_Static_assert(GT_AGREEMENT_MAX_MEASUREMENTS == GT_PEER_MAX_MEASUREMENTS,
               "the device's peer rules hold every accepted measurement");
_Static_assert(GT_AGREEMENT_MAX_RANKS == GT_PEER_MAX_RANKS, "trainer.ranks fits the device");


static gt_err get_u32(const cJSON *obj, const char *field, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v = 0;
    GT_TRY(gt_json_get_u64(obj, field, &v));
    GT_ENSURE(v >= lo && v <= hi, GT_E_FORMAT, "'%s' is %llu, expected %u..%u", field,
              (unsigned long long)v, lo, hi);
    *out = (uint32_t)v;
    return GT_OK;
}

static gt_err get_name(const cJSON *obj, const char *field, char out[GT_AGREEMENT_NAME_BYTES])
{
    const char *s = NULL;
    GT_TRY(gt_json_get_string(obj, field, &s));
    size_t n = strlen(s);
    GT_ENSURE(n > 0 && n < GT_AGREEMENT_NAME_BYTES, GT_E_FORMAT,
              "'%s' must have 1..%d characters", field, GT_AGREEMENT_NAME_BYTES - 1);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        GT_ENSURE((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.',
                  GT_E_FORMAT, "'%s' may hold only letters, digits, '-', '_' and '.'", field);
    }
    memcpy(out, s, n + 1);
    return GT_OK;
}

static gt_err get_measurements(const cJSON *obj, const char *field, gt_measurement_list *out)
{
    memset(out, 0, sizeof *out);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, field);
    if (arr == NULL) {
        return GT_OK;
    }
    GT_ENSURE(cJSON_IsArray(arr), GT_E_FORMAT, "'%s' must be an array of hex strings", field);
    GT_ENSURE(cJSON_GetArraySize(arr) <= GT_AGREEMENT_MAX_MEASUREMENTS, GT_E_LIMIT,
              "'%s': more than %d measurements", field, GT_AGREEMENT_MAX_MEASUREMENTS);
    const cJSON *item = NULL;
    cJSON_ArrayForEach(item, arr) {
        GT_ENSURE(cJSON_IsString(item), GT_E_FORMAT, "'%s' must hold hex strings", field);
        GT_TRY(gt_err_wrap(gt_hex_decode_exact(out->values[out->count], GT_MEASUREMENT_BYTES,
                                               item->valuestring),
                           "'%s'[%u]", field, out->count));
        out->count++;
    }
    return GT_OK;
}

// holders[i].enclave (the strict shape check ran first: known members, each once, of its type).
static gt_err parse_enclave(const cJSON *h, gt_agreement_enclave *out)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(h, "enclave");
    if (e == NULL) {
        return GT_OK;
    }
    GT_ENSURE(cJSON_IsObject(e), GT_E_FORMAT, "enclave: expected an object");
    out->present = true;
    out->has_mrsigner = cJSON_GetObjectItemCaseSensitive(e, "mrsigner") != NULL;
    out->has_mrenclave = cJSON_GetObjectItemCaseSensitive(e, "mrenclave") != NULL;
    GT_ENSURE(out->has_mrsigner || out->has_mrenclave, GT_E_FORMAT,
              "enclave: names neither mrsigner nor mrenclave (at least one is required)");
    if (out->has_mrsigner) {
        GT_TRY(gt_err_wrap(gt_json_get_hex(e, "mrsigner", out->mrsigner, 32),
                           "enclave.mrsigner (64 hex digits)"));
    }
    if (out->has_mrenclave) {
        GT_TRY(gt_err_wrap(gt_json_get_hex(e, "mrenclave", out->mrenclave, 32),
                           "enclave.mrenclave (64 hex digits)"));
    }
    uint32_t v = 0;
    if (cJSON_GetObjectItemCaseSensitive(e, "isvprodid") != NULL) {
        GT_TRY(gt_err_wrap(get_u32(e, "isvprodid", 0, 65535, &v), "enclave"));
        out->isvprodid = (uint16_t)v;
        out->has_isvprodid = true;
    }
    if (cJSON_GetObjectItemCaseSensitive(e, "min_isvsvn") != NULL) {
        GT_TRY(gt_err_wrap(get_u32(e, "min_isvsvn", 0, 65535, &v), "enclave"));
        out->min_isvsvn = (uint16_t)v;
    }
    if (cJSON_GetObjectItemCaseSensitive(e, "debug") != NULL) {
        GT_TRY(gt_err_wrap(gt_json_get_bool(e, "debug", &out->debug), "enclave"));
    }
    return GT_OK;
}

static gt_err parse_holder(const cJSON *h, gt_agreement_holder *out)
{
    GT_ENSURE(cJSON_IsObject(h), GT_E_FORMAT, "a holder must be an object");
    const char *endpoint = NULL;
    uint64_t budget = 0;
    GT_TRY(get_name(h, "name", out->name));
    GT_TRY(gt_err_wrap(gt_json_get_hex(h, "identity_key", out->identity_key,
                                       sizeof out->identity_key), "holder %s", out->name));
    GT_TRY(gt_err_wrap(gt_ed25519_public_check(out->identity_key), "holder %s: identity_key",
                       out->name));
    GT_TRY(gt_err_wrap(gt_json_get_hex(h, "dataset_id", out->dataset_id,
                                       sizeof out->dataset_id), "holder %s", out->name));
    GT_TRY(gt_err_wrap(gt_json_get_string(h, "endpoint", &endpoint), "holder %s", out->name));
    GT_ENSURE(strlen(endpoint) < sizeof out->endpoint && strchr(endpoint, ':') != NULL,
              GT_E_FORMAT, "holder %s: endpoint must be HOST:PORT", out->name);
    snprintf(out->endpoint, sizeof out->endpoint, "%s", endpoint);
    GT_TRY(gt_err_wrap(gt_json_get_u64(h, "token_budget", &budget), "holder %s", out->name));
    GT_ENSURE(budget > 0, GT_E_FORMAT, "holder %s: token_budget must be positive", out->name);
    out->token_budget = budget;
    GT_TRY(gt_err_wrap(get_u32(h, "max_uses_per_chunk", 1, 1000000, &out->max_uses_per_chunk),
                       "holder %s", out->name));
    if (cJSON_GetObjectItemCaseSensitive(h, "recipient_key") != NULL) {
        GT_TRY(gt_err_wrap(gt_json_get_hex(h, "recipient_key", out->recipient_key,
                                           sizeof out->recipient_key), "holder %s", out->name));
        out->has_recipient_key = true;
    }
    return gt_err_wrap(parse_enclave(h, &out->enclave), "holder %s", out->name);
}

// The holders: no two share a name, a dataset or (where given) a recipient key.
static gt_err parse_holders(gt_agreement *a, const cJSON *doc)
{
    const cJSON *holders = cJSON_GetObjectItemCaseSensitive(doc, "holders");
    GT_ENSURE(cJSON_IsArray(holders) && cJSON_GetArraySize(holders) > 0, GT_E_FORMAT,
              "'holders' must be a non-empty array");
    GT_ENSURE(cJSON_GetArraySize(holders) <= GT_AGREEMENT_MAX_HOLDERS, GT_E_LIMIT,
              "more than %d holders", GT_AGREEMENT_MAX_HOLDERS);
    const cJSON *h = NULL;
    cJSON_ArrayForEach(h, holders) {
        gt_agreement_holder *out = &a->holders[a->holder_count];
        GT_TRY(gt_err_wrap(parse_holder(h, out), "holders[%u]", a->holder_count));
        for (uint32_t i = 0; i < a->holder_count; i++) {
            GT_ENSURE(strcmp(a->holders[i].name, out->name) != 0, GT_E_FORMAT,
                      "holder name '%s' appears twice", out->name);
            GT_ENSURE(memcmp(a->holders[i].dataset_id, out->dataset_id, GT_DATASET_ID_BYTES) != 0,
                      GT_E_FORMAT, "holders '%s' and '%s' name the same dataset",
                      a->holders[i].name, out->name);
            GT_ENSURE(!out->has_recipient_key || !a->holders[i].has_recipient_key ||
                          memcmp(a->holders[i].recipient_key, out->recipient_key,
                                 GT_X25519_BYTES) != 0,
                      GT_E_FORMAT, "holders '%s' and '%s' have the same recipient_key",
                      a->holders[i].name, out->name);
        }
        a->holder_count++;
    }
    return GT_OK;
}

// What the run may let out: its losses only, or a checkpoint sealed to named holders.
static gt_err parse_output(gt_agreement *a, const cJSON *doc)
{
    const cJSON *output = cJSON_GetObjectItemCaseSensitive(doc, "output");
    const char *kind = NULL;
    GT_TRY(gt_err_wrap(gt_json_get_string(output, "kind", &kind), "output"));
    if (strcmp(kind, "loss_only") == 0) {
        a->output = GT_OUTPUT_LOSS_ONLY;
    } else if (strcmp(kind, "sealed_checkpoint") == 0) {
        a->output = GT_OUTPUT_SEALED_CHECKPOINT;
        const cJSON *rec = cJSON_GetObjectItemCaseSensitive(output, "recipients");
        GT_ENSURE(cJSON_IsArray(rec) && cJSON_GetArraySize(rec) > 0, GT_E_FORMAT,
                  "output: a sealed checkpoint needs a non-empty 'recipients' array");
        GT_ENSURE(cJSON_GetArraySize(rec) <= GT_AGREEMENT_MAX_HOLDERS, GT_E_LIMIT,
                  "output: too many recipients");
        const cJSON *r = NULL;
        cJSON_ArrayForEach(r, rec) {
            const gt_agreement_holder *holder =
                cJSON_IsString(r) ? gt_agreement_find_holder(a, r->valuestring) : NULL;
            GT_ENSURE(holder != NULL, GT_E_FORMAT, "output: recipient '%s' is not a holder",
                      cJSON_IsString(r) ? r->valuestring : "?");
            GT_ENSURE(holder->has_recipient_key, GT_E_FORMAT,
                      "output: recipient '%s' has no 'recipient_key' (64 hex digits: the X25519 "
                      "public key in its key folder's recipient_x25519.pub)",
                      holder->name);
            for (uint32_t i = 0; i < a->recipient_count; i++) {
                GT_ENSURE(strcmp(a->recipients[i], holder->name) != 0, GT_E_FORMAT,
                          "output: recipient '%s' appears twice", holder->name);
            }
            snprintf(a->recipients[a->recipient_count++], GT_AGREEMENT_NAME_BYTES, "%s",
                     r->valuestring);
        }
    } else {
        return gt_errf(GT_E_FORMAT, "output: kind '%s' (expected loss_only or sealed_checkpoint)",
                       kind);
    }
    return GT_OK;
}

// What the device may release ("outputs"). Absent, the version-1 defaults: the loss every step
// at full precision and the resume state; never the gradient norm.
static gt_err parse_outputs(gt_agreement *a, const cJSON *doc)
{
    a->outputs.loss = true;
    a->outputs.loss_every = 1;
    a->outputs.loss_mantissa_bits = 23;
    a->outputs.resume = true;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(doc, "outputs");
    if (o == NULL) {
        return GT_OK;
    }
    GT_ENSURE(cJSON_IsObject(o), GT_E_FORMAT, "'outputs' must be an object");
    const cJSON *f = NULL;
    cJSON_ArrayForEach(f, o) {
        const char *k = f->string;
        if (strcmp(k, "loss") == 0) {
            a->outputs.loss = !cJSON_IsFalse(f);
            if (cJSON_IsObject(f)) {
                if (cJSON_GetObjectItemCaseSensitive(f, "every") != NULL) {
                    GT_TRY(gt_err_wrap(get_u32(f, "every", 1, 1000000, &a->outputs.loss_every),
                                       "outputs.loss"));
                }
                if (cJSON_GetObjectItemCaseSensitive(f, "mantissa_bits") != NULL) {
                    GT_TRY(gt_err_wrap(get_u32(f, "mantissa_bits", 1, 23,
                                               &a->outputs.loss_mantissa_bits),
                                       "outputs.loss"));
                }
            } else {
                GT_ENSURE(cJSON_IsBool(f), GT_E_FORMAT,
                          "outputs: 'loss' must be false or an object {every, mantissa_bits}");
            }
        } else if (strcmp(k, "grad_norm") == 0 || strcmp(k, "resume") == 0) {
            GT_ENSURE(cJSON_IsBool(f), GT_E_FORMAT, "outputs: '%s' must be a bool", k);
            *(k[0] == 'g' ? &a->outputs.grad_norm : &a->outputs.resume) = cJSON_IsTrue(f);
        } else if (strcmp(k, "checkpoint") == 0) {
            GT_ENSURE(cJSON_IsBool(f) && cJSON_IsTrue(f) == (a->output == GT_OUTPUT_SEALED_CHECKPOINT),
                      GT_E_FORMAT, "outputs: 'checkpoint' must be %s, as 'output' says",
                      a->output == GT_OUTPUT_SEALED_CHECKPOINT ? "true" : "false");
        } else {
            return gt_errf(GT_E_FORMAT, "outputs: unknown output '%s' (expected loss, grad_norm, "
                           "checkpoint or resume)", k);
        }
    }
    return GT_OK;
}

const char *gt_transfer_mode_name(gt_transfer_mode mode)
{
    switch (mode) {
    case GT_TRANSFER_CONVENTIONAL: return "conventional";
    case GT_TRANSFER_CONVENTIONAL_KEYRELEASE: return "conventional-keyrelease";
    case GT_TRANSFER_TRAVEL: return "travel";
    case GT_TRANSFER_INSECURE_HOST_TRIP: return "insecure-host-trip";
    default: return "unknown";
    }
}

gt_err gt_transfer_mode_parse(const char *name, gt_transfer_mode *mode)
{
    for (int m = 0; m < GT_TRANSFER_MODE_COUNT; m++) {
        if (name != NULL && strcmp(name, gt_transfer_mode_name((gt_transfer_mode)m)) == 0) {
            *mode = (gt_transfer_mode)m;
            return GT_OK;
        }
    }
    return gt_errf(GT_E_ARG, "unknown transfer mode '%.40s' (conventional, "
                             "conventional-keyrelease, travel or insecure-host-trip)",
                   name ? name : "");
}

// "transfer": the modes chunks may travel by, each named once; absent: GT_TRANSFER_DEFAULT.
static gt_err parse_transfer(gt_agreement *a, const cJSON *doc)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "transfer");
    if (arr == NULL) {
        a->transfers = GT_TRANSFER_DEFAULT;
        return GT_OK;
    }
    GT_ENSURE(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) > 0, GT_E_FORMAT,
              "'transfer' must be a non-empty array of mode names");
    GT_ENSURE(cJSON_GetArraySize(arr) <= GT_TRANSFER_MODE_COUNT, GT_E_FORMAT,
              "'transfer': more than %d entries (each mode once)", GT_TRANSFER_MODE_COUNT);
    const cJSON *item = NULL;
    int i = 0;
    cJSON_ArrayForEach(item, arr) {
        GT_ENSURE(cJSON_IsString(item), GT_E_FORMAT, "'transfer'[%d] must be a mode name", i);
        gt_transfer_mode m = GT_TRANSFER_CONVENTIONAL;
        gt_err e = gt_transfer_mode_parse(item->valuestring, &m);
        GT_ENSURE(gt_is_ok(e), GT_E_FORMAT, "'transfer'[%d]: %s", i, e.msg);
        GT_ENSURE(!(a->transfers & GT_TRANSFER_BIT(m)), GT_E_FORMAT,
                  "'transfer'[%d]: '%s' appears twice", i, gt_transfer_mode_name(m));
        a->transfers |= GT_TRANSFER_BIT(m);
        i++;
    }
    return GT_OK;
}

static gt_err parse_doc(gt_agreement *a, const cJSON *doc)
{
    // The version first: another version may have other fields, so its shape is not ours to judge.
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(doc, "version");
    GT_ENSURE(!cJSON_IsNumber(ver) || ver->valuedouble == 1, GT_E_UNSUPPORTED,
              "agreement version %g (this build reads version 1)", ver->valuedouble);
    GT_TRY(gt_agreement_check_shape(doc));
    uint32_t version = 0;
    GT_TRY(get_u32(doc, "version", 1, 1000, &version));
    GT_ENSURE(version == 1, GT_E_UNSUPPORTED, "agreement version %u (expected 1)", version);
    GT_TRY(get_name(doc, "name", a->name));

    const cJSON *model = cJSON_GetObjectItemCaseSensitive(doc, "model");
    GT_TRY(gt_err_wrap(get_u32(model, "layers", 1, 96, &a->layers), "model"));
    GT_TRY(gt_err_wrap(get_u32(model, "channels", 1, 12288, &a->channels), "model"));
    GT_TRY(gt_err_wrap(get_u32(model, "heads", 1, 128, &a->heads), "model"));
    GT_TRY(gt_err_wrap(get_u32(model, "vocab", 2, 1u << 20, &a->vocab), "model"));
    GT_TRY(gt_err_wrap(get_u32(model, "max_seq", 1, 1u << 16, &a->max_seq), "model"));
    GT_TRY(gt_err_wrap(gt_json_get_u64(model, "init_seed", &a->init_seed), "model"));
    GT_ENSURE(a->channels % a->heads == 0, GT_E_FORMAT,
              "model: channels (%u) must be a multiple of heads (%u)", a->channels, a->heads);

    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(doc, "training");
    GT_TRY(gt_err_wrap(get_u32(tr, "steps", 1, 100000000, &a->steps), "training"));
    GT_TRY(gt_err_wrap(get_u32(tr, "batch", 1, 65536, &a->batch), "training"));
    GT_TRY(gt_err_wrap(get_u32(tr, "seq", 1, a->max_seq, &a->seq), "training"));
    const cJSON *lr = cJSON_GetObjectItemCaseSensitive(tr, "learning_rate");
    GT_ENSURE(cJSON_IsNumber(lr) && lr->valuedouble > 0 && lr->valuedouble < 1 &&
                  isfinite(lr->valuedouble),
              GT_E_FORMAT, "training: 'learning_rate' must be a number in (0, 1)");
    a->learning_rate = (float)lr->valuedouble;
    if (cJSON_GetObjectItemCaseSensitive(tr, "program") != NULL) {
        GT_TRY(gt_err_wrap(gt_json_get_hex(tr, "program", a->program_hash,
                                           sizeof a->program_hash), "training"));
        a->program_pinned = true;
    }

    GT_TRY(parse_holders(a, doc));

    const cJSON *trainer = cJSON_GetObjectItemCaseSensitive(doc, "trainer");
    const cJSON *device = cJSON_GetObjectItemCaseSensitive(doc, "device");
    GT_ENSURE(cJSON_IsObject(trainer) && cJSON_IsObject(device), GT_E_FORMAT,
              "'trainer' and 'device' objects are required");
    GT_TRY(get_measurements(trainer, "accepted_measurements", &a->trainer_measurements));
    GT_TRY(get_measurements(device, "accepted_measurements", &a->device_measurements));
    a->ranks = 1;  // one trainer unless the agreement admits more (issue 16)
    if (cJSON_GetObjectItemCaseSensitive(trainer, "ranks") != NULL) {
        GT_TRY(gt_err_wrap(get_u32(trainer, "ranks", 1, GT_AGREEMENT_MAX_RANKS, &a->ranks),
                           "trainer"));
    }
    const cJSON *sim = cJSON_GetObjectItemCaseSensitive(doc, "allow_simulation");
    a->allow_simulation = cJSON_IsTrue(sim);
    GT_ENSURE(sim == NULL || cJSON_IsBool(sim), GT_E_FORMAT, "'allow_simulation' must be a bool");
    GT_ENSURE(a->allow_simulation ||
                  (a->trainer_measurements.count > 0 && a->device_measurements.count > 0),
              GT_E_FORMAT,
              "without allow_simulation, trainer and device measurement lists are required");

    GT_TRY(parse_transfer(a, doc));
    GT_TRY(parse_output(a, doc));
    return parse_outputs(a, doc);
}

gt_err gt_agreement_parse(gt_agreement *a, const uint8_t *doc, size_t len)
{
    memset(a, 0, sizeof *a);
    GT_ENSURE(len <= GT_AGREEMENT_MAX_BYTES, GT_E_LIMIT, "agreement larger than %u bytes",
              GT_AGREEMENT_MAX_BYTES);
    cJSON *json = NULL;
    GT_TRY(gt_err_wrap(gt_json_parse((const char *)doc, len, &json), "agreement"));
    gt_err err = parse_doc(a, json);
    cJSON_Delete(json);
    if (!gt_is_ok(err)) {
        memset(a, 0, sizeof *a);
        return gt_err_wrap(err, "agreement");
    }
    memcpy(a->doc, doc, len);
    a->doc_len = len;
    return gt_hash(GT_HASH_SHA256, a->hash, doc, len);
}

gt_err gt_agreement_load(gt_agreement *a, const char *path)
{
    gt_buf b = {0};
    GT_TRY(gt_file_read_all(path, GT_AGREEMENT_MAX_BYTES, &b));
    gt_err err = gt_agreement_parse(a, b.data, b.len);
    gt_buf_free_nowipe(&b);
    return gt_err_wrap(err, "%s", path);
}

const gt_agreement_holder *gt_agreement_find_holder(const gt_agreement *a, const char *name)
{
    for (uint32_t i = 0; i < a->holder_count; i++) {
        if (strcmp(a->holders[i].name, name) == 0) {
            return &a->holders[i];
        }
    }
    return NULL;
}

bool gt_measurement_allowed(const gt_measurement_list *list, const uint8_t m[GT_MEASUREMENT_BYTES])
{
    if (list->count == 0) {
        return true;
    }
    bool found = false;
    for (uint32_t i = 0; i < list->count; i++) {
        found |= gt_ct_equal(list->values[i], m, GT_MEASUREMENT_BYTES);
    }
    return found;
}

void gt_agreement_device_outputs(const gt_agreement *a, gt_device_outputs *out)
{
    uint32_t every = a->outputs.loss_every ? a->outputs.loss_every : 1;
    *out = (gt_device_outputs){
        .loss = a->outputs.loss,
        .loss_mantissa_bits = a->outputs.loss_mantissa_bits,
        .loss_budget = a->outputs.loss ? ((uint64_t)a->steps + every - 1) / every : 0,
        .grad_norm = a->outputs.grad_norm,
        .grad_norm_budget = a->outputs.grad_norm ? a->steps : 0,
        .checkpoint = a->output == GT_OUTPUT_SEALED_CHECKPOINT,
        .resume = a->outputs.resume,
        .program_pinned = a->program_pinned,
    };
    memcpy(out->program_hash, a->program_hash, sizeof out->program_hash);
    gt_device_peer_rules *p = &out->peers;
    p->ranks = a->ranks ? a->ranks : 1;
    p->allow_simulation = a->allow_simulation;
    memcpy(p->agreement_hash, a->hash, sizeof p->agreement_hash);
    p->trainer_count = a->trainer_measurements.count;
    memcpy(p->trainer, a->trainer_measurements.values, sizeof p->trainer);
    p->device_count = a->device_measurements.count;
    memcpy(p->device, a->device_measurements.values, sizeof p->device);
}

bool gt_agreement_allows(const gt_agreement *a, gt_transfer_mode mode)
{
    return (unsigned)mode < GT_TRANSFER_MODE_COUNT && (a->transfers & GT_TRANSFER_BIT(mode)) != 0;
}

void gt_agreement_transfer_list(const gt_agreement *a, char *out, size_t cap)
{
    if (cap == 0) {
        return;
    }
    out[0] = '\0';
    size_t used = 0;
    for (int m = 0; m < GT_TRANSFER_MODE_COUNT; m++) {
        if (!gt_agreement_allows(a, (gt_transfer_mode)m)) {
            continue;
        }
        int n = snprintf(out + used, cap - used, "%s%s", used ? ", " : "",
                         gt_transfer_mode_name((gt_transfer_mode)m));
        if (n < 0 || (size_t)n >= cap - used) {
            return;  // cut: out stays NUL-terminated
        }
        used += (size_t)n;
    }
    if (used == 0) {
        snprintf(out, cap, "(none)");
    }
}

gt_err gt_agreement_transfer_check(const gt_agreement *a, gt_transfer_mode mode, const char *what)
{
    if (gt_agreement_allows(a, mode)) {
        return GT_OK;
    }
    char list[96];
    gt_agreement_transfer_list(a, list, sizeof list);
    return gt_errf(GT_E_POLICY, "%s: transfer mode '%s' is not in the agreement's transfer list "
                                "(%s)", what, gt_transfer_mode_name(mode), list);
}
