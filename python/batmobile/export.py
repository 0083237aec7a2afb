"""Model file (format "batmobile", versions 2 and 3; docs/model.md "Model file").

python -m batmobile.export CHECKPOINT OUT.pt [--raw-weights]   (EMA weights unless --raw-weights)
python -m batmobile.export --upgrade IN.pt OUT.pt             (a version-1 file: same tensors, written as version 2)

A model with correlation 1 is written as version 2, as before the product basis existed; one with correlation 2
as version 3: version 2 plus the meta.correlation number and the product-basis tensors layers.<t>.product.*.

The file is torch.jit.save of a module that holds only float64 buffers (plus the uint8 `meta.header_json`), so
libtorch reads it with torch::jit::load + named_buffers(). Buffer names equal the model's parameter names.
The header (a JSON object in meta.header_json) ends with its "checksum" member: "sha256:" + model_checksum(), which
covers the header before that member (species and their order, cutoff, every hyperparameter, format and version)
and every tensor (docs/model.md "Model checksum"). pair_coeff and load_potential recompute it and stop on a
mismatch. Version-1 files (checksum over the tensors only, or none) still load, with a warning.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import warnings
from typing import Dict, Optional, Tuple

import torch
from torch import nn

from .io_utils import load_checkpoint
from .model import BatmobileModel, Hyperparameters

FORMAT = "batmobile"
VERSION = 2               # what the exporter writes for correlation 1 (and what --upgrade writes)
VERSION_PRODUCT = 3       # what it writes for correlation 2: version 2 plus meta.correlation and the product tensors
SUPPORTED_VERSIONS = (1, 2, 3)
META_NUMBERS = ("r_c", "L", "C", "T", "NB", "H", "A", "dk", "Hr", "avg_num_neighbors", "energy_scale",
                "min_distance")
# The stored header of a version-2 file: the canonical header (a JSON object) with this member appended as its last
_CHECKSUM_MEMBER = re.compile(rb', "checksum": "sha256:([0-9a-f]{64})"\}\Z')


def package_version() -> str:
    """The Batmobile version that writes model files ("batmobile_version" in their header): the package's
    __version__, which is the repository's VERSION file."""
    try:
        from ._version import __version__
        return __version__
    except ImportError:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "VERSION")
        try:
            with open(path) as f:
                return f.read().strip() or "unknown"
        except OSError:
            return "unknown"


class _BufferHolder(nn.Module):
    def forward(self) -> int:  # TorchScript wants a method; the C++ side reads buffers only
        return 0


def _holder_at(root: nn.Module, dotted: str) -> nn.Module:
    node = root
    for part in dotted.split(".")[:-1]:
        if not hasattr(node, part):
            node.add_module(part, _BufferHolder())
        node = getattr(node, part)
    return node


def _hash_tensors(h, buffers: Dict[str, torch.Tensor]) -> None:
    """Feeds every buffer except meta.header_json to h, in ascending order of the names (UTF-8 bytes): each
    contributes "<name>\\n<dtype>\\n[<d0>,<d1>,...]\\n" ("[]" for a scalar; dtype as torch names it without
    "torch.") and then its data, row-major, little-endian."""
    for name in sorted((k for k in buffers if k != "meta.header_json"), key=lambda k: k.encode("utf-8")):
        t = buffers[name].detach().cpu().contiguous()
        dtype = str(t.dtype).replace("torch.", "")
        h.update(f"{name}\n{dtype}\n[{','.join(str(d) for d in t.shape)}]\n".encode("utf-8"))
        data = t.reshape(-1).view(torch.uint8).numpy()
        if sys.byteorder != "little" and t.element_size() > 1:
            data = data.reshape(-1, t.element_size())[:, ::-1]
        h.update(data.tobytes())


def tensors_checksum(buffers: Dict[str, torch.Tensor]) -> str:
    """The version-1 checksum (hex): SHA-256 over the tensors alone (_hash_tensors). src/model/model_file.cpp
    computes the same."""
    h = hashlib.sha256()
    _hash_tensors(h, buffers)
    return h.hexdigest()


def model_checksum(canonical_header: bytes, buffers: Dict[str, torch.Tensor]) -> str:
    """The version-2 checksum (hex): SHA-256 over the decimal byte count of the canonical header, a newline, the
    canonical header's bytes, then the tensors as in tensors_checksum. The canonical header is the stored header
    without its last member `, "checksum": "sha256:<64 hex>"` (split_header). src/model/model_file.cpp computes the
    same."""
    h = hashlib.sha256()
    h.update(str(len(canonical_header)).encode("ascii") + b"\n" + canonical_header)
    _hash_tensors(h, buffers)
    return h.hexdigest()


