// Intel SGX SDK signed enclaves: an ELF64 shared object whose .note.sgxmeta note ("sgx_metadata")
// holds metadata_t (the SDK's public metadata.h: the SIGSTRUCT, the patch table and the layout
// table of heap, TCS, SSA, stack and guard pages). MRENCLAVE is what the SDK's loader builds
// (psw/urts/loader.cpp build_image) and sgx_sign measures; this file re-derives it from the
// format alone. Every ELF and metadata field goes through gt_reader and is bounds checked.
#include <gputravel/enclave.h>

#include <stdlib.h>
#include <string.h>

// ELF64 (System V gABI) numbers we read.
#define EHDR_BYTES 64
#define PHDR_BYTES 56
#define SHDR_BYTES 64
#define PT_LOAD 1
#define PT_DYNAMIC 2
#define PF_X 1
#define PF_W 2
#define PF_R 4
#define DT_NULL 0
#define DT_TEXTREL 22
#define ET_DYN 3
#define EM_X86_64 62

// metadata_t: magic u64, version u64, size u32, tcs_policy u32, ssa_frame_size u32,
// max_save_buffer_size u32, desired_misc_select u32, tcs_min_pool u32, enclave_size u64,
// attributes 16, enclave_css 1808, dirs[2] {offset u32, size u32}, data...
#define META_CSS_OFFSET 64
#define META_DIRS_OFFSET (META_CSS_OFFSET + GT_SGX_SIGSTRUCT_BYTES)
#define META_HEADER_BYTES (META_DIRS_OFFSET + 16)
#define PATCH_BYTES 32   // dst u64 (file offset), src u32 (metadata offset), size u32, 16 reserved
#define LAYOUT_BYTES 32  // entry or group, told apart by GROUP_FLAG in the id
#define GROUP_FLAG 0x1000u
#define PAGE_ATTR_EADD 0x1u
#define PAGE_ATTR_EEXTEND 0x2u
#define SI_FLAGS_TCS GT_SGX_SECINFO_TCS
#define TCS_OSSA 16      // tcs_t fields the loader relocates by the TCS's own offset
#define TCS_OFS_BASE 48
#define TCS_OGS_BASE 56
#define META_VERSION_1_3 ((1ull << 32) | 3)  // SDK 1.5's metadata: one extra page (below)
#define META_MAJOR_MAX 10                   // above: elrange metadata (not supported)
// SECS.SIZE is bounded by the 47-bit user address space, not by a smaller "SDK limit": sgx_sign
// checks the laid-out content against 0x1fffffffff and then rounds SIZE up to a power of two, so
// real SDK 2.17 enclaves are 128 GiB (a large EDMM heap reserved, little of it added).
#define ENCLAVE_SIZE_MAX (1ull << 47)
// The work is bounded apart from SIZE, in SHA-256 blocks: at most what a 64 GiB enclave whose
// every page is EEXTENDed costs (EADD 1 block, EEXTEND 16 x (1 + 4)). An EADD-only heap page
// costs one block, so 128 GiB of SDK heap fits.
#define PAGE_BLOCKS_EADD 1ull
#define PAGE_BLOCKS_EXTENDED (1ull + 16 * 5)
#define WORK_PAGES_MAX ((64ull << 30) / GT_SGX_PAGE_BYTES)
#define WORK_BLOCKS_MAX (WORK_PAGES_MAX * PAGE_BLOCKS_EXTENDED)
#define GROUP_DEPTH_MAX 4

typedef struct {
    uint32_t type, flags;
    uint64_t offset, vaddr, filesz, memsz, align;
} phdr;

typedef struct {
    uint64_t e_phoff, e_shoff;
    uint16_t e_phnum, e_shnum, e_shstrndx, e_phentsize, e_shentsize;
} ehdr;

