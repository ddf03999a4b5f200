// EINIT's checks (SDM vol. 3D, EINIT operation), every one of them, before an enclave may run.
// What real hardware adds and we do not model here: the launch token / launch control MSRs.
#include <gputravel/enclave.h>

#include <string.h>

gt_err gt_enclave_einit_check(const gt_sgx_sigstruct *s, const gt_sgx_einit_params *p,
                              gt_sgx_identity *id)
{
    GT_ENSURE(p->mrenclave != NULL, GT_E_ARG, "einit: no measured MRENCLAVE given");
    gt_sgx_sigstruct_checks c;
    GT_TRY(gt_sgx_sigstruct_verify(s, &c));
    // The SIGSTRUCT on its own: constants, reserved fields, then the signature and q1/q2.
    GT_ENSURE(c.header_ok, GT_E_FORMAT, "einit: SIGSTRUCT HEADER is not the SGX constant");
    GT_ENSURE(c.header2_ok, GT_E_FORMAT, "einit: SIGSTRUCT HEADER2 is not the SGX constant");
    GT_ENSURE(c.vendor_ok, GT_E_FORMAT, "einit: SIGSTRUCT VENDOR 0x%08x (0 or 0x8086)",
              s->vendor);
    GT_ENSURE(c.exponent_ok, GT_E_FORMAT, "einit: SIGSTRUCT EXPONENT %u (SGX signs with 3)",
              s->exponent);
    GT_ENSURE(c.modulus_ok, GT_E_FORMAT, "einit: SIGSTRUCT MODULUS is not 3072 bits");
    for (int i = 0; i < 4; i++) {
        GT_ENSURE(c.reserved_ok[i], GT_E_FORMAT, "einit: SIGSTRUCT reserved field %d is not "
                  "zero", i + 1);
    }
    GT_ENSURE(c.signature_lt_modulus && c.signature_ok, GT_E_AUTH,
              "einit: SIGSTRUCT signature does not verify under its modulus");
    GT_ENSURE(c.q1_ok && c.q2_ok, GT_E_AUTH, "einit: SIGSTRUCT Q1/Q2 do not match the signature");
    // The enclave against the SIGSTRUCT.
    GT_ENSURE(gt_ct_equal(s->enclavehash, p->mrenclave, GT_SGX_HASH_BYTES), GT_E_AUTH,
              "einit: the enclave's MRENCLAVE is not the SIGSTRUCT's ENCLAVEHASH");
    gt_sgx_attributes a = p->secs_attributes;
    a.flags &= ~GT_SGX_ATTR_INIT;  // EINIT sets INIT itself
    GT_ENSURE((a.flags & s->attributemask.flags) ==
                      (s->attributes.flags & s->attributemask.flags) &&
                  (a.xfrm & s->attributemask.xfrm) == (s->attributes.xfrm & s->attributemask.xfrm),
              GT_E_POLICY, "einit: SECS.ATTRIBUTES %016llx/%016llx differ from the SIGSTRUCT's "
              "%016llx/%016llx under its mask", (unsigned long long)a.flags,
              (unsigned long long)a.xfrm, (unsigned long long)s->attributes.flags,
              (unsigned long long)s->attributes.xfrm);
    GT_ENSURE((p->secs_miscselect & s->miscmask) == (s->miscselect & s->miscmask), GT_E_POLICY,
              "einit: SECS.MISCSELECT 0x%08x differs from the SIGSTRUCT's 0x%08x under its mask",
              p->secs_miscselect, s->miscselect);
    GT_ENSURE((p->secs_cet_attributes & s->cet_attributes_mask) ==
                  (s->cet_attributes & s->cet_attributes_mask),
              GT_E_POLICY, "einit: SECS.CET_ATTRIBUTES differ from the SIGSTRUCT's under its mask");
    bool debug = (a.flags & GT_SGX_ATTR_DEBUG) != 0;
    GT_ENSURE(!debug || p->allow_debug, GT_E_POLICY,
              "einit: a DEBUG enclave (its memory is readable by a debugger) and the policy "
              "does not allow debug enclaves");
    GT_ENSURE(s->header_type != GT_SGX_HEADER_TYPE_DEBUG || debug, GT_E_POLICY,
              "einit: a debug-signed SIGSTRUCT may only launch a DEBUG enclave");
    GT_ENSURE(s->isvsvn >= p->min_isvsvn, GT_E_POLICY, "einit: ISVSVN %u is below the minimum %u",
              s->isvsvn, p->min_isvsvn);
    memset(id, 0, sizeof *id);
    memcpy(id->mrenclave, s->enclavehash, sizeof id->mrenclave);
    memcpy(id->mrsigner, c.mrsigner, sizeof id->mrsigner);
    id->isvprodid = s->isvprodid;
    id->isvsvn = s->isvsvn;
    id->attributes = a;
    id->attributes.flags |= GT_SGX_ATTR_INIT;
    id->miscselect = p->secs_miscselect;
    id->debug = debug;
    return GT_OK;
}