def split_header(stored: bytes) -> Tuple[bytes, Optional[str]]:
    """(canonical header, stored checksum hex) of a version-2 header: the stored bytes end with
    `, "checksum": "sha256:<64 hex>"}`, and the canonical header is the bytes before that member plus the closing
    `}`. (stored, None) where the header does not end so."""
    m = _CHECKSUM_MEMBER.search(stored)
    if not m:
        return stored, None
    return stored[:m.start()] + b"}", m.group(1).decode("ascii")


def encode_header(header: Dict, buffers: Dict[str, torch.Tensor]) -> bytes:
    """The stored version-2 header: json.dumps of header (without "checksum") with the checksum over it and the
    buffers appended as its last member."""
    header = {k: v for k, v in header.items() if k != "checksum"}
    canonical = json.dumps(header).encode("utf-8")
    assert canonical.endswith(b"}") and len(canonical) > 2, "the header must be a non-empty JSON object"
    digest = model_checksum(canonical, buffers)
    return canonical[:-1] + f', "checksum": "sha256:{digest}"}}'.encode("ascii")


def _set_header(root: nn.Module, header: Dict) -> None:
    """Stores the header (version 2) with the checksum over it and root's other buffers (registered before)."""
    stored = encode_header(header, dict(root.named_buffers()))
    _holder_at(root, "meta.x").register_buffer("header_json", torch.tensor(list(stored), dtype=torch.uint8))


def file_version(hp: Hyperparameters) -> int:
    """The format version the exporter writes for hp: 2 for correlation 1 (readable by Batmobile 1.0), else 3."""
    return VERSION if hp.correlation == 1 else VERSION_PRODUCT


def build_export_module(model: BatmobileModel, extra_header: Optional[Dict] = None) -> nn.Module:
    hp = model.hp
    version = file_version(hp)
    hyperparameters = hp.to_dict()
    if version == VERSION:   # a version-2 file is what it was before correlation existed: no such key
        del hyperparameters["correlation"]
    root = _BufferHolder()
    for name, tensor in model.state_dict().items():
        _holder_at(root, name).register_buffer(name.split(".")[-1], tensor.detach().to("cpu", torch.float64).clone())
    header = {"format": FORMAT, "version": version, "batmobile_version": package_version(),
              "species": list(hp.species), "units": "metal", "hyperparameters": hyperparameters,
              "E_ref": model.E_ref.detach().double().tolist()}
    header.update(hyperparameters)
    if extra_header:
        header.update(extra_header)
    meta = _holder_at(root, "meta.x")
    for key in META_NUMBERS + (("correlation",) if version == VERSION_PRODUCT else ()):
        meta.register_buffer(key, torch.tensor(float(getattr(hp, key)), dtype=torch.float64))
    meta.register_buffer("num_species", torch.tensor(float(len(hp.species)), dtype=torch.float64))
    meta.register_buffer("version", torch.tensor(float(version), dtype=torch.float64))
    _set_header(root, header)
    return root


def _read_buffers(path: str) -> Tuple[Dict[str, torch.Tensor], bytes]:
    """The buffers of a model file (without meta.header_json) and the header's stored bytes."""
    module = torch.jit.load(path, map_location="cpu")
    buffers = {k: v.detach() for k, v in module.named_buffers()}
    if "meta.header_json" not in buffers:
        raise ValueError(f"{path}: not a Batmobile model file (no meta.header_json buffer)")
    stored = bytes(buffers.pop("meta.header_json").tolist())
    return buffers, stored


def verify(path: str, buffers: Dict[str, torch.Tensor], stored: bytes) -> Tuple[Dict, str]:
    """The parsed header of a model file and what its checksum covers: "header and weights" (versions 2 and 3, whose
    checksum is the same, verified),
    "weights" (version 1 with a checksum, verified) or "nothing" (version 1 without one). Raises ValueError on a
    mismatch, on a version-2 or -3 header without its checksum member, and on an unknown format or version."""
    header = json.loads(stored.decode("utf-8"))
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{path}: unknown model format {header.get('format') if isinstance(header, dict) else None!r}"
                         f", expected {FORMAT!r}")
    version = header.get("version")
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"{path}: model format version {version!r} is not supported "
                         f"(this reader understands versions {', '.join(map(str, SUPPORTED_VERSIONS))})")
    if version == 1:
        if "checksum" not in header:
            return header, "nothing"
        if header["checksum"] != "sha256:" + tensors_checksum(buffers):
            raise ValueError(f"{path}: the weights do not match the file's checksum: the weights are corrupted or "
                             f"altered; re-export the model file")
        return header, "weights"
    canonical, stored_hex = split_header(stored)
    if stored_hex is None:
        raise ValueError(f"{path}: the header of this format-version-{version} file does not end with its checksum "
                         f"member (', \"checksum\": \"sha256:<64 hex>\"}}'): the header was altered; re-export the "
                         f"model file")
    computed = model_checksum(canonical, buffers)
    if computed != stored_hex:
        raise ValueError(f"{path}: the model checksum does not match (stored sha256:{stored_hex}, computed "
                         f"sha256:{computed}): the header (species, cutoff, hyperparameters) or the weights were "
                         f"altered or corrupted after export; re-export the model file")
    return header, "header and weights"