static gt_err read_ehdr(const uint8_t *elf, size_t len, ehdr *h)
{
    gt_reader r = gt_reader_init(elf, len);
    uint8_t ident[16] = {0};
    uint16_t type = 0, machine = 0, ehsize = 0;
    uint32_t version = 0, flags = 0;
    uint64_t entry = 0;
    GT_TRY(gt_reader_bytes(&r, ident, sizeof ident));
    GT_ENSURE(memcmp(ident, "\x7f" "ELF", 4) == 0, GT_E_FORMAT, "elf: no ELF magic");
    GT_ENSURE(ident[4] == 2 && ident[5] == 1, GT_E_UNSUPPORTED,
              "elf: not a 64-bit little-endian ELF (SGX SDK enclaves for x86-64 are)");
    GT_TRY(gt_reader_u16le(&r, &type));
    GT_TRY(gt_reader_u16le(&r, &machine));
    GT_TRY(gt_reader_u32le(&r, &version));
    GT_TRY(gt_reader_u64le(&r, &entry));
    GT_TRY(gt_reader_u64le(&r, &h->e_phoff));
    GT_TRY(gt_reader_u64le(&r, &h->e_shoff));
    GT_TRY(gt_reader_u32le(&r, &flags));
    GT_TRY(gt_reader_u16le(&r, &ehsize));
    GT_TRY(gt_reader_u16le(&r, &h->e_phentsize));
    GT_TRY(gt_reader_u16le(&r, &h->e_phnum));
    GT_TRY(gt_reader_u16le(&r, &h->e_shentsize));
    GT_TRY(gt_reader_u16le(&r, &h->e_shnum));
    GT_TRY(gt_reader_u16le(&r, &h->e_shstrndx));
    GT_ENSURE(type == ET_DYN && machine == EM_X86_64, GT_E_UNSUPPORTED,
              "elf: type %u machine %u (an SGX SDK enclave is an x86-64 shared object)", type,
              machine);
    GT_ENSURE(h->e_phentsize == PHDR_BYTES, GT_E_FORMAT, "elf: program header size %u",
              h->e_phentsize);
    return GT_OK;
}

// A reader over file bytes [off, off + n): GT_E_FORMAT if that range is not in the file.
static gt_err file_range(const uint8_t *elf, size_t len, uint64_t off, uint64_t n,
                         const char *what, gt_reader *out)
{
    GT_ENSURE(off <= len && n <= len - off, GT_E_FORMAT,
              "elf: %s [0x%llx, +0x%llx) lies outside the %zu-byte file", what,
              (unsigned long long)off, (unsigned long long)n, len);
    *out = gt_reader_init(elf + off, (size_t)n);
    return GT_OK;
}

static gt_err read_phdr(const uint8_t *elf, size_t len, const ehdr *h, unsigned i, phdr *p)
{
    gt_reader r;
    GT_TRY(file_range(elf, len, h->e_phoff + (uint64_t)i * PHDR_BYTES, PHDR_BYTES,
                      "program header", &r));
    uint64_t paddr = 0;
    GT_TRY(gt_reader_u32le(&r, &p->type));
    GT_TRY(gt_reader_u32le(&r, &p->flags));
    GT_TRY(gt_reader_u64le(&r, &p->offset));
    GT_TRY(gt_reader_u64le(&r, &p->vaddr));
    GT_TRY(gt_reader_u64le(&r, &paddr));
    GT_TRY(gt_reader_u64le(&r, &p->filesz));
    GT_TRY(gt_reader_u64le(&r, &p->memsz));
    return gt_reader_u64le(&r, &p->align);
}

// A section's file offset and size, by name through .shstrtab. GT_E_NOTFOUND when absent.
static gt_err find_section(const uint8_t *elf, size_t len, const ehdr *h, const char *want,
                           uint64_t *off, uint64_t *size)
{
    GT_ENSURE(h->e_shnum > 0 && h->e_shentsize == SHDR_BYTES && h->e_shstrndx < h->e_shnum,
              GT_E_NOTFOUND, "elf: no section headers, so no %s section", want);
    size_t want_len = strlen(want) + 1;  // with its NUL
    uint64_t str_off = 0, str_size = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < h->e_shnum; i++) {
            if (pass == 0 && i != h->e_shstrndx) {
                continue;
            }
            gt_reader r;
            GT_TRY(file_range(elf, len, h->e_shoff + (uint64_t)i * SHDR_BYTES, SHDR_BYTES,
                              "section header", &r));
            uint32_t name = 0, type = 0;
            uint64_t flags = 0, addr = 0, s_off = 0, s_size = 0;
            GT_TRY(gt_reader_u32le(&r, &name));
            GT_TRY(gt_reader_u32le(&r, &type));
            GT_TRY(gt_reader_u64le(&r, &flags));
            GT_TRY(gt_reader_u64le(&r, &addr));
            GT_TRY(gt_reader_u64le(&r, &s_off));
            GT_TRY(gt_reader_u64le(&r, &s_size));
            if (pass == 0) {
                str_off = s_off;
                str_size = s_size;
                break;
            }
            gt_reader names;
            GT_TRY(file_range(elf, len, str_off, str_size, "section name table", &names));
            gt_span n = {0};
            if (gt_is_ok(gt_reader_skip(&names, name)) &&
                gt_is_ok(gt_reader_span(&names, want_len, &n)) &&
                memcmp(n.data, want, want_len) == 0) {
                *off = s_off;
                *size = s_size;
                return GT_OK;
            }
        }
    }
    return gt_errf(GT_E_NOTFOUND, "elf: no %s section", want);
}

