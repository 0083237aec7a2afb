"""The model file's weights checksum (python/batmobile/export.py tensors_checksum; the C++ loader computes the same,
checked through LAMMPS in tests/lammps/batmobile: pair_coeff logs "weights checksum verified" for these files)."""
import hashlib
import json
import os
import struct

import numpy as np
import pytest
import torch

from batmobile import export
from batmobile.export import add_checksum, load_potential, read_header, save_potential, tensors_checksum
from batmobile.model import BatmobileModel, Hyperparameters

POTENTIAL = os.path.join(os.path.dirname(__file__), "..", "..", "potentials", "water_fast.pt")


def small_model():
    hp = Hyperparameters(species=["O", "H"], r_c=4.0, L=1, C=4, T=1, NB=4, H=6, A=2, dk=2, Hr=4,
                         avg_num_neighbors=10.0, energy_scale=1.0, min_distance=0.8)
    return BatmobileModel(hp, seed=5)


def raw_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def flip_bit(path, out, name):
    """Copies the model file with the lowest bit of one value of buffer `name` flipped: torch.jit.save stores tensor
    data uncompressed, so the tensor's bytes occur verbatim in the archive."""
    data = raw_bytes(dict(torch.jit.load(path).named_buffers())[name])
    blob = bytearray(open(path, "rb").read())
    assert blob.count(data) == 1
    blob[blob.find(data) + 8 * 3] ^= 1
    open(out, "wb").write(bytes(blob))


def test_checksum_definition():
    """SHA-256 over the buffers sorted by name, each as "<name>\\n<dtype>\\n[<shape>]\\n" + little-endian data; the
    header buffer left out. Spelled out here byte by byte, independently of the implementation."""
    buffers = {"b.w": torch.tensor([[1.5], [-2.0]], dtype=torch.float64), "a": torch.tensor(3.0, dtype=torch.float64),
               "c": torch.tensor([7, 9], dtype=torch.int64),
               "meta.header_json": torch.tensor(list(b"{}"), dtype=torch.uint8)}
    h = hashlib.sha256()
    h.update(b"a\nfloat64\n[]\n" + struct.pack("<d", 3.0))
    h.update(b"b.w\nfloat64\n[2,1]\n" + struct.pack("<2d", 1.5, -2.0))
    h.update(b"c\nint64\n[2]\n" + struct.pack("<2q", 7, 9))
    assert tensors_checksum(buffers) == h.hexdigest()
    # every part counts: a value, a name, a shape, a dtype
    variants = [dict(buffers, a=torch.tensor(3.0000000000000004, dtype=torch.float64)),
                {("B.w" if k == "b.w" else k): v for k, v in buffers.items()},
                dict(buffers, **{"b.w": buffers["b.w"].reshape(1, 2)}),
                dict(buffers, c=buffers["c"].to(torch.int32))]
    assert len({tensors_checksum(v) for v in variants} | {h.hexdigest()}) == 5


def test_export_stores_checksum_and_loader_checks_it(tmp_path):
    path, flipped = str(tmp_path / "m.pt"), str(tmp_path / "flipped.pt")
    save_potential(small_model(), path)
    header = read_header(path)
    buffers = dict(torch.jit.load(path).named_buffers())
    assert header["checksum"] == "sha256:" + tensors_checksum(buffers)
    load_potential(path)
    flip_bit(path, flipped, "layers.0.mix.Wm0")
    changed = dict(torch.jit.load(flipped).named_buffers())["layers.0.mix.Wm0"]
    assert int((changed != buffers["layers.0.mix.Wm0"]).sum()) == 1 and torch.isfinite(changed).all()
    with pytest.raises(ValueError, match="corrupted or altered"):
        load_potential(flipped)
    with pytest.raises(ValueError, match="corrupted or altered"):
        add_checksum(flipped, str(tmp_path / "again.pt"))


def test_add_checksum_keeps_every_tensor(tmp_path):
    """A file without checksum (an older exporter: the header as before, no "checksum" key) gets one; every buffer
    stays bit-identical, and the command line does the same."""
    old, new, cli = (str(tmp_path / n) for n in ("old.pt", "new.pt", "cli.pt"))
    root = export.build_export_module(small_model())
    header = json.loads(bytes(root.meta.header_json.tolist()).decode())
    del header["checksum"]
    root.meta.header_json = torch.tensor(list(json.dumps(header).encode()), dtype=torch.uint8)
    torch.jit.save(torch.jit.script(root), old)
    assert "checksum" not in read_header(old)
    add_checksum(old, new)
    export.main(["--add-checksum", old, cli])
    a, b = dict(torch.jit.load(old).named_buffers()), dict(torch.jit.load(new).named_buffers())
    assert set(a) == set(b)
    for k in a:
        if k != "meta.header_json":
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and raw_bytes(a[k]) == raw_bytes(b[k])
    assert read_header(new) == dict(header, checksum="sha256:" + tensors_checksum(a))
    assert read_header(cli) == read_header(new)


def test_shipped_potential_has_a_valid_checksum():
    header = read_header(POTENTIAL)
    assert header["checksum"] == "sha256:" + tensors_checksum(dict(torch.jit.load(POTENTIAL).named_buffers()))
    assert np.isfinite(load_potential(POTENTIAL).E_ref.detach().numpy()).all()