def _stated_hyperparameters(header: Dict, buffers: Dict[str, torch.Tensor]) -> Dict:
    """The hyperparameters a model file states: the header's "hyperparameters" object (this package's exporter
    writes one), else, as docs/model.md defines the file, the meta.<key> numbers, falling back to the header's
    top-level numbers, and the header's species."""
    if "hyperparameters" in header:
        return dict(header["hyperparameters"])
    out = {"species": header.get("species")}
    for key, kind in ((k, type(v)) for k, v in Hyperparameters().to_dict().items()):
        if key in ("species", "correlation"):
            continue
        meta = buffers.get("meta." + key)
        value = meta.item() if meta is not None and meta.numel() == 1 else header.get(key)
        if value is not None:
            out[key] = int(value) if kind is int and float(value).is_integer() else value
    return out


def model_of_file(path: str, header: Dict, buffers: Dict[str, torch.Tensor]) -> BatmobileModel:
    """The (float64, not yet loaded) model that a verified model file's hyperparameters describe, checked against
    its tensors; ValueError (one message) where they disagree. Version 3: meta.correlation, 1 or 2, decides the
    correlation (the header, where it names one, must agree); versions 1 and 2 mean correlation 1. Every parameter
    tensor the hyperparameters call for (with correlation 2 the product basis's layers.<t>.product.wq (Q, C) and
    product.Wp<l> (C, C)) must be there with its shape, and no other."""
    stated = header.get("hyperparameters", {}).get("correlation", header.get("correlation"))
    if header["version"] >= VERSION_PRODUCT:
        meta = buffers.get("meta.correlation")
        if meta is None or meta.numel() != 1:
            raise ValueError(f"{path}: a format-version-{header['version']} file without its meta.correlation "
                             f"number (1 or 2); re-export the model file")
        correlation = meta.item()
        if correlation not in (1.0, 2.0):
            raise ValueError(f"{path}: meta.correlation {correlation:g}: this reader understands correlation 1 or 2 "
                             f"(docs/model.md step 3)")
        correlation = int(correlation)
        if stated is not None and stated != correlation:
            raise ValueError(f"{path}: the header says correlation {stated!r}, meta.correlation says {correlation}; "
                             f"re-export the model file")
    else:
        correlation = 1
        if stated not in (None, 1) or "meta.correlation" in buffers:
            raise ValueError(f"{path}: a format-version-{header['version']} file with a correlation (only version 3 "
                             f"files have one); re-export the model file")
    try:
        hp = Hyperparameters.from_dict(dict(_stated_hyperparameters(header, buffers), correlation=correlation))
        model = BatmobileModel(hp).double()   # float64 before loading: never round the stored weights
        expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: the header's hyperparameters do not describe a model ({e}); re-export the model "
                         f"file") from None
    stored = {k: tuple(v.shape) for k, v in buffers.items() if not k.startswith("meta.")}
    problems = [f"missing {k} {list(shape)}" for k, shape in expected.items() if k not in stored]
    problems += [f"{k} is {list(stored[k])}, not {list(shape)}" for k, shape in expected.items()
                 if k in stored and stored[k] != shape]
    problems += [f"unexpected {k}" for k in stored if k not in expected]
    if problems:
        shown = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
        raise ValueError(f"{path}: the tensors do not match the hyperparameters (format version {header['version']}, "
                         f"correlation {correlation}, L {hp.L}, C {hp.C}, T {hp.T}): {shown}; re-export the model "
                         f"file")
    return model


