"""Extended XYZ and DeePMD readers: what they read (energies, forces, stress/virial with its sign, triclinic cells,
mixed sizes, per-frame pbc, frame ranges) and the errors for bad input (each names the file and frame)."""
import os

import numpy as np
import pytest

ase = pytest.importorskip("ase")
import ase.io  # noqa: E402
from ase import Atoms  # noqa: E402
from ase.calculators.lj import LennardJones  # noqa: E402
from ase.calculators.singlepoint import SinglePointCalculator  # noqa: E402

from batmobile.data import DataError, assign_species, species_in_order  # noqa: E402
from batmobile.sources import parse_source, prepare, read_source, read_sources  # noqa: E402

TRICLINIC = np.array([[6.0, 0.0, 0.0], [2.5, 5.5, 0.0], [-1.5, 1.0, 6.5]])


def labelled(symbols, positions, cell, pbc, energy, forces, stress=None):
    atoms = Atoms(symbols, positions=positions, cell=cell, pbc=pbc)
    results = {"energy": energy, "forces": forces}
    if stress is not None:
        results["stress"] = stress
    atoms.calc = SinglePointCalculator(atoms, **results)
    return atoms


def mixed_frames(rng):
    """A triclinic periodic Ni-Al-H frame with a stress, a 2-atom slab (pbc T T F), an isolated molecule."""
    frames = []
    n = 7
    frames.append(labelled(["Ni", "Al", "H", "Ni", "Al", "Ni", "H"], rng.uniform(size=(n, 3)) @ TRICLINIC,
                           TRICLINIC, True, -21.5, rng.normal(size=(n, 3)),
                           stress=rng.normal(scale=0.01, size=6)))
    frames.append(labelled(["Al", "H"], [[0.0, 0.0, 5.0], [1.0, 0.5, 6.0]], [[4.0, 0, 0], [1.0, 4.0, 0], [0, 0, 0]],
                           [True, True, False], -4.25, rng.normal(size=(2, 3))))
    frames.append(labelled(["H", "H", "Ni"], [[0, 0, 0], [0.74, 0, 0], [0, 2.0, 0]], np.zeros((3, 3)), False,
                           -6.0, rng.normal(size=(3, 3))))
    return frames


@pytest.fixture
def xyz_file(tmp_path):
    path = str(tmp_path / "mixed.xyz")
    ase.io.write(path, mixed_frames(np.random.default_rng(0)), format="extxyz")
    return path


def test_reads_mixed_file(xyz_file):
    written = mixed_frames(np.random.default_rng(0))
    frames = read_source(xyz_file)
    assert [len(f.symbols) for f in frames] == [7, 2, 3]
    assert [f.pbc for f in frames] == [(True,) * 3, (True, True, False), (False,) * 3]
    assert np.allclose(frames[0].cell, TRICLINIC)
    for fr, at in zip(frames, written):
        # the file holds 8 decimals
        assert abs(fr.energy - at.get_potential_energy()) < 1e-8
        assert np.allclose(fr.forces, at.get_forces(), rtol=0, atol=1e-8)
        # wrapped along the periodic directions only: same points modulo the lattice
        frac = np.linalg.solve(fr.cell.T, (fr.positions - at.positions).T).T
        assert np.allclose(frac, np.round(frac), atol=1e-9)
        assert np.allclose(frac[:, ~np.array(fr.pbc)], 0.0)
    assert frames[1].positions[0, 2] == 5.0 and abs(np.linalg.det(frames[2].cell)) > 0.5
    # ASE's stress (dE/dstrain / V) becomes the virial W = -V stress; frames without one have none
    V = abs(np.linalg.det(TRICLINIC))
    s = written[0].get_stress(voigt=False)
    assert np.allclose(frames[0].virial, -V * s, rtol=0, atol=1e-6) and np.abs(s).max() > 1e-3
    assert frames[1].virial is None and frames[2].virial is None
    assert species_in_order(frames) == ["Ni", "Al", "H"]
    prepare(frames, ["H", "Al", "Ni"], 3.0)
    assert frames[0].species.tolist() == [2, 1, 0, 2, 1, 2, 0] and len(frames[0].sender) > 0