static gt_err parse_one(gt_reader *r, size_t file_off, gt_sgx_meta *m)
{
    uint64_t magic = 0;
    size_t start = r->pos;
    GT_TRY(gt_reader_u64le(r, &magic));
    GT_ENSURE(magic == GT_SGX_META_MAGIC, GT_E_FORMAT,
              "sgx metadata: magic 0x%016llx (expected 0x86a80294635d0e4c)",
              (unsigned long long)magic);
    GT_TRY(gt_reader_u64le(r, &m->version));
    GT_TRY(gt_reader_u32le(r, &m->size));
    GT_TRY(gt_reader_u32le(r, &m->tcs_policy));
    GT_TRY(gt_reader_u32le(r, &m->ssa_frame_size));
    GT_TRY(gt_reader_u32le(r, &m->max_save_buffer_size));
    GT_TRY(gt_reader_u32le(r, &m->desired_misc_select));
    GT_TRY(gt_reader_u32le(r, &m->tcs_min_pool));
    GT_TRY(gt_reader_u64le(r, &m->enclave_size));
    GT_TRY(gt_reader_u64le(r, &m->attributes.flags));
    GT_TRY(gt_reader_u64le(r, &m->attributes.xfrm));
    GT_TRY(gt_reader_skip(r, GT_SGX_SIGSTRUCT_BYTES));
    GT_TRY(gt_reader_u32le(r, &m->patch_offset));
    GT_TRY(gt_reader_u32le(r, &m->patch_size));
    GT_TRY(gt_reader_u32le(r, &m->layout_offset));
    GT_TRY(gt_reader_u32le(r, &m->layout_size));
    GT_ENSURE(m->size >= META_HEADER_BYTES && m->size <= r->len - start, GT_E_FORMAT,
              "sgx metadata: size %u does not fit the note", m->size);
    m->metadata_offset = file_off + start;
    m->sigstruct_offset = m->metadata_offset + META_CSS_OFFSET;
    GT_ENSURE(m->patch_size % PATCH_BYTES == 0 && m->layout_size % LAYOUT_BYTES == 0,
              GT_E_FORMAT, "sgx metadata: patch table %u / layout table %u bytes are not whole "
              "entries", m->patch_size, m->layout_size);
    GT_ENSURE(m->patch_offset <= m->size && m->patch_size <= m->size - m->patch_offset &&
                  m->layout_offset <= m->size && m->layout_size <= m->size - m->layout_offset,
              GT_E_FORMAT, "sgx metadata: a table lies outside the %u-byte metadata", m->size);
    m->patch_count = m->patch_size / PATCH_BYTES;
    m->layout_count = m->layout_size / LAYOUT_BYTES;
    return GT_OK;
}

