#!/usr/bin/env python3
"""Generate the real Clebsch-Gordan tables for l <= 3 in e3nn 0.6's `o3.wigner_3j` convention.

Stand-alone (numpy only). Construction (re-implemented from the description of e3nn's method):
  1. complex Condon-Shortley CG <j1 m1 j2 m2 | J M> from Racah's closed formula (exact fractions);
  2. change of basis real -> complex per l (e3nn's convention, including the global factor (-i)^l that
     makes the coupled tensor real): Q[l+m_c, l+m_r];
  3. C_real[a, b, c] = sum Q1[i, a] Q2[k, b] conj(Q3[n, c]) C[i, k, n]; take the real part;
  4. normalise to Frobenius norm 1 per (l1, l2, l3).

Writes (paths are relative to the repository root unless --out-dir is given):
  src/kernels/generated/cg_tables.hpp  constexpr sparse tables + straight-line per-path kernels
  src/kernels/generated/cg_l3.npz      dense arrays "cg_<l1>_<l2>_<l3>" (float64, shape (2l1+1, 2l2+1, 2l3+1))
                                        for all 34 triangle-allowed paths, "paths" (34, 3) int, "natural" (34,) bool
Usage: gen_cg.py [--out-dir DIR] [--check]
"""
import argparse
import itertools
import math
import os
from fractions import Fraction

import numpy as np

LMAX = 3
ZERO_TOL = 1e-12


def cg_complex(j1, m1, j2, m2, J, M):
    """<j1 m1 j2 m2 | J M> (integer j), Racah formula, Condon-Shortley phase."""
    if M != m1 + m2 or abs(m1) > j1 or abs(m2) > j2 or abs(M) > J:
        return 0.0
    if not (abs(j1 - j2) <= J <= j1 + j2):
        return 0.0
    f = math.factorial
    pref = Fraction((2 * J + 1) * f(J + j1 - j2) * f(J - j1 + j2) * f(j1 + j2 - J), f(j1 + j2 + J + 1))
    pref *= f(J + M) * f(J - M) * f(j1 - m1) * f(j1 + m1) * f(j2 - m2) * f(j2 + m2)
    total = Fraction(0)
    for k in range(0, j1 + j2 - J + 1):
        args = (k, j1 + j2 - J - k, j1 - m1 - k, j2 + m2 - k, J - j2 + m1 + k, J - j1 - m2 + k)
        if min(args) < 0:
            continue
        den = 1
        for a in args:
            den *= f(a)
        total += Fraction((-1) ** k, den)
    return float(total) * math.sqrt(float(pref))


def real_to_complex(l):
    """Q with complex = Q @ real; rows: complex m = -l..l, columns: real m = -l..l."""
    q = np.zeros((2 * l + 1, 2 * l + 1), dtype=np.complex128)
    s = 1 / math.sqrt(2)
    for m in range(-l, 0):
        q[l + m, l - m] = s
        q[l + m, l + m] = -1j * s
    q[l, l] = 1
    for m in range(1, l + 1):
        q[l + m, l + m] = (-1) ** m * s
        q[l + m, l - m] = 1j * (-1) ** m * s
    return ((-1j) ** l) * q


def real_cg(l1, l2, l3):
    c = np.zeros((2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1))
    for m1 in range(-l1, l1 + 1):
        for m2 in range(-l2, l2 + 1):
            m3 = m1 + m2
            if abs(m3) <= l3:
                c[l1 + m1, l2 + m2, l3 + m3] = cg_complex(l1, m1, l2, m2, l3, m3)
    q1, q2, q3 = real_to_complex(l1), real_to_complex(l2), real_to_complex(l3)
    cr = np.einsum("ia,kb,nc,ikn->abc", q1, q2, np.conj(q3), c.astype(np.complex128))
    assert np.abs(cr.imag).max() < 1e-10, (l1, l2, l3)
    cr = cr.real
    cr /= np.linalg.norm(cr)
    cr[np.abs(cr) < ZERO_TOL] = 0.0
    return cr


def all_paths():
    return [(a, b, c) for a, b, c in itertools.product(range(LMAX + 1), repeat=3) if abs(a - b) <= c <= a + b]


