"""The model file's checksum (python/batmobile/export.py; docs/model.md "Model checksum"). Format version 2: SHA-256
over the canonical header (the stored header without its last member, the checksum) and the tensors; version 1:
over the tensors alone, or none. The C++ loader computes the same (tests/model: ModelLoader.Checksum; through
LAMMPS in tests/lammps/batmobile: pair_coeff logs "model checksum verified (header and weights" for these files)."""
import glob
import hashlib
import json
import os
import shutil
import struct
import warnings

import numpy as np
import pytest
import torch

from batmobile import export
from batmobile.export import (load_potential, model_checksum, read_header, save_potential, split_header,
                              tensors_checksum, upgrade)
from batmobile.model import BatmobileModel, Hyperparameters

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
POTENTIAL = os.path.join(ROOT, "potentials", "water_fast.pt")
BUNDLED = sorted(glob.glob(os.path.join(ROOT, "potentials", "**", "*.pt"), recursive=True) +
                 glob.glob(os.path.join(ROOT, "examples", "**", "*.pt"), recursive=True))


def small_model():
    hp = Hyperparameters(species=["O", "H"], r_c=4.0, L=1, C=4, T=1, NB=4, H=6, A=2, dk=2, Hr=4,
                         avg_num_neighbors=10.0, energy_scale=1.0, min_distance=0.8)
    return BatmobileModel(hp, seed=5)


def raw_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def buffers_of(path):
    return {k: v for k, v in torch.jit.load(path).named_buffers()}


def stored_header(path):
    return bytes(buffers_of(path)["meta.header_json"].tolist())


def flip_bit(path, out, name):
    """Copies the model file with the lowest bit of one value of buffer `name` flipped: torch.jit.save stores tensor
    data uncompressed, so the tensor's bytes occur verbatim in the archive."""
    data = raw_bytes(buffers_of(path)[name])
    blob = bytearray(open(path, "rb").read())
    assert blob.count(data) == 1
    blob[blob.find(data) + 8 * 3] ^= 1
    open(out, "wb").write(bytes(blob))


def rewrite_header(path, out, change):
    """Copies the model file with its header JSON edited by change(header) and written back with json.dumps: the
    keys keep their order, so the "checksum" member stays the last one, unchanged; every tensor stays as it was.
    What an edit of the header by hand gives."""
    root = torch.jit.load(path)
    header = json.loads(stored_header(path).decode())
    change(header)
    root.meta.header_json = torch.tensor(list(json.dumps(header).encode()), dtype=torch.uint8)
    torch.jit.save(root, out)


def write_v1(path, checksum=True, header_hyperparameters=True):
    """The small model as the version-1 exporter wrote it: header without "batmobile_version", meta.version 1, and
    the tensors-only checksum (or none). header_hyperparameters=False: without the header's "hyperparameters"
    object either, as docs/model.md defines the file (the numbers are the meta.<key> buffers)."""
    root = export.build_export_module(small_model())
    header = json.loads(bytes(root.meta.header_json.tolist()).decode())
    del header["checksum"], header["batmobile_version"]
    if not header_hyperparameters:
        del header["hyperparameters"]
    header["version"] = 1
    root.meta.version = torch.tensor(1.0, dtype=torch.float64)
    if checksum:
        tensors = {k: v for k, v in root.named_buffers() if k != "meta.header_json"}
        header["checksum"] = "sha256:" + tensors_checksum(tensors)
    root.meta.header_json = torch.tensor(list(json.dumps(header).encode()), dtype=torch.uint8)
    torch.jit.save(torch.jit.script(root), path)
    return header


def test_tensors_checksum_definition():
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