gt_err gt_sgx_meta_parse(const uint8_t *elf, size_t len, gt_sgx_meta *out)
{
    memset(out, 0, sizeof *out);
    GT_ENSURE(len <= GT_SGX_IMAGE_MAX_BYTES, GT_E_LIMIT, "elf: %zu bytes is too large", len);
    ehdr h;
    GT_TRY(read_ehdr(elf, len, &h));
    uint64_t note_off = 0, note_size = 0;
    gt_err found = find_section(elf, len, &h, ".note.sgxmeta", &note_off, &note_size);
    GT_ENSURE(found.code != GT_E_NOTFOUND, GT_E_NOTFOUND, "elf: no .note.sgxmeta section (not an "
              "SGX SDK enclave, or not signed yet?)");
    GT_TRY(found);
    gt_reader note;
    GT_TRY(file_range(elf, len, note_off, note_size, ".note.sgxmeta", &note));
    uint32_t namesz = 0, descsz = 0, type = 0;
    GT_TRY(gt_reader_u32le(&note, &namesz));
    GT_TRY(gt_reader_u32le(&note, &descsz));
    GT_TRY(gt_reader_u32le(&note, &type));
    static const char name[] = "sgx_metadata";
    gt_span n = {0};
    GT_TRY(gt_reader_span(&note, namesz, &n));
    GT_ENSURE(namesz == sizeof name && memcmp(n.data, name, sizeof name) == 0, GT_E_FORMAT,
              "sgx metadata: the note is not named \"sgx_metadata\"");
    // The SDK puts the descriptor right after the name, unpadded (elfparser get_meta_property).
    gt_reader desc;
    GT_TRY(gt_reader_sub(&note, descsz, &desc));
    size_t desc_file_off = (size_t)note_off + 12 + namesz;
    // Several metadata_t may follow each other (one per version, newest first): take the first
    // of a version without elrange.
    gt_err last = gt_errf(GT_E_FORMAT, "sgx metadata: none found");
    while (gt_reader_left(&desc) >= META_HEADER_BYTES) {
        gt_reader one = gt_reader_init(desc.data + desc.pos, gt_reader_left(&desc));
        gt_sgx_meta m;
        memset(&m, 0, sizeof m);
        last = parse_one(&one, desc_file_off + desc.pos, &m);
        if (!gt_is_ok(last)) {
            break;
        }
        if ((m.version >> 32) <= META_MAJOR_MAX) {
            *out = m;
            return GT_OK;
        }
        last = gt_errf(GT_E_UNSUPPORTED, "sgx metadata: version %llu.%llu (elrange) is not "
                       "supported", (unsigned long long)(m.version >> 32),
                       (unsigned long long)(m.version & 0xffffffff));
        GT_TRY(gt_reader_skip(&desc, m.size));
    }
    return last;
}

// ---- measuring ------------------------------------------------------------------------------

typedef struct {
    gt_sgx_measurer *mz;
    gt_sgx_measurement *m;
    const uint8_t *image;   // the patched copy of the file
    size_t image_len;
    const uint8_t *meta;    // metadata_t bytes
    size_t meta_len;
    uint64_t pages_left;    // no more pages than the enclave can hold
    uint64_t blocks_left;   // a bound on work (WORK_BLOCKS_MAX)
    uint64_t visits_left;   // and no more layout entries laid out than it has pages (+ slack)
} builder;

static gt_err add_pages(builder *b, uint64_t rva, uint64_t count, uint64_t flags,
                        const uint8_t *page, uint32_t attr)
{
    GT_ENSURE(rva % GT_SGX_PAGE_BYTES == 0, GT_E_FORMAT,
              "sgx metadata: a page at 0x%llx is not page aligned", (unsigned long long)rva);
    GT_ENSURE(count <= b->pages_left, GT_E_LIMIT,
              "sgx metadata: more pages than an enclave of 0x%llx bytes holds",
              (unsigned long long)b->m->size);
    b->pages_left -= count;
    uint64_t per_page = (attr & PAGE_ATTR_EEXTEND) != 0 ? PAGE_BLOCKS_EXTENDED : PAGE_BLOCKS_EADD;
    GT_ENSURE(count <= b->blocks_left / per_page, GT_E_LIMIT,
              "sgx metadata: measuring it would hash more than %llu blocks (64 GiB of"
              " measured pages), the most this measurer does",
              (unsigned long long)WORK_BLOCKS_MAX);
    b->blocks_left -= count * per_page;
    for (uint64_t i = 0; i < count; i++) {
        GT_TRY(gt_sgx_measurer_page(b->mz, rva + i * GT_SGX_PAGE_BYTES, flags, page,
                                    (attr & PAGE_ATTR_EEXTEND) != 0));
    }
    return GT_OK;
}

#define PAGE_OFF(x) ((x) & (GT_SGX_PAGE_BYTES - 1))
#define TRIM(x) ((x) & ~(uint64_t)(GT_SGX_PAGE_BYTES - 1))
#define ROUND(x) TRIM((x) + GT_SGX_PAGE_BYTES - 1)

