"""Reader for extended XYZ files (through ASE): energy, forces, optional stress or virial, cell and pbc per frame."""
from typing import List

import numpy as np

from .data import DataError, Frame
from .neighbors import complete_cell, wrap_positions


def _property(atoms, key, per_atom):
    """A property stored under `key` in the frame's info / arrays, or in the results ASE moved to atoms.calc."""
    store = atoms.arrays if per_atom else atoms.info
    if key in store:
        return store[key]
    calc = getattr(atoms, "calc", None)
    results = getattr(calc, "results", None) or {}
    return results.get(key)


def _as_matrix(value, where, key):
    """A 3x3 matrix from a 3x3, 9-component or 6-component Voigt (xx yy zz yz xz xy, ASE's order) value."""
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if v.size == 9:
        return v.reshape(3, 3)
    if v.size == 6:
        xx, yy, zz, yz, xz, xy = v
        return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    raise DataError(f"{where}: '{key}' has {v.size} components; expected 9 (3x3) or 6 (Voigt)")


def _virial(atoms, where, stress_key, virial_key):
    """Virial W (eV, W = -dE/dstrain, LAMMPS's sign: positive under compression) or None.

    A 'virial' is taken as given; a 'stress' (eV/A^3, ASE's sign: dE/dstrain / V) becomes W = -V stress."""
    virial = _property(atoms, virial_key, per_atom=False)
    stress = _property(atoms, stress_key, per_atom=False)
    if virial is None and stress is None:
        return None
    if not all(atoms.pbc):
        raise DataError(f"{where}: a stress or virial needs a cell periodic in all three directions "
                        f"(pbc is {atoms.pbc.tolist()})")
    if virial is not None:
        return _as_matrix(virial, where, virial_key)
    return -abs(np.linalg.det(atoms.cell.array)) * _as_matrix(stress, where, stress_key)


def _required(atoms, key, per_atom, where):
    """The energy (per_atom False) or forces (True) under `key` as float64; missing or non-finite is an error."""
    what, place, option = (("forces", "a per-atom column", "--forces-key") if per_atom
                           else ("energy", "a key of the comment line", "--energy-key"))
    value = _property(atoms, key, per_atom)
    if value is None:
        raise DataError(f"{where}: no {what} (looked for '{key}' as {place}; {option} names another key)")
    value = np.asarray(value, dtype=np.float64)
    if not np.isfinite(value).all():
        raise DataError(f"{where}: the {what} '{key}' contain non-finite values")
    return value


def frame_from_atoms(atoms, where, energy_key="energy", forces_key="forces", stress_key="stress",
                     virial_key="virial") -> Frame:
    """One Frame (species not yet assigned: `symbols` holds the element names); `where` names it in errors."""
    n = len(atoms)
    if n == 0:
        raise DataError(f"{where}: the frame has no atoms")
    energy = _required(atoms, energy_key, False, where)
    if energy.size != 1:
        raise DataError(f"{where}: the energy '{energy_key}' is {energy.tolist()}, not one number")
    forces = _required(atoms, forces_key, True, where)
    if forces.shape != (n, 3):
        raise DataError(f"{where}: forces have shape {list(forces.shape)} for {n} atoms; expected [{n}, 3]")
    pbc = tuple(bool(b) for b in atoms.pbc)
    try:
        cell = complete_cell(atoms.cell.array, pbc)
    except ValueError as e:
        raise DataError(f"{where}: {e}") from None
    virial = _virial(atoms, where, stress_key, virial_key)
    positions = np.asarray(atoms.positions, dtype=np.float64)
    return Frame(positions=wrap_positions(positions, cell, pbc), cell=cell, species=None, energy=float(energy),
                 forces=forces, pbc=pbc, virial=virial, symbols=np.array(atoms.get_chemical_symbols()),
                 origin=where)


def read_extxyz(path: str, **keys) -> List[Frame]:
    """All frames of an extended XYZ file; keys: energy_key, forces_key, stress_key, virial_key."""
    try:
        import ase.io
    except ImportError:
        raise DataError(f"{path}: reading extended XYZ needs ASE (Debian: apt-get install python3-ase)") from None
    frames = []
    images = ase.io.iread(path, index=":", format="extxyz")
    while True:
        where = f"{path} frame {len(frames)}"
        try:
            atoms = next(images)
        except StopIteration:
            break
        except Exception as e:  # ASE raises several types for malformed text; all mean a frame it cannot parse
            raise DataError(f"{where}: not readable as extended XYZ ({type(e).__name__}: {e})") from None
        frames.append(frame_from_atoms(atoms, where, **keys))
    if not frames:
        raise DataError(f"{path}: no frames")
    return frames
