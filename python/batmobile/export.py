"""Model file (format "batmobile", version 1; docs/model.md "Model file").

python -m batmobile.export CHECKPOINT OUT.pt [--raw-weights]   (EMA weights unless --raw-weights)
python -m batmobile.export --add-checksum IN.pt OUT.pt        (a file without checksum: same tensors, checksum added)

The file is torch.jit.save of a module that holds only float64 buffers (plus the uint8 `meta.header_json`), so
libtorch reads it with torch::jit::load + named_buffers(). Buffer names equal the model's parameter names.
The header's "checksum" is "sha256:" + tensors_checksum() of the buffers (docs/pair_style.md "Model file
checksum"); pair_coeff recomputes it and stops on a mismatch.
"""
import argparse
import hashlib
import json
import sys
from typing import Dict, Optional

import torch
from torch import nn

from .io_utils import load_checkpoint
from .model import BatmobileModel, Hyperparameters

FORMAT = "batmobile"
VERSION = 1
META_NUMBERS = ("r_c", "L", "C", "T", "NB", "H", "A", "dk", "Hr", "avg_num_neighbors", "energy_scale",
                "min_distance")


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


def tensors_checksum(buffers: Dict[str, torch.Tensor]) -> str:
    """SHA-256 (hex) over every buffer except meta.header_json, in ascending order of the names (UTF-8 bytes): each
    contributes "<name>\\n<dtype>\\n[<d0>,<d1>,...]\\n" ("[]" for a scalar; dtype as torch names it without
    "torch.") and then its data, row-major, little-endian. src/model/model_file.cpp computes the same."""
    h = hashlib.sha256()
    for name in sorted(k for k in buffers if k != "meta.header_json"):
        t = buffers[name].detach().cpu().contiguous()
        dtype = str(t.dtype).replace("torch.", "")
        h.update(f"{name}\n{dtype}\n[{','.join(str(d) for d in t.shape)}]\n".encode("utf-8"))
        data = t.reshape(-1).view(torch.uint8).numpy()
        if sys.byteorder != "little" and t.element_size() > 1:
            data = data.reshape(-1, t.element_size())[:, ::-1]
        h.update(data.tobytes())
    return h.hexdigest()


def _set_header(root: nn.Module, header: Dict) -> None:
    """Stores the header with the checksum of root's other buffers (registered before the header)."""
    header = dict(header, checksum="sha256:" + tensors_checksum(dict(root.named_buffers())))
    _holder_at(root, "meta.x").register_buffer(
        "header_json", torch.tensor(list(json.dumps(header).encode("utf-8")), dtype=torch.uint8))


def build_export_module(model: BatmobileModel, extra_header: Optional[Dict] = None) -> nn.Module:
    hp = model.hp
    root = _BufferHolder()
    for name, tensor in model.state_dict().items():
        _holder_at(root, name).register_buffer(name.split(".")[-1], tensor.detach().to("cpu", torch.float64).clone())
    header = {"format": FORMAT, "version": VERSION, "species": list(hp.species), "units": "metal",
              "hyperparameters": hp.to_dict(), "E_ref": model.E_ref.detach().double().tolist()}
    header.update(hp.to_dict())
    if extra_header:
        header.update(extra_header)
    meta = _holder_at(root, "meta.x")
    for key in META_NUMBERS:
        meta.register_buffer(key, torch.tensor(float(getattr(hp, key)), dtype=torch.float64))
    meta.register_buffer("num_species", torch.tensor(float(len(hp.species)), dtype=torch.float64))
    meta.register_buffer("version", torch.tensor(float(VERSION), dtype=torch.float64))
    _set_header(root, header)
    return root


def add_checksum(src: str, dst: str) -> str:
    """Writes dst: the buffers of the model file src, bit for bit, with the header's checksum (re)computed from
    them. For files of exporters that stored no checksum; returns the checksum."""
    module = torch.jit.load(src, map_location="cpu")
    buffers = {k: v.detach().clone() for k, v in module.named_buffers()}
    if "meta.header_json" not in buffers:
        raise ValueError(f"{src}: not a Batmobile model file (no meta.header_json buffer)")
    header = json.loads(bytes(buffers.pop("meta.header_json").tolist()).decode("utf-8"))
    if "checksum" in header and header["checksum"] != "sha256:" + tensors_checksum(buffers):
        raise ValueError(f"{src}: its tensors do not match its checksum (corrupted or altered); not copied")
    root = _BufferHolder()
    for name, tensor in buffers.items():
        _holder_at(root, name).register_buffer(name.split(".")[-1], tensor)
    _set_header(root, header)
    torch.jit.save(torch.jit.script(root), dst)
    return read_header(dst)["checksum"]


def save_potential(model: BatmobileModel, path: str, extra_header: Optional[Dict] = None) -> None:
    torch.jit.save(torch.jit.script(build_export_module(model, extra_header)), path)


def read_header(path: str) -> Dict:
    module = torch.jit.load(path, map_location="cpu")
    buffers = dict(module.named_buffers())
    if "meta.header_json" not in buffers:
        raise ValueError(f"{path}: not a Batmobile model file (no meta.header_json buffer)")
    return json.loads(bytes(buffers["meta.header_json"].tolist()).decode("utf-8"))


def load_potential(path: str, dtype: torch.dtype = torch.float64) -> BatmobileModel:
    """Rebuild the PyTorch model from a model file; rejects unknown formats and versions."""
    module = torch.jit.load(path, map_location="cpu")
    buffers = dict(module.named_buffers())
    if "meta.header_json" not in buffers:
        raise ValueError(f"{path}: not a Batmobile model file (no meta.header_json buffer)")
    header = json.loads(bytes(buffers["meta.header_json"].tolist()).decode("utf-8"))
    if "checksum" in header and header["checksum"] != "sha256:" + tensors_checksum(buffers):
        raise ValueError(f"{path}: the weights do not match the file's checksum: the weights are corrupted or "
                         f"altered; re-export the model file")
    if header.get("format") != FORMAT:
        raise ValueError(f"{path}: unknown model format {header.get('format')!r}, expected {FORMAT!r}")
    if header.get("version") != VERSION:
        raise ValueError(f"{path}: model format version {header.get('version')!r} is not supported "
                         f"(this reader understands version {VERSION})")
    if header.get("units") != "metal":
        raise ValueError(f"{path}: units {header.get('units')!r}, expected 'metal'")
    hp = Hyperparameters.from_dict(header["hyperparameters"])
    model = BatmobileModel(hp).double()   # float64 before loading: never round the stored weights
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
    p.add_argument("checkpoint", help="training checkpoint (with --add-checksum: a model file)")
    p.add_argument("output")
    p.add_argument("--raw-weights", action="store_true", help="export the raw instead of the EMA weights")
    p.add_argument("--add-checksum", action="store_true",
                   help="copy the model file CHECKPOINT to OUTPUT with the weights checksum in its header")
    a = p.parse_args(argv)
    if a.add_checksum:
        print(f"wrote {a.output} (tensors of {a.checkpoint}, {add_checksum(a.checkpoint, a.output)})")
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