def test_model_checksum_definition():
    """Version 2: SHA-256 over "<byte count of the canonical header>\\n", the canonical header, then the tensors as
    in version 1. The canonical header is the stored one without its last member `, "checksum": "sha256:<hex>"`.
    The C++ test ModelLoader.ChecksumDefinition checks the same digest."""
    canonical = b'{"a": 1}'
    buffers = {"x": torch.tensor([1.5], dtype=torch.float64), "b": torch.tensor([7], dtype=torch.int64)}
    want = hashlib.sha256(b"8\n" + canonical + b"b\nint64\n[1]\n" + struct.pack("<q", 7) +
                          b"x\nfloat64\n[1]\n" + struct.pack("<d", 1.5)).hexdigest()
    assert want == "492467c2c7ac15b38d0f3b1142425db4f85558895ced85e1552a2e4bdccb58a6"
    assert model_checksum(canonical, buffers) == want
    stored = export.encode_header({"a": 1}, buffers)
    assert stored == b'{"a": 1, "checksum": "sha256:' + want.encode() + b'"}'
    assert split_header(stored) == (canonical, want)
    # not the last member, other spacing, upper-case digits: not a version-2 checksum member
    for bad in (b'{"checksum": "sha256:' + want.encode() + b'", "a": 1}',
                b'{"a": 1,"checksum":"sha256:' + want.encode() + b'"}',
                b'{"a": 1, "checksum": "sha256:' + want.upper().encode() + b'"}'):
        assert split_header(bad) == (bad, None)
    # the header counts: another key order, a value, a byte of spacing
    others = [model_checksum(c, buffers) for c in (b'{"a": 2}', b'{"a":1}', b'{"a": 1} ')]
    assert len(set(others) | {want}) == 4


