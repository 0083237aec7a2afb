"""Writes a randomly initialised (fixed seed) Batmobile model file and float64 reference results for the C++
model tests, using the PyTorch reference model (python/batmobile/model.py, autograd forces/virials).

    PYTHONPATH=python /usr/bin/python3 tests/model/make_reference.py OUTDIR

Writes OUTDIR/model_double.pt (and variants for the loader tests) and OUTDIR/ref_<name>.txt (one
"key n v1 ... vn" line per quantity). The exporter below follows docs/model.md "Model file" directly; if the
Python package provides its own exporter (batmobile.export), that one is used so the contract is tested end to end.
"""
import hashlib
import json
import math
import os
import sys

import numpy as np
import torch

from batmobile.model import BatmobileModel, Hyperparameters, evaluate_structure, virial_voigt
from batmobile.neighbors import neighbor_list

torch.set_default_dtype(torch.float64)


class _Holder(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self) -> int:
        return 0


def _module_tree(buffers):
    root = _Holder()
    for name, value in buffers.items():
        parts = name.split(".")
        mod = root
        for p in parts[:-1]:
            if not hasattr(mod, p):
                mod.add_module(p, _Holder())
            mod = getattr(mod, p)
        mod.register_buffer(parts[-1], value)
    return root


def _tensor_stream(buffers):
    """docs/model.md "Model checksum": every buffer but meta.header_json by ascending name, each as
    "<name>\\n<dtype>\\n[<d0>,...]\\n" followed by its little-endian bytes (independently of batmobile.export)."""
    out = b""
    for name in sorted(k for k in buffers if k != "meta.header_json"):
        a = buffers[name].contiguous().numpy()
        dtype = str(buffers[name].dtype).replace("torch.", "")
        out += f"{name}\n{dtype}\n[{','.join(map(str, a.shape))}]\n".encode()
        out += a.astype(a.dtype.newbyteorder("<")).tobytes()
    return out


def export_contract(model, path, header_overrides=None, drop=None, version=2, v1_checksum=False):
    """docs/model.md "Model file": float64 buffers with the parameter names, meta.<key>, meta.header_json. Version 2:
    the header ends with its checksum member (docs/model.md "Model checksum"); version 1: no checksum, or with
    v1_checksum the version-1 checksum over the tensors alone."""
    hp = model.hp
    buffers = {}
    for name, t in list(model.named_parameters()) + [("E_ref", model.E_ref)]:
        buffers[name] = t.detach().to(torch.float64).clone()
    keys = ["r_c", "L", "C", "T", "NB", "H", "A", "dk", "Hr", "avg_num_neighbors", "energy_scale", "min_distance"]
    for key in keys + (["correlation"] if version >= 3 else []):
        buffers["meta." + key] = torch.tensor(float(getattr(hp, key)), dtype=torch.float64)
    header = {"format": "batmobile", "version": version, "species": list(hp.species), "units": "metal"}
    header.update(header_overrides or {})
    for d in drop or []:
        buffers.pop(d)
    canonical = json.dumps(header).encode()
    if version >= 2:
        digest = hashlib.sha256(str(len(canonical)).encode() + b"\n" + canonical + _tensor_stream(buffers)).hexdigest()
        stored = canonical[:-1] + b', "checksum": "sha256:' + digest.encode() + b'"}'
    elif v1_checksum:
        digest = hashlib.sha256(_tensor_stream(buffers)).hexdigest()
        stored = json.dumps(dict(header, checksum="sha256:" + digest)).encode()
    else:
        stored = canonical
    buffers["meta.header_json"] = torch.tensor(list(stored), dtype=torch.uint8)
    torch.jit.save(torch.jit.script(_module_tree(buffers)), path)


