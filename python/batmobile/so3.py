"""Real spherical harmonics and Clebsch-Gordan coefficients in e3nn 0.6's conventions.

Spherical harmonics: "component" normalisation (sum_m Y^l_m^2 = 2l+1), polar axis y, index k = l*l + (m + l).
Clebsch-Gordan: complex Condon-Shortley coefficients (Racah formula, exact rationals) rotated into the real basis
with e3nn's real<->complex change of basis (including its (-i)^l phase that makes the result real), then scaled to
Frobenius norm 1. Written from the math, verified by the intertwining tests in python/tests/test_so3.py.
"""
from fractions import Fraction
from functools import lru_cache
from math import factorial, sqrt
from typing import Dict, List, Tuple

import numpy as np
import torch

LMAX_SUPPORTED = 3


def spherical_harmonics(L: int, rhat: torch.Tensor) -> torch.Tensor:
    """Y^l_m(rhat) for l = 0..L of unit vectors rhat (..., 3); returns (..., (L+1)^2)."""
    if L > LMAX_SUPPORTED:
        raise ValueError(f"spherical harmonics implemented up to l={LMAX_SUPPORTED}")
    x, y, z = rhat[..., 0], rhat[..., 1], rhat[..., 2]
    out = [torch.ones_like(x)]
    if L >= 1:
        s3 = sqrt(3.0)
        out += [s3 * x, s3 * y, s3 * z]
    if L >= 2:
        s15 = sqrt(15.0)
        xx, yy, zz = x * x, y * y, z * z
        out += [s15 * x * z, s15 * x * y, sqrt(5.0) * (yy - 0.5 * (xx + zz)), s15 * y * z,
                0.5 * s15 * (zz - xx)]
    if L >= 3:
        a = sqrt(35.0 / 8.0)    # sectoral |m| = 3
        b = sqrt(105.0)         # |m| = 2 (xyz)
        c = sqrt(21.0 / 8.0)    # |m| = 1
        xx, yy, zz = x * x, y * y, z * z
        radial = 4.0 * yy - xx - zz
        out += [a * x * (3.0 * zz - xx), b * x * y * z, c * x * radial,
                0.5 * sqrt(7.0) * y * (2.0 * yy - 3.0 * (xx + zz)),
                c * z * radial, 0.5 * b * y * (zz - xx), a * z * (zz - 3.0 * xx)]
    return torch.stack(out, dim=-1)


def _complex_cg_coefficient(j1: int, m1: int, j2: int, m2: int, j3: int, m3: int) -> float:
    """<j1 m1 j2 m2 | j3 m3>, Condon-Shortley phase, Racah's closed form with exact rationals."""
    if m1 + m2 != m3 or abs(m1) > j1 or abs(m2) > j2 or abs(m3) > j3:
        return 0.0
    if not abs(j1 - j2) <= j3 <= j1 + j2:
        return 0.0
    f = factorial
    prefactor = Fraction((2 * j3 + 1) * f(j1 + j2 - j3) * f(j1 - j2 + j3) * f(-j1 + j2 + j3), f(j1 + j2 + j3 + 1))
    prefactor *= f(j1 + m1) * f(j1 - m1) * f(j2 + m2) * f(j2 - m2) * f(j3 + m3) * f(j3 - m3)
    total = Fraction(0)
    for k in range(0, j1 + j2 + j3 + 1):
        denominators = [k, j1 + j2 - j3 - k, j1 - m1 - k, j2 + m2 - k, j3 - j2 + m1 + k, j3 - j1 - m2 + k]
        if min(denominators) < 0:
            continue
        term = Fraction(1)
        for d in denominators:
            term /= f(d)
        total += (-1) ** k * term
    return float(total) * sqrt(float(prefactor))


def real_to_complex_basis(l: int) -> np.ndarray:
    """Q[a, b] with a = real index (m + l), b = complex index (m + l); e3nn's phase (-i)^l included."""
    q = np.zeros((2 * l + 1, 2 * l + 1), dtype=np.complex128)
    r = 1.0 / sqrt(2.0)
    q[l, l] = 1.0
    for m in range(1, l + 1):
        q[l - m, l + m] = r            # real sine-like component (m < 0)
        q[l - m, l - m] = -1j * r
        q[l + m, l + m] = (-1) ** m * r  # real cosine-like component (m > 0)
        q[l + m, l - m] = 1j * (-1) ** m * r
    return ((-1j) ** l) * q


@lru_cache(maxsize=None)
def clebsch_gordan(l1: int, l2: int, l3: int) -> np.ndarray:
    """Real coupling tensor CG[m1][m2][m3] (float64, Frobenius norm 1) in e3nn 0.6's o3.wigner_3j basis."""
    if not abs(l1 - l2) <= l3 <= l1 + l2:
        raise ValueError(f"({l1},{l2},{l3}) violates the triangle rule")
    complex_cg = np.zeros((2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1))
    for m1 in range(-l1, l1 + 1):
        for m2 in range(-l2, l2 + 1):
            m3 = m1 + m2
            if abs(m3) <= l3:
                complex_cg[m1 + l1, m2 + l2, m3 + l3] = _complex_cg_coefficient(l1, m1, l2, m2, l3, m3)
    q1, q2, q3 = real_to_complex_basis(l1), real_to_complex_basis(l2), real_to_complex_basis(l3)
    # Contract the first two slots with Q and the output slot with conj(Q) (e3nn's placement of the basis change).
    real = np.einsum("ia,kb,nc,ikn->abc", q1, q2, np.conj(q3), complex_cg)
    assert np.abs(real.imag).max() < 1e-12, "change of basis failed to produce a real tensor"
    real = real.real
    return real / np.linalg.norm(real)


def natural_parity_paths(L: int) -> List[Tuple[int, int, int]]:
    """Paths (l1, l2, l3), all <= L, triangle rule, l1+l2+l3 even, lexicographic order."""
    return [(l1, l2, l3) for l1 in range(L + 1) for l2 in range(L + 1) for l3 in range(L + 1)
            if abs(l1 - l2) <= l3 <= l1 + l2 and (l1 + l2 + l3) % 2 == 0]


def path_factors(L: int) -> List[float]:
    """alpha_p = sqrt((2 l3 + 1) / n3(l3))."""
    paths = natural_parity_paths(L)
    n3: Dict[int, int] = {}
    for _, _, l3 in paths:
        n3[l3] = n3.get(l3, 0) + 1
    return [sqrt((2 * l3 + 1) / n3[l3]) for _, _, l3 in paths]


def wigner_D_from_sh(l: int, rotation: torch.Tensor) -> torch.Tensor:
    """Real Wigner-D of a 3x3 rotation built from the SH: D = Y(R P) Y(P)^-1 for 2l+1 generic unit vectors P."""
    gen = torch.Generator().manual_seed(1234 + l)
    points = torch.randn(2 * l + 1, 3, generator=gen, dtype=torch.float64)
    points = points / points.norm(dim=1, keepdim=True)
    rotation = rotation.to(torch.float64)
    sl = slice(l * l, (l + 1) * (l + 1))
    y_p = spherical_harmonics(l, points)[:, sl].T          # (2l+1, n)
    y_rp = spherical_harmonics(l, points @ rotation.T)[:, sl].T
    return y_rp @ torch.linalg.inv(y_p)
