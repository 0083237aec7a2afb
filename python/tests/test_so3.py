import math
import os

import numpy as np
import pytest
import torch

from batmobile.so3 import (clebsch_gordan, natural_parity_paths, path_factors, spherical_harmonics,
                           wigner_D_from_sh)


def random_rotation(seed):
    q, r = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)))
    q = q * torch.sign(torch.diagonal(r))
    return q if torch.det(q) > 0 else -q


def unit_vectors(n, seed=0):
    v = torch.randn(n, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return v / v.norm(dim=1, keepdim=True)


def legendre(l, t):
    return [torch.ones_like(t), t, 0.5 * (3 * t ** 2 - 1), 0.5 * (5 * t ** 3 - 3 * t)][l]


def test_sh_low_orders_and_polar_axis():
    v = unit_vectors(50)
    Y = spherical_harmonics(3, v)
    assert torch.allclose(Y[:, 0], torch.ones(50, dtype=torch.float64))
    assert torch.allclose(Y[:, 1:4], math.sqrt(3) * v, atol=1e-14)
    # m = 0 components are sqrt(2l+1) P_l(cos theta) with the polar axis y
    for l in range(4):
        assert torch.allclose(Y[:, l * l + l], math.sqrt(2 * l + 1) * legendre(l, v[:, 1]), atol=1e-13)
    y_axis = spherical_harmonics(3, torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64))[0]
    expected = torch.zeros(16, dtype=torch.float64)
    for l in range(4):
        expected[l * l + l] = math.sqrt(2 * l + 1)
    assert torch.allclose(y_axis, expected, atol=1e-14)


def test_sh_component_normalisation_and_orthogonality():
    # product Gauss-Legendre (cos theta about y) x uniform phi grid integrates degree <= 6 polynomials exactly
    t, w = np.polynomial.legendre.leggauss(8)
    phi = np.arange(16) * 2 * np.pi / 16
    T, P = np.meshgrid(t, phi, indexing="ij")
    s = np.sqrt(1 - T ** 2)
    pts = torch.tensor(np.stack([s * np.cos(P), T, s * np.sin(P)], -1).reshape(-1, 3))
    weights = torch.tensor(np.repeat(w, 16) / (2 * 16))          # sums to 1: mean over the sphere
    Y = spherical_harmonics(3, pts)
    gram = (Y * weights[:, None]).T @ Y
    assert torch.allclose(gram, torch.eye(16, dtype=torch.float64), atol=1e-12)
    assert torch.allclose((Y ** 2).reshape(-1, 16)[:, 4:9].sum(1), torch.full((len(pts),), 5.0, dtype=torch.float64))


def test_sh_harmonic_polynomials():
    # each Y^l_m is a harmonic homogeneous polynomial: zero Laplacian off the sphere
    x = (1.3 * unit_vectors(5, seed=2)).requires_grad_(True)
    Y = spherical_harmonics(3, x)
    for k in range(16):
        (g,) = torch.autograd.grad(Y[:, k].sum(), x, create_graph=True)
        lap = sum(torch.autograd.grad(g[:, i].sum(), x, retain_graph=True)[0][:, i] for i in range(3))
        assert lap.abs().max() < 1e-10, k


def test_sh_equivariance_and_wigner_D():
    R1, R2 = random_rotation(1), random_rotation(2)
    v = unit_vectors(20, seed=4)
    for l in range(4):
        sl = slice(l * l, (l + 1) ** 2)
        D1, D2 = wigner_D_from_sh(l, R1), wigner_D_from_sh(l, R2)
        assert torch.allclose(D1 @ D1.T, torch.eye(2 * l + 1, dtype=torch.float64), atol=1e-12)
        assert torch.allclose(wigner_D_from_sh(l, R1 @ R2), D1 @ D2, atol=1e-12)
        assert torch.allclose(spherical_harmonics(3, v @ R1.T)[:, sl], spherical_harmonics(3, v)[:, sl] @ D1.T,
                              atol=1e-12)


def test_cg_counts_and_norm():
    paths = natural_parity_paths(3)
    assert len(paths) == 23
    assert sum(int((np.abs(clebsch_gordan(*p)) > 1e-12).sum()) for p in paths) == 353
    assert [len(natural_parity_paths(L)) for L in (1, 2)] == [4, 11]
    all_paths = [(a, b, c) for a in range(4) for b in range(4) for c in range(4) if abs(a - b) <= c <= a + b]
    assert len(all_paths) == 34
    assert sum(int((np.abs(clebsch_gordan(*p)) > 1e-12).sum()) for p in all_paths) == 611
    for p in all_paths:
        assert abs(np.linalg.norm(clebsch_gordan(*p)) - 1.0) < 1e-14
    # L=1: (0,0,0), (0,1,1), (1,0,1), (1,1,0); two paths end in each of l3 = 0 and l3 = 1
    assert np.allclose(path_factors(1), [math.sqrt(1 / 2), math.sqrt(3 / 2), math.sqrt(3 / 2), math.sqrt(1 / 2)])


def test_cg_intertwines_wigner_D_for_all_paths():
    for seed in (5, 6):
        R = random_rotation(seed)
        D = [wigner_D_from_sh(l, R) for l in range(4)]
        for l1 in range(4):
            for l2 in range(4):
                for l3 in range(abs(l1 - l2), min(3, l1 + l2) + 1):
                    C = torch.tensor(clebsch_gordan(l1, l2, l3))
                    rotated = torch.einsum("abc,ai,bj,ck->ijk", C, D[l1], D[l2], D[l3])
                    assert torch.allclose(rotated, C, atol=1e-12), (l1, l2, l3)


def test_cg_known_values():
    # (1,1,0) is the dot product, (1,1,1) the cross product: e3nn's signs
    assert np.allclose(clebsch_gordan(1, 1, 0)[:, :, 0], np.eye(3) / math.sqrt(3))
    eps = np.zeros((3, 3, 3))
    for i, j, k in [(0, 1, 2), (1, 2, 0), (2, 0, 1)]:
        eps[i, j, k], eps[j, i, k] = 1, -1
    assert np.allclose(clebsch_gordan(1, 1, 1), eps / math.sqrt(6))


GEN = os.path.join(os.path.dirname(__file__), "..", "..", "src", "kernels", "generated", "cg_l3.npz")


@pytest.mark.skipif(not os.path.exists(GEN), reason="kernel CG table not generated")
def test_cg_equals_kernel_generated_table():
    table = np.load(GEN)
    keys = [k for k in table.files if k.startswith("cg_")]
    assert len(keys) == 34
    for k in keys:
        l1, l2, l3 = (int(x) for x in k.split("_")[1:])
        assert np.abs(table[k] - clebsch_gordan(l1, l2, l3)).max() < 1e-12, k