def alter_header(src, dst, change):
    """A copy of the model file src whose header JSON is edited by change(header) (a dict, keys in the stored order,
    so the checksum member stays last and unchanged), every tensor as it was: a hand-edited header."""
    buffers = dict(torch.jit.load(src, map_location="cpu").named_buffers())
    header = json.loads(bytes(buffers["meta.header_json"].tolist()).decode())
    change(header)
    buffers["meta.header_json"] = torch.tensor(list(json.dumps(header).encode()), dtype=torch.uint8)
    torch.jit.save(torch.jit.script(_module_tree(buffers)), dst)


def flip_weight_bit(path, out, name="layers.0.mix.Wm0"):
    """A copy of the model file with the lowest mantissa bit of one value of tensor `name` flipped (still finite and
    of the right shape, only the checksum tells): torch.jit.save stores tensor data uncompressed, so the tensor's
    bytes occur verbatim in the archive."""
    data = dict(torch.jit.load(path).named_buffers())[name].contiguous().numpy().tobytes()
    blob = bytearray(open(path, "rb").read())
    if blob.count(data) != 1:
        raise RuntimeError(f"{path}: the bytes of {name} do not occur exactly once")
    blob[blob.find(data) + 8 * 3] ^= 1
    with open(out, "wb") as f:
        f.write(bytes(blob))


def make_model(T=2, seed=1234, correlation=1, L=2):
    hp = Hyperparameters(species=["O", "H"], r_c=4.0, L=L, C=8, T=T, NB=6, H=12, A=2, dk=4, Hr=8,
                         avg_num_neighbors=12.0, energy_scale=0.7, min_distance=0.8, correlation=correlation)
    model = BatmobileModel(hp, seed=seed)
    with torch.no_grad():
        model.E_ref.copy_(torch.tensor([-2.5, -0.4]))
        # non-trivial biases and norm gains so that every term of the adjoint is exercised, and product-basis path
        # weights of order 1 (they start small in training) so that its terms weigh in the comparison
        g = torch.Generator().manual_seed(99)
        for name, p in model.named_parameters():
            if name.endswith(("b1", "b0", "bg", "b2")) or ".norm.g" in name:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
            if name.endswith("product.wq"):
                p.copy_(torch.randn(p.shape, generator=g))
    return model


def configurations():
    rng = np.random.default_rng(7)
    confs = {}
    # periodic box smaller than 2 r_c: several images of the same atom are neighbours
    n = 9
    cell = np.array([[5.5, 0.0, 0.0], [0.4, 6.0, 0.0], [-0.3, 0.5, 5.8]])
    frac = rng.random((n, 3))
    pos = frac @ cell
    confs["periodic"] = (pos, cell, (True, True, True), rng.integers(0, 2, n))
    # isolated cluster (no periodicity), includes a nearly isolated atom
    pos = rng.normal(scale=1.6, size=(7, 3))
    pos[6] = [9.0, 0.0, 0.0]
    confs["cluster"] = (pos, np.eye(3) * 30.0, (False, False, False), np.array([0, 1, 1, 0, 1, 0, 1]))
    return confs


def reference(model, pos, cell, pbc, species):
    sender, receiver, shifts = neighbor_list(pos, cell, model.hp.r_c, pbc)
    out = evaluate_structure(model, torch.tensor(pos), torch.tensor(species), torch.tensor(cell),
                             torch.tensor(sender), torch.tensor(receiver), torch.tensor(shifts), virial=True)
    return {
        "energy": [out["energy"].item()],
        "atomic_energies": out["atomic_energies"].detach().numpy().ravel(),
        "forces": out["forces"].detach().numpy().ravel(),
        "virial": virial_voigt(out["virial"]).detach().numpy().ravel(),
        "atomic_virial": virial_voigt(out["atomic_virial"]).detach().numpy().ravel(),
    }