def test_stress_sign_is_minus_strain_derivative(tmp_path):
    """The virial read from an ASE stress equals -dE/dstrain of the calculator that produced it."""
    rng = np.random.default_rng(3)
    atoms = Atoms("Ar4", positions=rng.uniform(size=(4, 3)) @ TRICLINIC * 0.9, cell=TRICLINIC * 0.9, pbc=True)
    atoms.calc = LennardJones(sigma=2.0, epsilon=0.1, rc=4.0, smooth=True)

    def energy(strain):
        a = atoms.copy()
        a.calc = atoms.calc
        a.set_cell(atoms.cell.array @ (np.eye(3) + strain), scale_atoms=True)
        return a.get_potential_energy()
    path = str(tmp_path / "lj.xyz")
    atoms.get_potential_energy()
    ase.io.write(path, atoms, format="extxyz")
    W = read_source(path)[0].virial
    h = 1e-6
    fd = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            e = np.zeros((3, 3))
            e[a, b] = h
            fd[a, b] = -(energy(e) - energy(-e)) / (2 * h)
    fd = 0.5 * (fd + fd.T)
    assert np.abs(W).max() > 1e-3 and np.allclose(W, fd, atol=1e-6)


def test_virial_key_and_other_energy_key(tmp_path):
    path = str(tmp_path / "v.xyz")
    W = [[1.0, 0.1, 0.2], [0.1, 2.0, 0.3], [0.2, 0.3, 3.0]]
    with open(path, "w") as f:
        f.write('2\nLattice="5 0 0 1 5 0 0 0 5" Properties=species:S:1:pos:R:3:dft_forces:R:3 '
                f'dft_energy=-3.5 virial="{" ".join(str(x) for row in W for x in row)}" pbc="T T T"\n'
                "H 0 0 0 0.1 0.2 0.3\nH 0.8 0 0 -0.1 -0.2 -0.3\n")
    fr = read_source(path, {"energy_key": "dft_energy", "forces_key": "dft_forces"})[0]
    assert fr.energy == -3.5 and fr.forces[1, 2] == -0.3 and np.array_equal(fr.virial, W)
    with pytest.raises(DataError, match=r"v.xyz frame 0: no energy \(looked for 'energy' as a key"):
        read_source(path)


def test_frame_ranges(xyz_file):
    assert parse_source("a.xyz@1:3") == ("a.xyz", slice(1, 3))
    assert parse_source("a.xyz@-2:") == ("a.xyz", slice(-2, None))
    assert parse_source("a.xyz@2") == ("a.xyz", slice(2, 3))
    assert parse_source("we@ird.xyz") == ("we@ird.xyz", None)
    assert [len(f.symbols) for f in read_source(xyz_file + "@1:")] == [2, 3]
    assert [len(f.symbols) for f in read_sources([xyz_file + "@:1", xyz_file + "@-1"])] == [7, 3]
    with pytest.raises(DataError, match="selects no frame"):
        read_source(xyz_file + "@5:")


FRAME = '2\nLattice="5 0 0 0 5 0 0 0 5" Properties=species:S:1:pos:R:3:forces:R:3 energy=-1.0 pbc="T T T"\n' \
        "H 0 0 0 0 0 0\nH 0.8 0 0 0 0 0\n"


@pytest.mark.parametrize("second, message", [
    (FRAME.replace(" energy=-1.0", ""), r"bad.xyz frame 1: no energy"),
    (FRAME.replace(":forces:R:3", "").replace(" 0 0 0\n", "\n"), r"bad.xyz frame 1: no forces"),
    (FRAME.replace("forces:R:3", "forces:R:2").replace(" 0 0 0\n", " 0 0\n"),
     r"bad.xyz frame 1: forces have shape \[2, 2\] for 2 atoms"),
    (FRAME.replace("energy=-1.0", "energy=nan"), r"bad.xyz frame 1: the energy 'energy' contain non-finite"),
    (FRAME.replace("2\n", "3\n", 1), r"bad.xyz frame 1: not readable as extended XYZ"),
    (FRAME.replace('Lattice="5 0 0 0 5 0 0 0 5"', 'Lattice="5 0 0 10 0 0 0 0 5"'),
     r"bad.xyz frame 1: the periodic cell vectors .* linearly dependent"),
])
def test_bad_extxyz_frames(tmp_path, second, message):
    path = str(tmp_path / "bad.xyz")
    with open(path, "w") as f:
        f.write(FRAME + second)
    with pytest.raises(DataError, match=message):
        read_source(path)