def upgrade(src: str, dst: str) -> str:
    """Writes dst: the model file src as format version 2. A version-1 src has its tensor checksum (where it has
    one) verified, then every buffer is kept bit for bit except meta.version (now 2), and the header gets version 2,
    "batmobile_version" (this package's; "upgraded_from_version": 1 records the origin) and the version-2 checksum.
    A version-2 or version-3 src is verified and copied unchanged. Returns dst's checksum ("sha256:<hex>")."""
    buffers, stored = _read_buffers(src)
    try:
        header, _ = verify(src, buffers, stored)
        model_of_file(src, header, buffers)
    except ValueError as e:
        raise ValueError(f"{e}; {dst} not written") from None
    if header["version"] >= VERSION:
        if os.path.abspath(src) != os.path.abspath(dst):
            shutil.copyfile(src, dst)
        return header["checksum"]
    header = {k: v for k, v in header.items() if k != "checksum"}
    out = {"format": header.pop("format"), "version": VERSION, "batmobile_version": package_version(),
           "upgraded_from_version": header.pop("version")}
    header.pop("batmobile_version", None)
    out.update(header)
    if "meta.version" in buffers:
        buffers["meta.version"] = torch.tensor(float(VERSION), dtype=buffers["meta.version"].dtype)
    root = _BufferHolder()
    for name, tensor in buffers.items():
        _holder_at(root, name).register_buffer(name.split(".")[-1], tensor.clone())
    _set_header(root, out)
    torch.jit.save(torch.jit.script(root), dst)
    return read_header(dst)["checksum"]


def add_checksum(src: str, dst: str) -> str:
    """Former name of upgrade (which also adds the checksum to a version-1 file without one)."""
    return upgrade(src, dst)


def save_potential(model: BatmobileModel, path: str, extra_header: Optional[Dict] = None) -> None:
    torch.jit.save(torch.jit.script(build_export_module(model, extra_header)), path)


def read_header(path: str) -> Dict:
    module = torch.jit.load(path, map_location="cpu")
    buffers = dict(module.named_buffers())
    if "meta.header_json" not in buffers:
        raise ValueError(f"{path}: not a Batmobile model file (no meta.header_json buffer)")
    return json.loads(bytes(buffers["meta.header_json"].tolist()).decode("utf-8"))


def load_potential(path: str, dtype: torch.dtype = torch.float64) -> BatmobileModel:
    """Rebuild the PyTorch model from a model file (format version 1, 2 or 3); verifies its checksum (verify) and
    its tensors against its hyperparameters (model_of_file), and rejects unknown formats and versions. A
    version-1 file loads with a warning (its checksum, if any, does not cover the header)."""
    buffers, stored = _read_buffers(path)
    header, covered = verify(path, buffers, stored)
    if header["version"] == 1:
        warnings.warn(f"{path}: model format version 1: " +
                      ("its checksum covers the weights but not the header (species, cutoff, hyperparameters)"
                       if covered == "weights" else "it carries no checksum") +
                      f", so an altered file would go unnoticed; upgrade it with: python -m batmobile.export "
                      f"--upgrade {path} NEW.pt", stacklevel=2)
    if header.get("units") != "metal":
        raise ValueError(f"{path}: units {header.get('units')!r}, expected 'metal'")
    model = model_of_file(path, header, buffers)
    state = {k: v for k, v in buffers.items() if not k.startswith("meta.")}
    model.load_state_dict(state, strict=True)
    model.header = header
    return model.to(dtype)


def model_from_checkpoint(ckpt: Dict, use_ema: bool = True) -> BatmobileModel:
    hp = Hyperparameters.from_dict(ckpt["hyperparameters"])
    model = BatmobileModel(hp).double()
    state = ckpt["ema"] if use_ema else ckpt["model"]
    model.load_state_dict({k: v.double() if v.dtype.is_floating_point else v for k, v in state.items()})
    return model


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="training checkpoint (with --upgrade: a model file)")
    p.add_argument("output")
    p.add_argument("--raw-weights", action="store_true", help="export the raw instead of the EMA weights")
    p.add_argument("--upgrade", action="store_true",
                   help="write the model file CHECKPOINT as format version 2 to OUTPUT: the same tensors, the "
                        "checksum over header and tensors (a version-1 file's own checksum is verified first; a "
                        "version-2 or -3 file is verified and copied)")
    p.add_argument("--add-checksum", action="store_true", help="the same as --upgrade (its former name)")
    a = p.parse_args(argv)
    if a.upgrade or a.add_checksum:
        checksum = upgrade(a.checkpoint, a.output)
        print(f"wrote {a.output} (format version {read_header(a.output)['version']}, tensors of {a.checkpoint}, "
              f"{checksum})")
        return
    ckpt = load_checkpoint(a.checkpoint)
    model = model_from_checkpoint(ckpt, use_ema=not a.raw_weights)
    training = {k: ckpt.get(k) for k in ("train_command", "device", "train_frames", "step", "elapsed_seconds")}
    training["statistics"] = ckpt.get("statistics")
    run_args = ckpt.get("args") or {}
    training["train_sets"] = run_args.get("train") or run_args.get("train_sets")
    save_potential(model, a.output, {"training": training})
    print(f"wrote {a.output} ({'raw' if a.raw_weights else 'EMA'} weights, step {ckpt.get('step')})")


if __name__ == "__main__":
    main()
