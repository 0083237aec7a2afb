"""Reference data for the LAMMPS-level Batmobile tests: the seeded random model of tests/model (plus broken
variants for the error tests) and float64 PyTorch results for the 216-water box (LAMMPS data file included); the
same for a model with the product basis (correlation 2, format version 3): model_c2.pt and ref_water_c2.txt, and for
a model of degree L = 3: model_l3.pt and ref_water_l3.txt.

    PYTHONPATH=python /usr/bin/python3 tests/lammps/batmobile/make_lammps_reference.py OUTDIR
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "model"))
import make_reference as mr  # noqa: E402  (tests/model/make_reference.py: model, exporter, reference)
from batmobile.export import file_version, save_potential, upgrade  # noqa: E402

# the copy in the example folder (also present on machines without /work/shared)
WATER = os.path.join(HERE, "..", "..", "..", "examples", "lammps_inputs", "water216", "water216_start.lmp")


def read_lammps_data(path):
    with open(path) as f:
        lines = f.read().splitlines()
    box = []
    atoms = []
    in_atoms = False
    for line in lines:
        s = line.split("#")[0].split()
        if len(s) == 4 and s[2].endswith("lo"):
            box.append((float(s[0]), float(s[1])))
        if line.startswith("Atoms"):
            in_atoms = True
            continue
        if in_atoms and len(s) == 5:
            atoms.append((int(s[0]), int(s[1]), float(s[2]), float(s[3]), float(s[4])))
        elif in_atoms and s and len(s) != 5:
            in_atoms = False
    atoms.sort()
    types = np.array([a[1] for a in atoms])
    pos = np.array([a[2:] for a in atoms])
    lo = np.array([b[0] for b in box])
    cell = np.diag([b[1] - b[0] for b in box])
    return pos - lo, types, cell


def write_data(path, pos, types, cell, title):
    with open(path, "w") as f:
        f.write(f"{title}\n\n{len(pos)} atoms\n2 atom types\n\n")
        for k, ax in enumerate("xyz"):
            f.write(f"0.0 {cell[k, k]:.17g} {ax}lo {ax}hi\n")
        f.write("\nMasses\n\n1 15.9994\n2 1.00794\n\nAtoms # atomic\n\n")
        for i, (t, p) in enumerate(zip(types, pos)):
            f.write(f"{i + 1} {t} {p[0]:.17g} {p[1]:.17g} {p[2]:.17g}\n")


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    model = mr.make_model()
    # the test model in format version 1, as older exporters wrote it: without a checksum, with the tensors-only one
    # (and one weight bit flipped); upgraded by batmobile.export to version 2 (checksum over header and tensors), so
    # that "verified" means the C++ loader computes Python's checksum; version 2 with one weight bit flipped and with
    # the species order swapped in the header (the checksum member unchanged)
    out = lambda name: os.path.join(outdir, name)  # noqa: E731
    mr.export_contract(model, out("model_no_checksum.pt"), version=1)
    mr.export_contract(model, out("model_v1.pt"), version=1, v1_checksum=True)
    mr.flip_weight_bit(out("model_v1.pt"), out("model_v1_flipped.pt"))
    upgrade(out("model_v1.pt"), out("model.pt"))
    mr.flip_weight_bit(out("model.pt"), out("model_flipped.pt"))
    mr.alter_header(out("model.pt"), out("model_species_swapped.pt"), lambda h: h.update(species=h["species"][::-1]))
    mr.export_contract(model, os.path.join(outdir, "bad_version.pt"), {"version": 99})
    with open(os.path.join(outdir, "model.pt"), "rb") as f:
        blob = f.read()
    with open(os.path.join(outdir, "corrupt.pt"), "wb") as f:
        f.write(blob[: len(blob) // 2])
    pos, types, cell = read_lammps_data(WATER)
    # thermal-like displacements so that forces are not those of a relaxed structure
    pos = pos + np.random.default_rng(3).normal(scale=0.03, size=pos.shape)
    write_data(os.path.join(outdir, "water.data"), pos, types, cell, "216 water, displaced (Batmobile LAMMPS test)")
    species = types - 1  # type 1 = O = species 0, type 2 = H = species 1
    ref = mr.reference(model, pos, cell, (True, True, True), species)
    mr.write_ref(os.path.join(outdir, "ref_water.txt"), pos, cell, (True, True, True), species, ref)
    write_product_basis_model(outdir, pos, cell, species)
    write_degree_3_model(outdir, pos, cell, species)
    # oxygen only: what `pair_coeff * * batmobile model.pt O NULL` under pair_style hybrid must reproduce
    sel = species == 0
    ref_o = mr.reference(model, pos[sel], cell, (True, True, True), species[sel])
    mr.write_ref(os.path.join(outdir, "ref_water_oxygen.txt"), pos[sel], cell, (True, True, True), species[sel], ref_o)
    # slab with vacuum: on 4 ranks (1x1x4 grid) some ranks own no atoms and have no ghosts but must still take
    # part in the collective ghost-feature exchange between layers
    slab_cell = np.diag([cell[0, 0], cell[1, 1], 3.0 * cell[2, 2]])
    write_data(os.path.join(outdir, "slab.data"), pos, types, slab_cell, "water slab with vacuum")
    ref_slab = mr.reference(model, pos, slab_cell, (True, True, True), species)
    mr.write_ref(os.path.join(outdir, "ref_slab.txt"), pos, slab_cell, (True, True, True), species, ref_slab)
    # two atoms closer than half of min_distance (0.8 A) for the error test
    close = pos.copy()
    close[1] = close[0] + np.array([0.3, 0.0, 0.0])
    write_data(os.path.join(outdir, "water_close.data"), close, types, cell, "atoms too close")
    # a thin slab: box thinner than the cutoff along z
    thin = np.diag([18.64, 18.64, 3.0])
    sel = pos[:, 2] < 3.0
    write_data(os.path.join(outdir, "thin.data"), pos[sel], types[sel], thin, "thin box")
    print("wrote", outdir)


def write_product_basis_model(outdir, pos, cell, species):
    """The product basis (correlation 2, docs/model.md step 3) through LAMMPS: the C++ model tests' correlation-2
    model (tests/model/make_reference.py, model_c2_double.pt: three layers, so that layers 0 and 1 carry the product
    basis and the ghost features pass through it twice) written by the package's exporter (format version 3, as
    users get it) as model_c2.pt, and its float64 PyTorch reference on the displaced water box as ref_water_c2.txt.
    Its path weights wq are of order 1 (make_model; they start small in training): without the product basis the
    forces differ by about 5e-2 of their largest value, the energy by 7e-5, far above the tests' 1e-9."""
    model = mr.make_model(T=3, seed=1357, correlation=2)
    wq = [p.detach().abs().max().item() for name, p in model.named_parameters() if name.endswith("product.wq")]
    if len(wq) != 2 or min(wq) < 0.5 or file_version(model.hp) != 3:
        raise RuntimeError(f"the correlation-2 test model should have product weights wq of order 1 in its first two "
                           f"layers and be written as format version 3 (max |wq| per layer {wq}, version "
                           f"{file_version(model.hp)})")
    save_potential(model, os.path.join(outdir, "model_c2.pt"))
    ref = mr.reference(model, pos, cell, (True, True, True), species)
    mr.write_ref(os.path.join(outdir, "ref_water_c2.txt"), pos, cell, (True, True, True), species, ref)


def write_degree_3_model(outdir, pos, cell, species):
    """Features of degree L = 3 through LAMMPS (model_l3.pt, ref_water_l3.txt): three layers, so that the middle one
    runs the general kernels with every natural-parity path of L = 3 and the outer ones the L = 3 role kernels."""
    model = mr.make_model(T=3, seed=2468, L=3)
    save_potential(model, os.path.join(outdir, "model_l3.pt"))
    ref = mr.reference(model, pos, cell, (True, True, True), species)
    mr.write_ref(os.path.join(outdir, "ref_water_l3.txt"), pos, cell, (True, True, True), species, ref)


if __name__ == "__main__":
    main(sys.argv[1])
