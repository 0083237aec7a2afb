"""Reference fixtures for the C++ model and LAMMPS tests.

python -m batmobile.fixtures OUTDIR [--model potentials/water_fast.pt]

Writes OUTDIR/<case>.json (float64) for: water (a DFT frame), distorted (same frame, strained cell + random
displacements), isolated (one water molecule in a 40 A box), cutoff (a pair exactly at r_c plus a pair just
inside). Each file: species names, type indices, positions, cell, r_c, edge count, energy, atomic_energies, forces,
virial (3x3, W = -sum_edges r_ij (x) dE/dr_ij) and virial_lammps (xx, yy, zz, xy, xz, yz), atomic_virial_lammps
(N x 6; each edge tallies the symmetrised -(r_ij (x) g + g (x) r_ij) / 2, g = dE/dr_ij, split half to its receiver,
half to its sender).
"""
import argparse
import json
import os

import numpy as np
import torch

from .data import DEFAULT_ROOT, read_set
from .export import load_potential
from .model import evaluate_structure, virial_voigt
from .neighbors import neighbor_list, wrap_positions

DEFAULT_MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "potentials", "water_fast.pt")


def reference(model, positions, species, cell):
    positions = np.asarray(positions, dtype=np.float64)
    cell = np.asarray(cell, dtype=np.float64)
    s, r, sh = neighbor_list(positions, cell, model.hp.r_c)
    T = lambda x, dt=torch.float64: torch.as_tensor(x, dtype=dt)
    out = evaluate_structure(model, T(positions), T(species, torch.long), T(cell), T(s, torch.long),
                             T(r, torch.long), T(sh, torch.long), virial=True)
    return {
        "species": [model.hp.species[i] for i in species], "types": [int(i) for i in species],
        "positions": positions.tolist(), "cell": cell.tolist(), "pbc": [True, True, True],
        "r_c": model.hp.r_c, "num_edges": int(len(s)),
        "energy": out["energy"].item(), "atomic_energies": out["atomic_energies"].detach().tolist(),
        "forces": out["forces"].detach().tolist(), "virial": out["virial"].tolist(),
        "virial_lammps": virial_voigt(out["virial"]).tolist(),
        "atomic_virial_lammps": virial_voigt(out["atomic_virial"]).tolist(),
    }


def cases(model, data_root):
    sp = model.hp.species
    frame = read_set(data_root, "data_0/set.000", sp)[0]
    yield "water", frame.positions, frame.species, frame.cell
    rng = np.random.default_rng(7)
    strain = np.eye(3) + np.array([[0.02, 0.01, -0.015], [0.0, -0.01, 0.02], [0.0, 0.0, 0.015]])
    cell = frame.cell @ strain
    pos = wrap_positions(frame.positions @ strain + rng.normal(scale=0.05, size=frame.positions.shape), cell)
    yield "distorted", pos, frame.species, cell
    o, h = sp.index("O"), sp.index("H")
    molecule = np.array([[20.0, 20.0, 20.0], [20.9572, 20.0, 20.0], [19.7601, 20.9266, 20.0]])
    yield "isolated", molecule, np.array([o, h, h]), np.eye(3) * 40.0
    r_c = model.hp.r_c
    # atoms 0-1 exactly r_c apart (no edge: only d < r_c counts), atom 2 just inside r_c of atom 0
    pos = np.array([[10.0, 10.0, 10.0], [10.0 + r_c, 10.0, 10.0], [10.0, 10.0 + r_c - 1e-3, 10.0],
                    [11.0, 10.5, 10.2]])
    yield "cutoff", pos, np.array([o, h, h, o]), np.eye(3) * 30.0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--data", default=DEFAULT_ROOT)
    a = p.parse_args(argv)
    model = load_potential(a.model, torch.float64)
    os.makedirs(a.outdir, exist_ok=True)
    for name, pos, spc, cell in cases(model, a.data):
        ref = reference(model, pos, spc, cell)
        ref.update({"case": name, "model": os.path.abspath(a.model)})
        path = os.path.join(a.outdir, f"{name}.json")
        with open(path, "w") as f:
            json.dump(ref, f)
        print(f"wrote {path}: E = {ref['energy']:.10f} eV, {ref['num_edges']} edges")


if __name__ == "__main__":
    main()
