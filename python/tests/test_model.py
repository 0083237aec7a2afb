"""Invariances, force/virial gradients, cutoff continuity of the reference model (float64)."""
import math

import numpy as np
import torch

from batmobile.model import envelope, evaluate_structure
from batmobile.neighbors import neighbor_list
from conftest import compute, random_model


def rotation(seed):
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def test_rotation_translation_invariance(model, system):
    pos, spc, cell = system
    ref = compute(model, pos, spc, cell)
    R = rotation(11)
    rot = compute(model, pos @ R.T + np.array([0.3, -1.2, 2.0]), spc, cell @ R.T)
    assert abs(rot["energy"] - ref["energy"]) < 1e-10 * max(1.0, abs(ref["energy"]))
    assert np.allclose(rot["atomic_energies"], ref["atomic_energies"], atol=1e-10)
    assert np.allclose(rot["forces"], ref["forces"] @ R.T, atol=1e-10)
    assert np.allclose(rot["virial"], R @ ref["virial"] @ R.T, atol=1e-9)
    # forces are not trivially zero, the invariance is not vacuous
    assert np.abs(ref["forces"]).max() > 1e-3


def test_reflection_invariance(model, system):
    # natural-parity paths only: the energy is E(3)-invariant, forces are proper vectors
    pos, spc, cell = system
    ref = compute(model, pos, spc, cell)
    P = np.diag([1.0, -1.0, 1.0])
    mir = compute(model, pos @ P, spc, cell @ P)
    assert abs(mir["energy"] - ref["energy"]) < 1e-10 * max(1.0, abs(ref["energy"]))
    assert np.allclose(mir["forces"], ref["forces"] @ P, atol=1e-10)


def test_permutation_equivariance(model, system):
    pos, spc, cell = system
    ref = compute(model, pos, spc, cell)
    perm = np.random.default_rng(2).permutation(len(pos))
    out = compute(model, pos[perm], spc[perm], cell)
    assert abs(out["energy"] - ref["energy"]) < 1e-10 * max(1.0, abs(ref["energy"]))
    assert np.allclose(out["atomic_energies"], ref["atomic_energies"][perm], atol=1e-10)
    assert np.allclose(out["forces"], ref["forces"][perm], atol=1e-10)


def test_periodic_image_invariance(model, system):
    # moving an atom by a lattice vector changes nothing
    pos, spc, cell = system
    ref = compute(model, pos, spc, cell)
    moved = pos.copy()
    moved[3] += cell[1] - 2 * cell[2]
    out = compute(model, moved, spc, cell)
    assert abs(out["energy"] - ref["energy"]) < 1e-10 * max(1.0, abs(ref["energy"]))
    assert np.allclose(out["forces"], ref["forces"], atol=1e-10)


def test_forces_are_finite_differences(model, system):
    pos, spc, cell = system
    ref = compute(model, pos, spc, cell)
    h = 1e-5
    fd = np.zeros_like(pos)
    for a in range(len(pos)):
        for k in range(3):
            p, m = pos.copy(), pos.copy()
            p[a, k] += h
            m[a, k] -= h
            fd[a, k] = -(compute(model, p, spc, cell, False)["energy"] - compute(model, m, spc, cell, False)["energy"]) / (2 * h)
    assert np.abs(fd - ref["forces"]).max() < 1e-6 * max(1.0, np.abs(ref["forces"]).max())
    assert np.abs(ref["forces"].sum(0)).max() < 1e-10   # Newton's third law through the edge formulation


def test_virial_is_strain_derivative(model, system):
    pos, spc, cell = system
    ref = compute(model, pos, spc, cell)
    h = 1e-6
    fd = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            def energy(e):
                strain = np.eye(3)
                strain[a, b] += e
                return compute(model, pos @ strain, spc, cell @ strain, False)["energy"]
            fd[a, b] = -(energy(h) - energy(-h)) / (2 * h)     # W = -dE/d(strain)
    assert np.abs(fd - ref["virial"]).max() < 1e-6 * max(1.0, np.abs(ref["virial"]).max())
    assert np.allclose(ref["virial"], ref["virial"].T, atol=1e-10)
    assert np.allclose(ref["atomic_virial"].sum(0), ref["virial"], atol=1e-10)
    assert abs(ref["atomic_energies"].sum() - ref["energy"]) < 1e-10


def test_energy_continuous_at_cutoff(monkeypatch):
    """Continuity as a neighbour crosses r_c. With the contract's softmax (max over all edges, +1e-9 in the
    denominator) there is a residual jump of order 1e-9 * exp(dM) / Z (when the leaving edge held the max logit, the
    max M jumps by dM and the 1e-9 weighs differently): small but not zero, see python/README.md. With a negligible eps
    the energy is continuous to the envelope's (r_c - d)^3 order."""
    model = random_model(seed=4)
    import batmobile.model as bm
    for eps, tol in ((1e-300, 1e-11), (bm.SOFTMAX_EPS, 1e-7)):   # 1e-300: "no eps" but 0/0-safe
        monkeypatch.setattr(bm, "SOFTMAX_EPS", eps)
        _check_cutoff_continuity(model, tol)