def test_coinciding_atoms(tmp_path):
    path = str(tmp_path / "same.xyz")
    with open(path, "w") as f:
        f.write(FRAME + FRAME.replace("H 0.8 0 0", "H 5 0 0"))    # atom 1 on the image of atom 0
    with pytest.raises(DataError, match=r"same.xyz frame 1: atoms [01] and [01] \(or its periodic image\) are at"):
        prepare(read_source(path), ["H"], 3.0)


def test_unknown_species_and_missing_file(xyz_file, tmp_path):
    frames = read_source(xyz_file)
    with pytest.raises(DataError, match=r"mixed.xyz frame 0: element\(s\) \['Al', 'Ni'\] not in the model's species"):
        assign_species(frames, ["H"])
    with pytest.raises(DataError, match="nope.xyz: no such file"):
        read_source(str(tmp_path / "nope.xyz"))
    with pytest.raises(DataError, match="neither a DeePMD set"):
        read_source(str(tmp_path))


def write_deepmd(system, n_frames=3, n_atoms=4, **override):
    rng = np.random.default_rng(1)
    os.makedirs(os.path.join(system, "set.000"), exist_ok=True)
    with open(os.path.join(system, "type_map.raw"), "w") as f:
        f.write("Ni\nH\n")
    np.savetxt(os.path.join(system, "type.raw"), [0, 1, 1, 0][:n_atoms], fmt="%d")
    arrays = {"coord": rng.uniform(0, 5, (n_frames, 3 * n_atoms)), "force": rng.normal(size=(n_frames, 3 * n_atoms)),
              "energy": rng.normal(size=n_frames), "box": np.tile(TRICLINIC.reshape(1, 9), (n_frames, 1)),
              "virial": rng.normal(size=(n_frames, 9))}
    arrays.update(override)
    for name, a in arrays.items():
        if a is not None:
            np.save(os.path.join(system, "set.000", f"{name}.npy"), a)


def test_deepmd_system_and_sizes(tmp_path):
    good = str(tmp_path / "good")
    write_deepmd(good)
    frames = read_source(good)       # a system directory: all its sets
    assert len(frames) == 3 and frames[0].virial.shape == (3, 3) and species_in_order(frames) == ["Ni", "H"]
    assert np.allclose(frames[1].cell, TRICLINIC)
    for name, override, message in [
            ("short_force", {"force": np.zeros((3, 9))}, r"set.000: force.npy has shape \[3, 9\]; expected \[3, 12\]"),
            ("few_boxes", {"box": np.zeros((2, 9))}, r"box.npy has shape \[2, 9\]; expected \[3, 9\]"),
            ("no_energy", {"energy": None}, "energy.npy is missing")]:
        system = str(tmp_path / name)
        write_deepmd(system, **override)
        with pytest.raises(DataError, match=message):
            read_source(os.path.join(system, "set.000"))


def test_extxyz_and_deepmd_give_the_same_frames(tmp_path):
    """The same labelled frames written in both formats read back alike (to the 8 decimals of the text file)."""
    system = str(tmp_path / "sys")
    write_deepmd(system)
    deepmd = read_source(system)
    images = []
    for fr in deepmd:
        atoms = Atoms(fr.symbols.tolist(), positions=fr.positions, cell=fr.cell, pbc=True)
        atoms.calc = SinglePointCalculator(atoms, energy=fr.energy, forces=fr.forces)
        atoms.info["virial"] = fr.virial
        images.append(atoms)
    path = str(tmp_path / "same.xyz")
    ase.io.write(path, images, format="extxyz")
    xyz = read_source(path)
    prepare(deepmd, ["Ni", "H"], 4.0)
    prepare(xyz, ["Ni", "H"], 4.0)
    for a, b in zip(deepmd, xyz):
        assert np.array_equal(a.species, b.species) and a.pbc == b.pbc
        for name in ("positions", "cell", "forces", "virial"):
            assert np.allclose(getattr(a, name), getattr(b, name), rtol=0, atol=1e-7), name
        assert abs(a.energy - b.energy) < 1e-7
        assert np.array_equal(a.sender, b.sender) and np.array_equal(a.shifts, b.shifts)
