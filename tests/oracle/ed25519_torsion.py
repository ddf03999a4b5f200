#!/usr/bin/env python3
"""The encodings of Ed25519's points of small order, derived from the curve itself.

edwards25519: -x^2 + y^2 = 1 + d x^2 y^2 over p = 2^255 - 19, d = -121665/121666. Its 8-torsion
has eight points: the identity (0, 1), (0, -1) of order 2, (+-sqrt(-1), 0) of order 4, and four of
order 8, whose doubles are the order-4 points. Doubling gives y' = (x^2 + y^2) / (2 + x^2 - y^2),
so y' = 0 means x^2 = -y^2; on the curve that is d y^4 + 2 y^2 - 1 = 0.

Each point's order is counted by adding it to itself with the complete addition law, so nothing
here trusts the derivation. Printed, one per line: ORDER HEX (RFC 8032's encoding: y little-endian,
the sign of x in the top bit), then the non-canonical encodings (y + p for y < 19) of the same
points as "nc HEX".

  ed25519_torsion.py                 print them
  ed25519_torsion.py --check FILE    exit 1 unless every one of them appears in FILE (the C test
                                     that must refuse each)
"""
import sys

P = 2**255 - 19
D = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def sqrt(a):
    """A square root mod P (P = 5 mod 8), or None."""
    a %= P
    r = pow(a, (P + 3) // 8, P)
    if (r * r - a) % P:
        r = r * SQRT_M1 % P
    return r if (r * r - a) % P == 0 else None


def on_curve(x, y):
    return (y * y - x * x - 1 - D * x * x * y * y) % P == 0


def add(a, b):
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2 % P
    return ((x1 * y2 + y1 * x2) * pow(1 + t, P - 2, P) % P,
            (y1 * y2 + x1 * x2) * pow(1 - t, P - 2, P) % P)


def order(pt, limit=8):
    acc, n = pt, 1
    while acc != (0, 1):
        acc, n = add(acc, pt), n + 1
        if n > limit:
            return None
    return n


def torsion():
    ys = {0, 1, P - 1}
    root = sqrt(1 + D)
    for sign in (1, -1):
        y = sqrt((-1 + sign * root) * pow(D, P - 2, P))
        if y is not None:
            ys |= {y, P - y}
    points = set()
    for y in ys:
        x = sqrt((y * y - 1) * pow(D * y * y + 1, P - 2, P))
        for xx in {x, (P - x) % P}:
            assert on_curve(xx, y)
            points.add((xx, y))
    return points


def encode(x, y, y_add=0):
    return ((y + y_add) | ((x & 1) << 255)).to_bytes(32, "little").hex()


def main():
    lines = []
    points = torsion()
    for x, y in sorted(points, key=lambda pt: order(pt)):
        n = order((x, y))
        assert n is not None and 8 % n == 0
        lines.append((str(n), encode(x, y)))
        if y + P < 2**255:
            lines.append(("nc", encode(x, y, P)))
    assert len(points) == 8, "the 8-torsion has 8 points"
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        text = open(sys.argv[2]).read().lower()
        missing = [h for _, h in lines if h not in text]
        for h in missing:
            print("not refused by the test:", h)
        print(f"{len(lines) - len(missing)}/{len(lines)} small-order encodings in {sys.argv[2]}")
        return 1 if missing else 0
    for kind, h in lines:
        print(kind, h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