# ---- self-check with e3nn's spherical harmonics (polar axis y, component normalisation) ----
def sh(v):
    x, y, z = v / np.linalg.norm(v)
    s3, s5, s15 = math.sqrt(3), math.sqrt(5), math.sqrt(15)
    y0 = [1.0]
    y1 = [s3 * x, s3 * y, s3 * z]
    y2 = [s15 * x * z, s15 * x * y, s5 * (y * y - 0.5 * (x * x + z * z)), s15 * y * z, 0.5 * s15 * (z * z - x * x)]
    a, b, r168 = math.sqrt(630) / 12, math.sqrt(105), math.sqrt(168) / 8
    q = 4 * y * y - x * x - z * z
    y3 = [a * x * (3 * z * z - x * x), b * x * y * z, r168 * x * q, 0.5 * math.sqrt(7) * y * (2 * y * y - 3 * (x * x + z * z)),
          r168 * z * q, 0.5 * b * y * (z * z - x * x), a * z * (z * z - 3 * x * x)]
    return [np.array(y0), np.array(y1), np.array(y2), np.array(y3)]


def wigner_from_sh(R, l, pts):
    A = np.stack([sh(p)[l] for p in pts], axis=1)
    B = np.stack([sh(R @ p)[l] for p in pts], axis=1)
    return B @ np.linalg.inv(A)


def self_check(tables):
    rng = np.random.default_rng(7)
    qm, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    R = qm * np.sign(np.linalg.det(qm))
    pts = [rng.normal(size=3) for _ in range(7)]
    D = [wigner_from_sh(R, l, pts[:2 * l + 1]) for l in range(LMAX + 1)]
    for (l1, l2, l3), c in tables.items():
        rot = np.einsum("abc,ia,jb,kc->ijk", c, D[l1], D[l2], D[l3])
        assert np.abs(rot - c).max() < 1e-9, ("not equivariant", l1, l2, l3)
    print("self-check: all paths intertwine the SH-derived Wigner-D matrices")


def fmt(v):
    return repr(float(v))


def same(x, y):
    """Coefficients equal but for the tables' rounding (e.g. 1/sqrt(3) as ...257 and ...258)."""
    return abs(x - y) <= 1e-12 * max(abs(x), abs(y))