// The loader's build_mem_region: initialised bytes page by page (partial pages zero padded),
// then the rest of the virtual size as zero pages; all added and extended.
static gt_err mem_region(builder *b, gt_reader raw, uint64_t rva, uint64_t vsize, uint64_t flags)
{
    uint64_t offset = 0, raw_size = raw.len;
    while (offset < raw_size) {
        uint64_t at = rva + offset, in_page = PAGE_OFF(at);
        uint64_t n = GT_SGX_PAGE_BYTES - in_page;
        n = n < raw_size - offset ? n : raw_size - offset;
        uint8_t page[GT_SGX_PAGE_BYTES] = {0};
        GT_TRY(gt_reader_bytes(&raw, page + in_page, (size_t)n));
        GT_TRY(add_pages(b, TRIM(at), 1, flags, page, PAGE_ATTR_EADD | PAGE_ATTR_EEXTEND));
        offset += GT_SGX_PAGE_BYTES - in_page;
    }
    if (vsize > offset) {
        uint64_t at = rva + offset;
        uint64_t size = ROUND(vsize - offset + PAGE_OFF(at));
        GT_TRY(add_pages(b, TRIM(at), size / GT_SGX_PAGE_BYTES, flags, NULL,
                         PAGE_ATTR_EADD | PAGE_ATTR_EEXTEND));
    }
    return GT_OK;
}

static uint64_t si_flags(uint32_t p_flags)
{
    return GT_SGX_SECINFO_REG | ((p_flags & PF_R) ? GT_SGX_SECINFO_R : 0) |
           ((p_flags & PF_W) ? GT_SGX_SECINFO_W : 0) | ((p_flags & PF_X) ? GT_SGX_SECINFO_X : 0);
}

// SDK 1.5 (metadata 1.3) sized the last segment as rva + ROUND(vsize) and added the page that
// difference leaves, so its enclaves were measured with it.
static bool extra_page(const phdr *last)
{
    return ROUND(last->vaddr + last->memsz) < ROUND(ROUND(last->memsz) + last->vaddr);
}

static gt_err segments(builder *b, const ehdr *h, const gt_sgx_meta *meta)
{
    bool v13 = meta->version == META_VERSION_1_3;
    bool have_last = false;
    phdr last = {0};
    uint64_t max_rva = 0;
    for (unsigned i = 0; i < h->e_phnum; i++) {
        phdr p;
        GT_TRY(read_phdr(b->image, b->image_len, h, i, &p));
        if (p.type == PT_DYNAMIC) {
            gt_reader dyn;
            GT_TRY(file_range(b->image, b->image_len, p.offset, p.filesz, "PT_DYNAMIC", &dyn));
            while (gt_reader_left(&dyn) >= 16) {
                uint64_t tag = 0, val = 0;
                GT_TRY(gt_reader_u64le(&dyn, &tag));
                GT_TRY(gt_reader_u64le(&dyn, &val));
                if (tag == DT_NULL) {
                    break;
                }
                GT_ENSURE(tag != DT_TEXTREL, GT_E_UNSUPPORTED, "elf: the enclave has text "
                          "relocations (DT_TEXTREL), whose pages the SDK measures writable; "
                          "not supported");
            }
        }
        if (p.type != PT_LOAD) {
            continue;
        }
        GT_ENSURE(p.flags & (PF_R | PF_W | PF_X), GT_E_FORMAT,
                  "elf: PT_LOAD segment %u has no R/W/X permission", i);
        GT_ENSURE(p.filesz <= p.memsz, GT_E_FORMAT, "elf: PT_LOAD segment %u: file size above "
                  "memory size", i);
        GT_ENSURE(p.vaddr < b->m->size && p.memsz <= b->m->size - p.vaddr, GT_E_FORMAT,
                  "elf: PT_LOAD segment %u lies outside the 0x%llx-byte enclave", i,
                  (unsigned long long)b->m->size);
        if (v13 && have_last && extra_page(&last) &&
            ROUND(last.vaddr + last.memsz) < TRIM(p.vaddr)) {
            GT_TRY(add_pages(b, ROUND(last.vaddr + last.memsz), 1, si_flags(last.flags), NULL,
                             PAGE_ATTR_EADD | PAGE_ATTR_EEXTEND));
        }
        // As the loader: the "last" segment is the one of highest address seen, strictly above
        // the ones before (a first segment at address 0 does not count).
        if (p.vaddr > max_rva) {
            max_rva = p.vaddr;
            last = p;
            have_last = true;
        }
        gt_reader raw;
        GT_TRY(file_range(b->image, b->image_len, p.offset, p.filesz, "PT_LOAD", &raw));
        GT_TRY(mem_region(b, raw, p.vaddr, p.memsz, si_flags(p.flags)));
    }
    if (v13 && have_last && extra_page(&last)) {
        GT_TRY(add_pages(b, ROUND(last.vaddr + last.memsz), 1, si_flags(last.flags), NULL,
                         PAGE_ATTR_EADD | PAGE_ATTR_EEXTEND));
    }
    return GT_OK;
}

