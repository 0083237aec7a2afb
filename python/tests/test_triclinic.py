"""Strongly skewed (triclinic) cells: the neighbour list against a brute-force search in float64, also with
unwrapped positions and partial periodicity; the model's energy under an equivalent re-description of the cell;
forces = finite differences and virial = strain derivative on a skewed cell."""
import itertools

import numpy as np
import pytest

from batmobile.neighbors import complete_cell, neighbor_list
from conftest import compute, random_model

# perpendicular widths 1.5, 2.0 and 2.3 A: r_c = 4 exceeds each of them, so images up to 3 cells away count
SKEWED = np.array([[5.0, 0.0, 0.0], [4.3, 2.6, 0.0], [-3.1, 1.9, 2.3]])
REACH = 10


def perpendicular_widths(cell):
    return 1.0 / np.linalg.norm(np.linalg.inv(cell).T, axis=1)


def brute_force(pos, cell, r_c, pbc=(True, True, True), reach=REACH):
    """Every pair and every lattice shift up to `reach` cells in each periodic direction."""
    ranges = [range(-reach, reach + 1) if p else [0] for p in pbc]
    shifts = np.array(list(itertools.product(*ranges)))
    edges = set()
    for i, j in itertools.product(range(len(pos)), repeat=2):
        d = np.linalg.norm(pos[j] - pos[i] + shifts @ cell, axis=1)
        edges |= {(i, j, *map(int, S)) for S in shifts[(d > 0) & (d < r_c)]}
    return edges


def edge_set(pos, cell, r_c, pbc=(True, True, True)):
    s, r, sh = neighbor_list(pos, cell, r_c, pbc)
    return {(int(i), int(j), *map(int, S)) for i, j, S in zip(r, s, sh)}


@pytest.mark.parametrize("pbc", [(True, True, True), (True, False, True), (False, False, False)])
def test_neighbor_list_skewed_cell_brute_force(pbc):
    assert (perpendicular_widths(SKEWED) < 2 * 4.0).all()
    rng = np.random.default_rng(5)
    # positions up to two cells outside the box (unwrapped input) in the periodic directions
    frac = rng.uniform(-2.0, 3.0, size=(6, 3)) * np.array(pbc) + rng.uniform(size=(6, 3)) * ~np.array(pbc)
    cell = complete_cell(SKEWED, pbc) if not all(pbc) else SKEWED
    pos = frac @ SKEWED
    mine = edge_set(pos, cell, 4.0, pbc)
    assert mine == brute_force(pos, cell, 4.0, pbc)
    if all(pbc):
        assert len(mine) > 100 and any(i == j for i, j, *_ in mine)


def test_neighbor_list_many_atoms_brute_force():
    """150 atoms in a skewed cell several cutoffs wide (the cell list has many bins), all pairs for each shift."""
    rng = np.random.default_rng(11)
    cell = np.array([[11.0, 0.0, 0.0], [5.0, 10.0, 0.0], [-4.0, 3.0, 9.0]])
    pos = rng.uniform(-0.5, 1.5, size=(150, 3)) @ cell
    r_c = 3.2
    edges = set()
    for S in itertools.product(range(-3, 4), repeat=3):
        d = np.linalg.norm(pos[None, :, :] - pos[:, None, :] + np.array(S) @ cell, axis=2)   # d[i, j]
        i, j = np.nonzero((d > 0) & (d < r_c))
        edges |= {(int(a), int(b), *S) for a, b in zip(i, j)}
    s, r, sh = neighbor_list(pos, cell, r_c)
    assert edge_set(pos, cell, r_c) == edges and len(s) == len(edges) > 1000
    assert np.all(np.diff(r) >= 0)


def test_brute_force_reach_is_enough():
    # the brute-force search must not miss far images: input up to 5 cells apart, plus r_c / smallest width
    assert 5 + 4.0 / perpendicular_widths(SKEWED).min() + 1 < REACH


def test_complete_cell():
    cell = np.array([[6.0, 0.0, 0.0], [1.0, 5.0, 0.0], [0.0, 0.0, 0.0]])
    full = complete_cell(cell, (True, True, False))
    assert np.array_equal(full[:2], cell[:2]) and abs(np.linalg.det(full)) > 1.0
    assert abs(np.linalg.det(complete_cell(np.zeros((3, 3)), (False, False, False)))) > 0.5
    with pytest.raises(ValueError, match="linearly dependent"):
        complete_cell(np.array([[5.0, 0, 0], [10.0, 0, 0], [0, 0, 5.0]]), (True, True, True))


def test_energy_invariant_under_cell_redescription():
    """The same lattice described by (a, b + 2a, c - b) and by (a, b, c): same crystal, same energy and forces."""
    model = random_model(seed=4)
    rng = np.random.default_rng(8)
    pos = rng.uniform(size=(7, 3)) @ SKEWED
    spc = np.array([0, 1, 1, 0, 1, 0, 1])
    a, b, c = SKEWED
    other = np.array([a, b + 2 * a, c - b])
    assert abs(abs(np.linalg.det(other)) - abs(np.linalg.det(SKEWED))) < 1e-9
    ref, alt = compute(model, pos, spc, SKEWED), compute(model, pos, spc, other)
    assert abs(alt["energy"] - ref["energy"]) < 1e-10 * max(1.0, abs(ref["energy"]))
    assert np.allclose(alt["forces"], ref["forces"], atol=1e-10)
    assert np.allclose(alt["virial"], ref["virial"], atol=1e-9)
    assert np.abs(ref["forces"]).max() > 1e-3


def test_forces_and_virial_finite_differences_skewed_cell():
    model = random_model(seed=2)
    rng = np.random.default_rng(1)
    pos = rng.uniform(size=(5, 3)) @ SKEWED
    spc = np.array([0, 1, 0, 1, 1])
    ref = compute(model, pos, spc, SKEWED)
    energy = lambda p, cell=SKEWED: compute(model, p, spc, cell, False)["energy"]
    h = 1e-5
    fd = np.zeros_like(pos)
    for n, k in itertools.product(range(len(pos)), range(3)):
        p, m = pos.copy(), pos.copy()
        p[n, k] += h
        m[n, k] -= h
        fd[n, k] = -(energy(p) - energy(m)) / (2 * h)
    assert np.abs(fd - ref["forces"]).max() < 1e-6 * max(1.0, np.abs(ref["forces"]).max())
    # W = -dE/d(strain): strain positions and cell together
    dW = np.zeros((3, 3))
    for a_, b_ in itertools.product(range(3), repeat=2):
        eps = np.zeros((3, 3))
        eps[a_, b_] = h
        up, dn = np.eye(3) + eps, np.eye(3) - eps
        dW[a_, b_] = -(energy(pos @ up, SKEWED @ up) - energy(pos @ dn, SKEWED @ dn)) / (2 * h)
    assert np.abs(dW - ref["virial"]).max() < 1e-6 * max(1.0, np.abs(ref["virial"]).max())
