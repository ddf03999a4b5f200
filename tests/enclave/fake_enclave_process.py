#!/usr/bin/env python3
# An impostor enclave process for tests/enclave/test_enclave_run.c: it speaks the start/hello
# protocol (src/enclave/session.c) correctly but does not hold the platform root's report key
# for the host, so its REPORT's MAC is made up. Everything else in its hello is right: the
# MRENCLAVE of the SIGSTRUCT it was sent and a REPORTDATA binding the session keys.
import hashlib
import os
import struct
import sys

fd = int(sys.argv[1])


def read_exact(n):
    out = b""
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            sys.exit(1)
        out += chunk
    return out


(length,) = struct.unpack("<I", read_exact(4))
start = read_exact(length)
host_pub, nonce = start[75:107], start[107:139]
sigstruct = start[139:139 + 1808]
mrenclave = sigstruct[960:992]
mrsigner = hashlib.sha256(sigstruct[128:512]).digest()
isvprodid, isvsvn = struct.unpack("<HH", sigstruct[1024:1028])
enclave_pub = os.urandom(32)
reportdata = hashlib.sha256(b"gputravel enclave session v1\0" + nonce + host_pub +
                            enclave_pub).digest() + bytes(32)
report = bytearray(432)
report[64:96] = mrenclave
report[128:160] = mrsigner
report[256:260] = struct.pack("<HH", isvprodid, isvsvn)
report[320:384] = reportdata
report[416:432] = os.urandom(16)  # the MAC it cannot compute
identity = mrenclave + mrsigner + struct.pack("<HHQQIB", isvprodid, isvsvn, 5, 3, 0, 0)
hello = b"GTENCHL1" + b"\x01" + identity + enclave_pub + bytes(report)
os.write(fd, struct.pack("<I", len(hello)) + hello)
os.read(fd, 1)
