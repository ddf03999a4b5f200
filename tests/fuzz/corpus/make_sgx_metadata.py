#!/usr/bin/env python3
# Writes the synthetic corpus files: sgx_metadata/synthetic_v23.so, synthetic_v13.so and
# synthetic_v23_128g.so (SECS.SIZE 128 GiB), small
# ELF64 SDK enclaves whose .note.sgxmeta metadata_t has a patch, heap, guard, stack, TCS, SSA, a
# thread group and an initial-content entry (the layout tests/enclave/test_measure.c builds), and
# sigstruct/oe_signed.elf, an Open Enclave-style signed ELF.
# Rerun to regenerate: python3 tests/fuzz/corpus/make_sgx_metadata.py
import os, struct

NOTE, META_SIZE, PATCH, LAYOUT = 0x3000, 2400, 1888, 1888 + 32
TCS, CONTENT, PSRC, SIZE = 2200, 2300, 2290, 0x40c0

def elf(version, enclave_size=0x100000):
    f = bytearray((i * 7 + 1) & 0xff for i in range(0x2400)) + bytearray(SIZE - 0x2400)
    f[0:0x100] = bytes(0x100)
    f[0:7] = b'\x7fELF\x02\x01\x01'
    struct.pack_into('<HHIQQQIHHHHHH', f, 16, 3, 62, 1, 0, 64, 0x4000, 0, 64, 56, 2, 64, 3, 2)
    struct.pack_into('<IIQQQQQQ', f, 64, 1, 5, 0, 0, 0, 0x1800, 0x1800, 0x1000)
    struct.pack_into('<IIQQQQQQ', f, 120, 1, 6, 0x2100, 0x3100, 0, 0x300, 0x1200, 0x1000)
    struct.pack_into('<III', f, NOTE, 13, META_SIZE, 1)
    f[NOTE + 12:NOTE + 25] = b'sgx_metadata\0'
    m = NOTE + 25
    struct.pack_into('<QQI', f, m, 0x86A80294635D0E4C, version, META_SIZE)
    struct.pack_into('<I', f, m + 24, 1)
    struct.pack_into('<Q', f, m + 40, enclave_size)
    struct.pack_into('<IIII', f, m + 1872, PATCH, 32, LAYOUT, 32 * 7)
    struct.pack_into('<QII', f, m + PATCH, 0x1010, PSRC, 8)
    f[m + PSRC:m + PSRC + 8] = b'\x5a' * 8
    struct.pack_into('<QQQQQ', f, m + TCS + 16, 0x1000, 0, 0x777, 0, 0x2000)
    struct.pack_into('<Q', f, m + TCS + 56, 0x3000)
    f[m + CONTENT:m + CONTENT + 100] = bytes((0xa0 + i) & 0xff for i in range(100))
    def entry(i, id_, attr, pages, rva, csize, coff, si):
        struct.pack_into('<HHIQIIQ', f, m + LAYOUT + 32 * i, id_, attr, pages, rva, csize, coff, si)
    entry(0, 1, 1, 2, 0x10000, 0, 0, 0x203)
    entry(1, 10, 0, 1, 0x12000, 0, 0, 0)
    entry(2, 8, 3, 2, 0x13000, 0xcccccccc, 0, 0x203)
    entry(3, 4, 3, 1, 0x15000, 72, TCS, 0x100)
    entry(4, 6, 3, 1, 0x16000, 0, 0, 0x203)
    struct.pack_into('<HHIQ', f, m + LAYOUT + 32 * 5, 0x1009, 3, 2, 0x10000)
    entry(6, 20, 3, 1, 0x40000, 100, CONTENT, 0x201)
    names = b'\0.note.sgxmeta\0.shstrtab\0'
    f[0x3f00:0x3f00 + len(names)] = names
    struct.pack_into('<IIQQQQ', f, 0x4000 + 64, 1, 7, 0, 0, NOTE, 12 + 13 + META_SIZE)
    struct.pack_into('<IIQQQQ', f, 0x4000 + 128, 15, 3, 0, 0, 0x3f00, len(names) - 1)
    return bytes(f)

here = os.path.dirname(os.path.abspath(__file__))
for name, v in (('synthetic_v23.so', (2 << 32) | 3), ('synthetic_v13.so', (1 << 32) | 3)):
    open(os.path.join(here, 'sgx_metadata', name), 'wb').write(elf(v))
# synthetic_v23_128g.so: the same in a 128 GiB enclave, as SDK 2.17 signs large-heap enclaves
open(os.path.join(here, 'sgx_metadata', 'synthetic_v23_128g.so'), 'wb').write(
    elf((2 << 32) | 3, 128 << 30))

# sigstruct/oe_signed.elf: an Open Enclave-style signed ELF, the SIGSTRUCT (enarx_encl.ss) at the
# end of a 1960-byte oe_sgx_enclave_properties_t in .oeinfo, before its 8-byte end marker.
def oe_elf(css, props_size=1960):
    f = bytearray(0x1000 + 3 * 64)
    f[0:7] = b'\x7fELF\x02\x01\x01'
    struct.pack_into('<HHIQQQIHHHHHH', f, 16, 3, 62, 1, 0, 64, 0x1000, 0, 64, 56, 0, 64, 3, 2)
    struct.pack_into('<II', f, 0x100, props_size, 2)
    at = 0x100 + props_size - 8 - len(css)
    f[at:at + len(css)] = css
    names = b'\0.oeinfo\0.shstrtab\0'
    f[0xf00:0xf00 + len(names)] = names
    struct.pack_into('<IIQQQQ', f, 0x1000 + 64, 1, 1, 0, 0, 0x100, props_size)
    struct.pack_into('<IIQQQQ', f, 0x1000 + 128, 9, 3, 0, 0, 0xf00, len(names) - 1)
    return bytes(f)

css = open(os.path.join(here, '..', '..', 'testdata', 'sgx-enclave', 'enarx_encl.ss'), 'rb').read()
open(os.path.join(here, 'sigstruct', 'oe_signed.elf'), 'wb').write(oe_elf(css))