def test_export_stores_checksum_and_loader_checks_it(tmp_path):
    path, flipped = str(tmp_path / "m.pt"), str(tmp_path / "flipped.pt")
    save_potential(small_model(), path)
    header = read_header(path)
    assert header["version"] == 2 and header["batmobile_version"] == export.package_version()
    assert list(header)[-1] == "checksum"
    canonical, digest = split_header(stored_header(path))
    assert header["checksum"] == "sha256:" + digest == "sha256:" + model_checksum(canonical, buffers_of(path))
    assert json.loads(canonical) == {k: v for k, v in header.items() if k != "checksum"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a version-2 file loads without a warning
        load_potential(path)
    flip_bit(path, flipped, "layers.0.mix.Wm0")
    changed = buffers_of(flipped)["layers.0.mix.Wm0"]
    assert int((changed != buffers_of(path)["layers.0.mix.Wm0"]).sum()) == 1 and torch.isfinite(changed).all()
    with pytest.raises(ValueError, match="the header .* or the weights were altered"):
        load_potential(flipped)
    with pytest.raises(ValueError, match="not written"):
        upgrade(flipped, str(tmp_path / "again.pt"))


@pytest.mark.parametrize("what", ["species order", "cutoff", "hyperparameter", "version string", "checksum gone"])
def test_altered_header_is_detected(tmp_path, what):
    """Issue #62: `O H` -> `H O` in the header of a file with the weights untouched used to load as "verified" and
    run wrong physics. Now any edit of the header fails the checksum."""
    path, edited = str(tmp_path / "m.pt"), str(tmp_path / "edited.pt")
    save_potential(small_model(), path)
    change = {"species order": lambda h: h.update(species=h["species"][::-1]),
              "cutoff": lambda h: (h.update(r_c=h["r_c"] + 1.0), h["hyperparameters"].update(r_c=h["r_c"])),
              "hyperparameter": lambda h: h["hyperparameters"].update(avg_num_neighbors=1.0),
              "version string": lambda h: h.update(batmobile_version="0.0.1"),
              "checksum gone": lambda h: h.pop("checksum")}[what]
    rewrite_header(path, edited, change)
    assert stored_header(edited) != stored_header(path)
    assert {k: raw_bytes(v) for k, v in buffers_of(edited).items() if k != "meta.header_json"} == \
        {k: raw_bytes(v) for k, v in buffers_of(path).items() if k != "meta.header_json"}
    message = "does not end with its checksum member" if what == "checksum gone" else \
        r"the model checksum does not match \(stored sha256:.*the header \(species, cutoff, hyperparameters\) or the " \
        r"weights were altered"
    with pytest.raises(ValueError, match=message):
        load_potential(edited)


def test_upgrade_keeps_every_tensor(tmp_path):
    """A version-1 file (tensors-only checksum) loads with a warning; --upgrade writes it as version 2: every buffer
    bit-identical but meta.version, the header the same but version, batmobile_version, upgraded_from_version and
    the checksum. The command line does the same; upgrading a version-2 file copies it."""
    old, new, cli, again = (str(tmp_path / n) for n in ("old.pt", "new.pt", "cli.pt", "again.pt"))
    header = write_v1(old)
    with pytest.warns(UserWarning, match="version 1: its checksum covers the weights but not the header .* upgrade "
                                         "it with: python -m batmobile.export --upgrade"):
        load_potential(old)
    checksum = upgrade(old, new)
    export.main(["--upgrade", old, cli])
    a, b = buffers_of(old), buffers_of(new)
    assert set(a) == set(b)
    for k in a:
        if k not in ("meta.header_json", "meta.version"):
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and raw_bytes(a[k]) == raw_bytes(b[k])
    assert float(a["meta.version"]) == 1.0 and float(b["meta.version"]) == 2.0
    got = read_header(new)
    assert got["checksum"] == checksum
    assert got["version"] == 2 and got["upgraded_from_version"] == 1
    assert got["batmobile_version"] == export.package_version()
    drop = ("version", "checksum", "batmobile_version", "upgraded_from_version")
    assert {k: v for k, v in got.items() if k not in drop} == {k: v for k, v in header.items() if k not in drop}
    assert stored_header(cli) == stored_header(new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = load_potential(new)
    with pytest.warns(UserWarning):
        ref = load_potential(old)
    assert m.hp == ref.hp and all(torch.equal(p, q) for p, q in zip(m.state_dict().values(),
                                                                    ref.state_dict().values()))
    # version 2 in: verified and copied unchanged
    assert upgrade(new, again) == checksum and open(again, "rb").read() == open(new, "rb").read()
    # the former name of the option still works
    export.main(["--add-checksum", old, str(tmp_path / "alias.pt")])
    assert stored_header(str(tmp_path / "alias.pt")) == stored_header(new)


def test_upgrade_of_a_file_without_checksum_and_of_a_damaged_one(tmp_path):
    bare, flipped = str(tmp_path / "bare.pt"), str(tmp_path / "flipped.pt")
    write_v1(bare, checksum=False)
    with pytest.warns(UserWarning, match="version 1: it carries no checksum"):
        load_potential(bare)
    upgrade(bare, str(tmp_path / "bare2.pt"))
    load_potential(str(tmp_path / "bare2.pt"))
    # a file with the hyperparameters only as meta.<key> numbers (docs/model.md) upgrades and loads the same model
    minimal = str(tmp_path / "minimal.pt")
    write_v1(minimal, checksum=False, header_hyperparameters=False)
    upgrade(minimal, str(tmp_path / "minimal2.pt"))
    assert load_potential(str(tmp_path / "minimal2.pt")).hp == load_potential(str(tmp_path / "bare2.pt")).hp
    write_v1(str(tmp_path / "v1.pt"))
    flip_bit(str(tmp_path / "v1.pt"), flipped, "layers.0.mix.Wm0")
    with pytest.raises(ValueError, match="the weights are corrupted or altered.*not written"):
        upgrade(flipped, str(tmp_path / "no.pt"))
    assert not os.path.exists(str(tmp_path / "no.pt"))


@pytest.mark.parametrize("path", BUNDLED, ids=[os.path.relpath(p, ROOT) for p in BUNDLED])
def test_bundled_models_are_version_2_with_a_valid_checksum(path):
    header = read_header(path)
    assert header["version"] == 2 and header.get("batmobile_version")
    canonical, digest = split_header(stored_header(path))
    assert digest is not None and digest == model_checksum(canonical, buffers_of(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = load_potential(path)
    assert np.isfinite(model.E_ref.detach().numpy()).all()


def test_shipped_potential_swapped_species_refused(tmp_path):
    """The case of the issue on the bundled water model itself."""
    edited = str(tmp_path / "water_fast_H_O.pt")
    shutil.copyfile(POTENTIAL, str(tmp_path / "copy.pt"))
    rewrite_header(str(tmp_path / "copy.pt"), edited, lambda h: h.update(species=["H", "O"]))
    assert read_header(edited)["species"] == ["H", "O"]
    with pytest.raises(ValueError, match="altered"):
        load_potential(edited)