typedef struct {
    uint16_t id, attributes;
    uint32_t page_count;      // group: entry_count in the low half of the first u32 below
    uint64_t rva;
    uint32_t content_size, content_offset;
    uint64_t si_flags;
    // group view
    uint16_t entry_count;
    uint32_t load_times;
    uint64_t load_step;
} layout;

static gt_err read_layout(const builder *b, const gt_sgx_meta *meta, uint32_t i, layout *l)
{
    gt_reader r = gt_reader_init(b->meta, b->meta_len);
    GT_TRY(gt_reader_skip(&r, meta->layout_offset + (size_t)i * LAYOUT_BYTES));
    gt_reader e;
    GT_TRY(gt_reader_sub(&r, LAYOUT_BYTES, &e));
    gt_reader g = e;
    GT_TRY(gt_reader_u16le(&e, &l->id));
    GT_TRY(gt_reader_u16le(&e, &l->attributes));
    GT_TRY(gt_reader_u32le(&e, &l->page_count));
    GT_TRY(gt_reader_u64le(&e, &l->rva));
    GT_TRY(gt_reader_u32le(&e, &l->content_size));
    GT_TRY(gt_reader_u32le(&e, &l->content_offset));
    GT_TRY(gt_reader_u64le(&e, &l->si_flags));
    // layout_group_t: id u16, entry_count u16, load_times u32, load_step u64, reserved 16
    GT_TRY(gt_reader_skip(&g, 2));
    GT_TRY(gt_reader_u16le(&g, &l->entry_count));
    GT_TRY(gt_reader_u32le(&g, &l->load_times));
    return gt_reader_u64le(&g, &l->load_step);
}

// The loader's build_context for one entry at delta.
static gt_err context(builder *b, const layout *l, uint64_t delta)
{
    // Each entry laid out covers at least a page of the enclave, so a real layout table never
    // runs out; a hostile one (huge load_times over guard entries) stops here.
    GT_ENSURE(b->visits_left > 0, GT_E_LIMIT,
              "sgx metadata: the layout table lays out more entries than the enclave has pages");
    b->visits_left--;
    if (!(l->attributes & PAGE_ATTR_EADD)) {
        return GT_OK;  // guard pages, and pages added after EINIT (EDMM)
    }
    uint64_t rva = delta + l->rva;
    if (l->content_offset != 0) {
        gt_reader r = gt_reader_init(b->meta, b->meta_len), content;
        GT_TRY(gt_reader_skip(&r, l->content_offset));
        GT_TRY(gt_reader_sub(&r, l->content_size, &content));
        if (l->si_flags == SI_FLAGS_TCS) {
            GT_ENSURE(l->content_size <= GT_SGX_PAGE_BYTES && l->content_size >= 64,
                      GT_E_FORMAT, "sgx metadata: TCS template of %u bytes", l->content_size);
            uint8_t tcs[GT_SGX_PAGE_BYTES] = {0};
            GT_TRY(gt_reader_bytes(&content, tcs, l->content_size));
            // The TCS's offsets are relative to the TCS page; the loader makes them enclave
            // offsets.
            const size_t fields[] = {TCS_OSSA, TCS_OFS_BASE, TCS_OGS_BASE};
            for (size_t f = 0; f < 3; f++) {
                gt_reader t = gt_reader_init(tcs + fields[f], 8);
                uint64_t v = 0;
                GT_TRY(gt_reader_u64le(&t, &v));
                gt_store_u64le(tcs + fields[f], v + rva);
            }
            return add_pages(b, rva, l->page_count, l->si_flags, tcs, l->attributes);
        }
        return mem_region(b, content, rva, (uint64_t)l->page_count * GT_SGX_PAGE_BYTES,
                          l->si_flags);
    }
    if (l->si_flags == 0) {
        return GT_OK;
    }
    uint8_t page[GT_SGX_PAGE_BYTES];
    if (l->content_size != 0) {  // a page filled with this u32 (stacks: 0xcccccccc)
        for (size_t i = 0; i < sizeof page; i += 4) {
            gt_store_u32le(page + i, l->content_size);
        }
    }
    return add_pages(b, rva, l->page_count, l->si_flags, l->content_size ? page : NULL,
                     l->attributes);
}