def _check_cutoff_continuity(model, tol):
    r_c = model.hp.r_c
    cell = np.eye(3) * 40.0
    base = np.array([[10.0, 10.0, 10.0], [11.0, 10.3, 9.8], [9.4, 10.9, 10.2]])
    spc = np.array([0, 1, 1])

    def at(d):
        # atom 3 moves along -y and crosses r_c of atom 0; it stays > r_c from atoms 1 and 2 (5.4 A and 5.9 A)
        pos = np.vstack([base, [10.0, 10.0 - d, 10.0]])
        return compute(model, pos, np.append(spc, 0), cell)

    e = [at(r_c + s)["energy"] for s in (-1e-3, -1e-4, 0.0, 1e-4, 1e-3)]
    inside, outside = at(r_c - 1e-4), at(r_c + 1e-4)
    assert abs(e[1] - e[3]) < tol
    assert abs(e[0] - e[4]) < 1e-6
    assert np.abs(inside["forces"] - outside["forces"]).max() < 1e-6
    # the neighbour does matter well inside the cutoff
    assert abs(at(r_c - 1.0)["energy"] - e[4]) > 1e-4
    # envelope: value, slope and curvature vanish at r_c
    d = torch.tensor([r_c * (1 - 1e-4)], dtype=torch.float64, requires_grad=True)
    u = envelope(d, r_c)
    (du,) = torch.autograd.grad(u.sum(), d)
    assert u.item() < 1e-9 and abs(du.item()) < 1e-6


def test_isolated_atom_energy():
    """An atom without neighbours: h = embed only; per model.md its energy is E_ref + energy_scale * readout of the
    edge-free update (not E_ref alone: the model contract has no isolated-atom subtraction)."""
    model = random_model(seed=5)
    hp = model.hp
    far = compute(model, np.array([[1.0, 2.0, 3.0], [20.0, 20.0, 20.0]]), np.array([0, 1]), np.eye(3) * 60.0)
    with torch.no_grad():
        expected = []
        for s in (0, 1):
            h0 = model.embed[s].clone()
            for layer in model.layers:
                a0 = torch.nn.functional.silu(layer.mix.b0)   # m = o = 0 without edges
                h = h0 + layer.update.Wu0 @ a0
                h0 = h * layer.norm.g0 / torch.sqrt((h * h).mean() + 1e-6)
            ro = model.readout
            e = ro.w2 @ torch.nn.functional.silu(ro.W1 @ h0 + ro.b1) + ro.b2
            expected.append((hp.energy_scale * e + model.E_ref[s]).item())
    assert np.allclose(far["atomic_energies"], expected, atol=1e-12)
    assert np.abs(far["forces"]).max() == 0.0


def test_float32_matches_float64(model, system):
    pos, spc, cell = system
    ref = compute(model, pos, spc, cell)
    m32 = random_model().float()
    s, r, sh = neighbor_list(pos, cell, model.hp.r_c)
    T = lambda x, dt=torch.float32: torch.as_tensor(np.asarray(x), dtype=dt)
    out = evaluate_structure(m32, T(pos), T(spc, torch.long), T(cell), T(s, torch.long), T(r, torch.long),
                             T(sh, torch.long))
    assert abs(out["energy"].item() - ref["energy"]) < 1e-4 * max(1.0, abs(ref["energy"]))
    assert np.abs(out["forces"].detach().numpy() - ref["forces"]).max() < 1e-4 * max(1.0, np.abs(ref["forces"]).max())


def test_neighbor_list_against_brute_force(system):
    pos, _, cell = system
    r_c = 6.0
    s, r, sh = neighbor_list(pos, cell, r_c)
    brute = set()
    rng = range(-4, 5)
    for i in range(len(pos)):
        for j in range(len(pos)):
            for a in rng:
                for b in rng:
                    for c in rng:
                        S = np.array([a, b, c])
                        d = np.linalg.norm(pos[j] - pos[i] + S @ cell)
                        if 0 < d < r_c:
                            brute.add((i, j, a, b, c))
    mine = {(int(i), int(j), *map(int, S)) for i, j, S in zip(r, s, sh)}
    assert mine == brute
    assert all((j, i, -a, -b, -c) in mine for i, j, a, b, c in mine)   # full list: reverse edges present
    assert any(i == j for i, j, *_ in mine)                              # small box: own images are neighbours
    assert np.all(np.diff(r) >= 0)                                       # grouped by receiver