def write_ref(path, pos, cell, pbc, species, ref):
    with open(path, "w") as f:
        def line(key, vals):
            vals = list(np.asarray(vals, dtype=np.float64).ravel())
            f.write(key + " " + str(len(vals)) + " " + " ".join(repr(float(v)) for v in vals) + "\n")
        line("cell", cell)
        line("pbc", [float(b) for b in pbc])
        line("species", species)
        line("positions", pos)
        for k, v in ref.items():
            line(k, v)


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    model = make_model()
    export_contract(model, os.path.join(outdir, "model_double.pt"))
    # loader error cases
    export_contract(model, os.path.join(outdir, "bad_version.pt"), {"version": 99})
    export_contract(model, os.path.join(outdir, "bad_format.pt"), {"format": "nequip"})
    export_contract(model, os.path.join(outdir, "bad_units.pt"), {"units": "real"})
    export_contract(model, os.path.join(outdir, "missing_tensor.pt"), drop=["layers.1.mix.Wo2"])
    # the checksum (docs/model.md "Model checksum"): version-1 files without and with their tensors-only checksum;
    # version-2 files with the species order swapped in the header, a weight bit flipped, no checksum member
    export_contract(model, os.path.join(outdir, "v1_no_checksum.pt"), version=1)
    export_contract(model, os.path.join(outdir, "v1_checksum.pt"), version=1, v1_checksum=True)
    alter_header(os.path.join(outdir, "model_double.pt"), os.path.join(outdir, "header_species_swapped.pt"),
                 lambda h: h.update(species=h["species"][::-1]))
    flip_weight_bit(os.path.join(outdir, "model_double.pt"), os.path.join(outdir, "weights_flipped.pt"))
    export_contract(model, os.path.join(outdir, "v2_no_checksum.pt"), version=1)
    alter_header(os.path.join(outdir, "v2_no_checksum.pt"), os.path.join(outdir, "v2_no_checksum.pt"),
                 lambda h: h.update(version=2))
    with open(os.path.join(outdir, "model_double.pt"), "rb") as f:
        blob = f.read()
    with open(os.path.join(outdir, "corrupt.pt"), "wb") as f:
        f.write(blob[: len(blob) // 3])
    for name, (pos, cell, pbc, species) in configurations().items():
        write_ref(os.path.join(outdir, f"ref_{name}.txt"), pos, cell, pbc, species,
                  reference(model, pos, cell, pbc, species))
    # three layers: the adjoint's per-layer buffers alternate twice, ghost features are exchanged twice
    model3 = make_model(T=3, seed=4321)
    export_contract(model3, os.path.join(outdir, "model_t3_double.pt"))
    pos, cell, pbc, species = configurations()["periodic"]
    write_ref(os.path.join(outdir, "ref_t3_periodic.txt"), pos, cell, pbc, species,
              reference(model3, pos, cell, pbc, species))
    # one layer: it is both the first and the last layer (the fused model runs it as an embedding-input layer)
    model1 = make_model(T=1, seed=2468)
    export_contract(model1, os.path.join(outdir, "model_t1_double.pt"))
    pos, cell, pbc, species = configurations()["periodic"]
    write_ref(os.path.join(outdir, "ref_t1_periodic.txt"), pos, cell, pbc, species,
              reference(model1, pos, cell, pbc, species))
    # the product basis (correlation 2, format version 3) in layers 0 and 1 of three, and its loader errors
    model_c2 = make_model(T=3, seed=1357, correlation=2)
    export_contract(model_c2, os.path.join(outdir, "model_c2_double.pt"), version=3)
    for name, (pos, cell, pbc, species) in configurations().items():
        write_ref(os.path.join(outdir, f"ref_c2_{name}.txt"), pos, cell, pbc, species,
                  reference(model_c2, pos, cell, pbc, species))
    export_contract(model_c2, os.path.join(outdir, "c2_missing_product.pt"), version=3,
                    drop=["layers.1.product.Wp2"])
    export_contract(model_c2, os.path.join(outdir, "c2_header_disagrees.pt"), {"correlation": 1}, version=3)
    model_c2.hp.correlation = 3
    export_contract(model_c2, os.path.join(outdir, "c2_correlation3.pt"), version=3)
    model_c2.hp.correlation = 2
    model_c2.hp.T = 1
    export_contract(model_c2, os.path.join(outdir, "c2_one_layer.pt"), version=3)
    model_c2.hp.T = 3
    pos, cell, pbc, species = leaver_configuration(model)
    write_ref(os.path.join(outdir, "ref_leaver.txt"), pos, cell, pbc, species, reference(model, pos, cell, pbc, species))
    python_package_fixtures(model, outdir)
    # the cutoff edited in the header of the package exporter's file (its header repeats the hyperparameters)
    def longer_cutoff(h):
        h["r_c"] += 1.0
        h["hyperparameters"]["r_c"] += 1.0
    alter_header(os.path.join(outdir, "model_pyexport.pt"), os.path.join(outdir, "header_cutoff_altered.pt"),
                 longer_cutoff)
    print("wrote", outdir)


def layer0_logits(model, receiver_species, sender_species, d):
    """docs/model.md step 2 in layer 0 (h = embedding): s_a = q_i[a] . k_j[a] / sqrt(dk) + Wg[a] . B(d)."""
    hp, layer = model.hp, model.layers[0]
    with torch.no_grad():
        q = (layer.attn.Wq @ model.embed[receiver_species]).reshape(hp.A, hp.dk)
        k = (layer.attn.Wk @ model.embed[sender_species]).reshape(hp.A, hp.dk)
        n = torch.arange(1, hp.NB + 1, dtype=torch.float64)
        B = math.sqrt(2.0 / hp.r_c) * torch.sin(n * math.pi * d / hp.r_c) / d
        return ((q * k).sum(-1) / math.sqrt(hp.dk) + layer.gate.Wg @ B).numpy()


def leaver_configuration(model):
    """Four O atoms (no periodicity); atom 3 sits exactly at r_c from atom 0 along -y (no edge) and, for receiver 0,
    holds the largest layer-0 logit of every head; the C++ test moves it across r_c (E must stay continuous)."""
    r_c = model.hp.r_c
    base = np.array([[10.0, 10.0, 10.0], [11.0, 10.3, 9.8], [9.4, 10.9, 10.2]])
    pos = np.vstack([base, [10.0, 10.0 - r_c, 10.0]])
    assert min(np.linalg.norm(pos[3] - pos[j]) for j in (1, 2)) > r_c + 0.1
    s_leaver = layer0_logits(model, 0, 0, r_c)
    for j in (1, 2):
        assert np.all(s_leaver > layer0_logits(model, 0, 0, np.linalg.norm(base[j] - base[0]))), "premise"
    return pos, np.eye(3) * 30.0, (False, False, False), np.array([0, 0, 0, 0])


def python_package_fixtures(model, outdir):
    """The same model through the Python package's own exporter and `python -m batmobile.fixtures` (water frame,
    strained/displaced frame, isolated molecule, pair exactly at r_c): model_pyexport.pt + ref_py_<case>.txt."""
    from batmobile.export import save_potential
    from batmobile import fixtures
    path = os.path.join(outdir, "model_pyexport.pt")
    save_potential(model, path)
    fixdir = os.path.join(outdir, "py_fixtures")
    fixtures.main([fixdir, "--model", path])
    for fname in sorted(os.listdir(fixdir)):
        if not fname.endswith(".json"):
            continue
        with open(os.path.join(fixdir, fname)) as f:
            fx = json.load(f)
        ref = {"energy": [fx["energy"]], "atomic_energies": fx["atomic_energies"], "forces": fx["forces"],
               "virial": fx["virial_lammps"], "atomic_virial": fx["atomic_virial_lammps"]}
        write_ref(os.path.join(outdir, "ref_py_" + fname[:-5] + ".txt"), np.array(fx["positions"]),
                  np.array(fx["cell"]), fx["pbc"], fx["types"], ref)


if __name__ == "__main__":
    main(sys.argv[1])