// The loader's build_contexts over entries [start, end): a group entry repeats the entry_count
// entries before it load_times times, each time load_step further (not added to delta, as the
// loader does).
static gt_err contexts(builder *b, const gt_sgx_meta *meta, uint32_t start, uint32_t end,
                       uint64_t delta, int depth)
{
    GT_ENSURE(depth <= GROUP_DEPTH_MAX, GT_E_LIMIT, "sgx metadata: layout groups nest too deep");
    for (uint32_t i = start; i < end; i++) {
        layout l;
        GT_TRY(read_layout(b, meta, i, &l));
        if (!(l.id & GROUP_FLAG)) {
            GT_TRY(context(b, &l, delta));
            continue;
        }
        GT_ENSURE(l.entry_count <= i, GT_E_FORMAT, "sgx metadata: layout group %u repeats %u "
                  "entries but only %u come before it", i, l.entry_count, i);
        uint64_t step = 0;
        for (uint32_t j = 0; j < l.load_times; j++) {
            // A repetition counts as an entry laid out: an empty or nested group cannot spin.
            GT_ENSURE(b->visits_left > 0, GT_E_LIMIT, "sgx metadata: the layout table lays out "
                      "more entries than the enclave has pages");
            b->visits_left--;
            step += l.load_step;
            GT_TRY(contexts(b, meta, i - l.entry_count, i, step, depth + 1));
        }
    }
    return GT_OK;
}

static gt_err apply_patches(uint8_t *image, size_t len, const gt_sgx_meta *meta,
                            const uint8_t *md, size_t md_len)
{
    gt_reader r = gt_reader_init(md, md_len);
    GT_TRY(gt_reader_skip(&r, meta->patch_offset));
    for (uint32_t i = 0; i < meta->patch_count; i++) {
        uint64_t dst = 0;
        uint32_t src = 0, size = 0;
        GT_TRY(gt_reader_u64le(&r, &dst));
        GT_TRY(gt_reader_u32le(&r, &src));
        GT_TRY(gt_reader_u32le(&r, &size));
        GT_TRY(gt_reader_skip(&r, 16));
        GT_ENSURE(dst <= len && size <= len - dst, GT_E_FORMAT,
                  "sgx metadata: patch %u writes outside the file", i);
        gt_reader s = gt_reader_init(md, md_len);
        GT_TRY(gt_reader_skip(&s, src));
        GT_TRY(gt_reader_bytes(&s, image + dst, size));
    }
    return GT_OK;
}