def emit_header(tables, path):
    paths = all_paths()
    lines = []
    w = lines.append
    w("// GENERATED by python/tools/gen_cg.py -- do not edit (re-run the generator; CTest diffs this file).")
    w("// Real Clebsch-Gordan coefficients CG[l1,l2,l3][m1][m2][m3] for l <= 3 in e3nn 0.6's o3.wigner_3j")
    w("// convention (Frobenius norm 1 per path, e3nn signs), real SH basis with polar axis y, index m + l.")
    w("// kPaths: all triangle-allowed (l1,l2,l3) in lexicographic order; kEntries: non-zeros of each path,")
    w("// ordered by (i1, i2, i3). Path<l1,l2,l3> holds straight-line device kernels for that path:")
    w("//   fwd(a, b, s, out):  out[i3] += s * sum CG a[i1] b[i2]")
    w("//   adj_a(g, b, s, ga): ga[i1] += s * sum CG g[i3] b[i2]")
    w("//   adj_b(a, g, s, gb): gb[i2] += s * sum CG a[i1] g[i3]")
    w("// a, b, out, g point to the start of the (2l+1)-blocks of their degree.")
    w("#pragma once")
    w("#include <Kokkos_Macros.hpp>")
    w("")
    w("namespace batmobile {")
    w("namespace kernels {")
    w("namespace cg {")
    w("")
    w("struct Entry {")
    w("  int i1, i2, i3;")
    w("  double value;")
    w("};")
    w("struct PathInfo {")
    w("  int l1, l2, l3, offset, count;")
    w("};")
    total = sum(int(np.count_nonzero(tables[p])) for p in paths)
    w(f"inline constexpr int kNumPaths = {len(paths)};")
    w(f"inline constexpr int kNumEntries = {total};")
    w("inline constexpr PathInfo kPaths[kNumPaths] = {")
    off = 0
    for p in paths:
        n = int(np.count_nonzero(tables[p]))
        w(f"    {{{p[0]}, {p[1]}, {p[2]}, {off}, {n}}},")
        off += n
    w("};")
    w("inline constexpr Entry kEntries[kNumEntries] = {")
    for p in paths:
        c = tables[p]
        w(f"    // ({p[0]}, {p[1]}, {p[2]})")
        for i1, i2, i3 in zip(*np.nonzero(c)):
            w(f"    {{{i1}, {i2}, {i3}, {fmt(c[i1, i2, i3])}}},")
    w("};")
    w("")
    w("template <int l1, int l2, int l3>")
    w("struct Path;")
    w("")
    for p in paths:
        c = tables[p]
        nz = list(zip(*np.nonzero(c)))
        w(f"template <>")
        w(f"struct Path<{p[0]}, {p[1]}, {p[2]}> {{")
        w(f"  static constexpr int count = {len(nz)};")

        def emit(key, out_name, operands):
            """out_name[e[key]] += s * sum c[e] x y over the entries e, with (x, y) = operands(e), in the fewest
            multiplies: where every entry has one coefficient and shares one operand (the paths (l, l, 0) and
            (0, l, l)), that operand is scaled once and each term is one FMA; elsewhere each output's terms are
            grouped by the magnitude of their coefficient, one multiply per group (signs become + and -)."""
            coefs = [c[e] for e in nz]
            for side in (0, 1):
                common = {operands(e)[side] for e in nz}
                if len(common) == 1 and all(same(x, coefs[0]) for x in coefs):
                    scale = "" if same(np.mean(coefs), 1.0) else f" * T({fmt(np.mean(coefs))})"
                    w(f"    const T t = s{scale} * {common.pop()};")
                    for k, terms in by_output(key):
                        rest = [operands(e)[1 - side] for e in terms]
                        w(f"    {out_name}[{k}] += t * " + (rest[0] if len(rest) == 1 else f"({' + '.join(rest)})") + ";")
                    return
            for k, terms in by_output(key):
                groups = []  # [([magnitudes], [(sign, product)])] in first-seen order
                for e in terms:
                    g = next((g for g in groups if same(g[0][0], abs(c[e]))), None)
                    if g is None:
                        g = ([], [])
                        groups.append(g)
                    g[0].append(abs(c[e]))
                    g[1].append(("-" if c[e] < 0 else "+", "{} * {}".format(*operands(e))))
                parts = []
                for mags, prods in groups:
                    text = "".join(f" {sg} {pr}" for sg, pr in prods).lstrip(" +")
                    text = text if not text.startswith("- ") else "-" + text[2:]
                    parts.append(f"T({fmt(np.mean(mags))}) * ({text})")
                # the products of two inputs are formed first, so the compiler cannot share "coefficient * x"
                # between paths and keep such partial products live across a whole tensor product (that sharing
                # pushed the fused adjoints to 255 registers with spills on sm_90)
                w(f"    {out_name}[{k}] += s * ({' + '.join(parts)});")

        def by_output(key):
            groups = {}
            for e in nz:
                groups.setdefault(e[key], []).append(e)
            return sorted(groups.items())

        w("  template <class T>")
        w("  KOKKOS_FORCEINLINE_FUNCTION static void fwd(const T* a, const T* b, T s, T* out) {")
        emit(2, "out", lambda e: (f"a[{e[0]}]", f"b[{e[1]}]"))
        w("  }")
        w("  template <class T>")
        w("  KOKKOS_FORCEINLINE_FUNCTION static void adj_a(const T* g, const T* b, T s, T* ga) {")
        emit(0, "ga", lambda e: (f"g[{e[2]}]", f"b[{e[1]}]"))
        w("  }")
        w("  template <class T>")
        w("  KOKKOS_FORCEINLINE_FUNCTION static void adj_b(const T* a, const T* g, T s, T* gb) {")
        emit(1, "gb", lambda e: (f"a[{e[0]}]", f"g[{e[2]}]"))
        w("  }")
        w("};")
        w("")
    w("}  // namespace cg")
    w("}  // namespace kernels")
    w("}  // namespace batmobile")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--out-dir", default=os.path.join(root, "src", "kernels", "generated"))
    ap.add_argument("--check", action="store_true", help="also verify equivariance against the SH-derived Wigner-D")
    args = ap.parse_args()
    paths = all_paths()
    tables = {p: real_cg(*p) for p in paths}
    natural = [sum(p) % 2 == 0 for p in paths]
    nnz = [int(np.count_nonzero(tables[p])) for p in paths]
    assert len(paths) == 34 and sum(nnz) == 611, (len(paths), sum(nnz))
    assert sum(natural) == 23 and sum(n for n, k in zip(nnz, natural) if k) == 353
    if args.check:
        self_check(tables)
    os.makedirs(args.out_dir, exist_ok=True)
    emit_header(tables, os.path.join(args.out_dir, "cg_tables.hpp"))
    arrays = {f"cg_{a}_{b}_{c}": tables[(a, b, c)] for a, b, c in paths}
    arrays["paths"] = np.array(paths, dtype=np.int64)
    arrays["natural"] = np.array(natural)
    np.savez(os.path.join(args.out_dir, "cg_l3.npz"), **arrays)
    print(f"wrote {len(paths)} paths, {sum(nnz)} non-zeros to {args.out_dir}")


if __name__ == "__main__":
    main()