gt_err gt_sgx_measure_signed_so(const uint8_t *elf, size_t len, gt_sgx_measurement *out,
                                gt_sgx_meta *meta_out)
{
    memset(out, 0, sizeof *out);
    gt_sgx_meta meta;
    GT_TRY(gt_sgx_meta_parse(elf, len, &meta));
    if (meta_out != NULL) {
        *meta_out = meta;
    }
    GT_ENSURE(meta.enclave_size <= ENCLAVE_SIZE_MAX, GT_E_LIMIT,
              "sgx metadata: enclave size 0x%llx is above the 47-bit address space",
              (unsigned long long)meta.enclave_size);
    ehdr h;
    GT_TRY(read_ehdr(elf, len, &h));
    // The metadata is read from the original bytes; the image measured is a patched copy.
    uint8_t *md = malloc(meta.size);
    uint8_t *image = malloc(len);
    gt_err err = GT_OK;
    gt_sgx_measurer *mz = NULL;
    GT_ENSURE_GOTO(err, md != NULL && image != NULL, out_free, GT_E_NOMEM,
                   "sgx metadata: out of memory");
    gt_reader r = gt_reader_init(elf, len);
    GT_TRY_GOTO(err, gt_reader_skip(&r, meta.metadata_offset), out_free);
    GT_TRY_GOTO(err, gt_reader_bytes(&r, md, meta.size), out_free);
    memcpy(image, elf, len);
    GT_TRY_GOTO(err, apply_patches(image, len, &meta, md, meta.size), out_free);
    GT_TRY_GOTO(err, gt_sgx_measurer_new(&mz, out, meta.ssa_frame_size, meta.enclave_size),
                out_free);
    uint64_t pages = meta.enclave_size / GT_SGX_PAGE_BYTES;
    builder b = {.mz = mz, .m = out, .image = image, .image_len = len, .meta = md,
                 .meta_len = meta.size, .pages_left = pages, .blocks_left = WORK_BLOCKS_MAX,
                 .visits_left = (pages < WORK_PAGES_MAX ? pages : WORK_PAGES_MAX) + 4096};
    GT_TRY_GOTO(err, segments(&b, &h, &meta), out_free);
    GT_TRY_GOTO(err, contexts(&b, &meta, 0, meta.layout_count, 0, 0), out_free);
    for (unsigned i = 0; i < h.e_phnum; i++) {
        phdr p;
        GT_TRY_GOTO(err, read_phdr(elf, len, &h, i, &p), out_free);
        meta.load_segments += p.type == PT_LOAD;
    }
    if (meta_out != NULL) {
        *meta_out = meta;
    }
    err = gt_sgx_measurer_finish(mz);
    mz = NULL;
out_free:
    gt_sgx_measurer_free(mz);
    free(image);
    free(md);
    if (!gt_is_ok(err)) {
        memset(out, 0, sizeof *out);
    }
    return err;
}

// ---- Open Enclave ---------------------------------------------------------------------------

// Open Enclave keeps oe_sgx_enclave_properties_t in section .oeinfo: it opens with its own size
// (u32) and ends with the SIGSTRUCT, followed in releases since 2019 by an 8-byte end marker.
// Which of the two layouts a file has is told by the SIGSTRUCT's constant header bytes.
gt_err gt_sgx_oeinfo_sigstruct(const uint8_t *elf, size_t len, size_t *offset)
{
    static const uint8_t header[12] = {0x06, 0, 0, 0, 0xe1, 0, 0, 0, 0, 0, 0x01, 0};
    static const uint8_t header2[16] = {0x01, 0x01, 0, 0, 0x60, 0, 0, 0, 0x60, 0, 0, 0,
                                        0x01, 0, 0, 0};
    ehdr h;
    GT_TRY(read_ehdr(elf, len, &h));
    uint64_t sec_off = 0, sec_size = 0;
    GT_TRY(find_section(elf, len, &h, ".oeinfo", &sec_off, &sec_size));
    gt_reader r;
    GT_TRY(file_range(elf, len, sec_off, sec_size, ".oeinfo", &r));
    uint32_t size = 0;
    GT_TRY(gt_reader_u32le(&r, &size));
    GT_ENSURE(size <= sec_size && size >= 32 + GT_SGX_SIGSTRUCT_BYTES, GT_E_FORMAT,
              "oeinfo: enclave properties of %u bytes in a %llu-byte section", size,
              (unsigned long long)sec_size);
    const uint32_t tails[2] = {GT_SGX_SIGSTRUCT_BYTES + 8, GT_SGX_SIGSTRUCT_BYTES};
    for (int i = 0; i < 2; i++) {
        gt_reader c;
        GT_TRY(file_range(elf, len, sec_off + size - tails[i], GT_SGX_SIGSTRUCT_BYTES,
                          ".oeinfo SIGSTRUCT", &c));
        gt_span hd = {0}, hd2 = {0};
        GT_TRY(gt_reader_span(&c, sizeof header, &hd));
        GT_TRY(gt_reader_skip(&c, 12));
        GT_TRY(gt_reader_span(&c, sizeof header2, &hd2));
        if (memcmp(hd.data, header, sizeof header) == 0 &&
            memcmp(hd2.data, header2, sizeof header2) == 0) {
            *offset = (size_t)(sec_off + size - tails[i]);
            return GT_OK;
        }
    }
    return gt_errf(GT_E_NOTFOUND, "oeinfo: no SIGSTRUCT in the enclave properties (not signed "
                   "yet? oesign writes it)");
}
