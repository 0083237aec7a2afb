"""Training frames: the Frame record, the DeePMD "npy" reader (type_map.raw, type.raw,
set.NNN/{coord,force,energy,box}.npy), species assignment, dataset statistics and batching."""
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from .neighbors import complete_cell, neighbor_list, wrap_positions

# The shared DFT water frames are bundled in the repository (data/water, see its README for source and licence);
# BATMOBILE_WATER_DATA points elsewhere.
DEFAULT_ROOT = os.environ.get(
    "BATMOBILE_WATER_DATA",
    os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "water", "dft_train")))
TRAIN_SETS = ("data_0/set.000", "data_1/set.000", "data_1/set.001")
VALIDATION_SETS = ("data_2/set.000",)


class DataError(ValueError):
    """Bad training or validation data; the message names the file and, where it applies, the frame."""


@dataclass
class Frame:
    positions: np.ndarray   # (N, 3) float64, wrapped into the cell along its periodic directions
    cell: np.ndarray        # (3, 3) rows = lattice vectors (non-periodic ones only make it invertible)
    species: Optional[np.ndarray]   # (N,) int64, index into the model's species list (None until assigned)
    energy: float
    forces: np.ndarray      # (N, 3)
    pbc: Tuple[bool, bool, bool] = (True, True, True)
    virial: Optional[np.ndarray] = None   # (3, 3) eV, W = -dE/dstrain (LAMMPS's sign), when the data have it
    symbols: Optional[np.ndarray] = None  # (N,) element names as the file gives them
    origin: str = ""                      # file and frame, for error messages
    sender: Optional[np.ndarray] = None
    receiver: Optional[np.ndarray] = None
    shifts: Optional[np.ndarray] = None

    def build_neighbors(self, r_c: float) -> None:
        self.sender, self.receiver, self.shifts = neighbor_list(self.positions, self.cell, r_c, self.pbc)

    def edge_lengths(self) -> np.ndarray:
        vec = self.positions[self.sender] - self.positions[self.receiver] + self.shifts @ self.cell
        return np.linalg.norm(vec, axis=1)


def assign_species(frames: List[Frame], species: Sequence[str]) -> None:
    """Sets each frame's species indices from its element names; an element outside `species` is an error."""
    index = {name: k for k, name in enumerate(species)}
    for fr in frames:
        unknown = sorted(set(fr.symbols.tolist()) - set(index))
        if unknown:
            raise DataError(f"{fr.origin}: element(s) {unknown} not in the model's species {list(species)}")
        fr.species = np.array([index[x] for x in fr.symbols.tolist()], dtype=np.int64)


def species_in_order(frames: List[Frame]) -> List[str]:
    """Element names in the order of their first appearance in the frames."""
    seen = {}
    for fr in frames:
        for x in fr.symbols.tolist():
            seen.setdefault(x, len(seen))
    return list(seen)


def _load_array(directory: str, name: str, num_frames: Optional[int], per_frame: int, where: str) -> np.ndarray:
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        raise DataError(f"{where}: {name} is missing")
    a = np.load(path).astype(np.float64)
    a = a.reshape(len(a), -1) if a.ndim > 0 else a.reshape(1, 1)
    if a.shape[1] != per_frame or (num_frames is not None and len(a) != num_frames):
        expected = f"[{num_frames if num_frames is not None else 'frames'}, {per_frame}]"
        raise DataError(f"{where}: {name} has shape {list(a.shape)}; expected {expected}")
    if not np.isfinite(a).all():
        raise DataError(f"{where}: {name} contains non-finite values")
    return a


def read_deepmd_set(set_dir: str) -> List[Frame]:
    """Frames of one DeePMD set directory (species not yet assigned). Optional: virial.npy (eV, 9 per frame, the
    sign of LAMMPS's virial), a `nopbc` file in the system directory (then box.npy may be absent)."""
    system_dir = os.path.dirname(os.path.normpath(set_dir))
    for name in ("type_map.raw", "type.raw"):
        if not os.path.exists(os.path.join(system_dir, name)):
            raise DataError(f"{set_dir}: {name} is missing in {system_dir}")
    type_map = open(os.path.join(system_dir, "type_map.raw")).read().split()
    types = np.loadtxt(os.path.join(system_dir, "type.raw"), dtype=np.int64).reshape(-1)
    if len(types) == 0 or types.min() < 0 or types.max() >= len(type_map):
        raise DataError(f"{set_dir}: type.raw holds types outside 0..{len(type_map) - 1} of type_map.raw")
    n = len(types)
    energy = _load_array(set_dir, "energy.npy", None, 1, set_dir).reshape(-1)
    nf = len(energy)
    coord = _load_array(set_dir, "coord.npy", nf, 3 * n, set_dir)
    force = _load_array(set_dir, "force.npy", nf, 3 * n, set_dir)
    periodic = not os.path.exists(os.path.join(system_dir, "nopbc"))
    box = _load_array(set_dir, "box.npy", nf, 9, set_dir) if periodic else np.zeros((nf, 9))
    has_virial = os.path.exists(os.path.join(set_dir, "virial.npy"))
    virial = _load_array(set_dir, "virial.npy", nf, 9, set_dir) if has_virial else None
    symbols = np.array([type_map[t] for t in types])
    pbc = (periodic,) * 3
    frames = []
    for f in range(nf):
        where = f"{set_dir} frame {f}"
        try:
            cell = complete_cell(box[f].reshape(3, 3), pbc)
        except ValueError as e:
            raise DataError(f"{where}: {e}") from None
        frames.append(Frame(positions=wrap_positions(coord[f].reshape(n, 3), cell, pbc), cell=cell, species=None,
                            energy=float(energy[f]), forces=force[f].reshape(n, 3), pbc=pbc,
                            virial=None if virial is None else virial[f].reshape(3, 3), symbols=symbols,
                            origin=where))
    return frames


def read_set(root: str, set_path: str, species: Sequence[str]) -> List[Frame]:
    """Frames of one DeePMD set, e.g. set_path = "data_0/set.000"; species maps names to model indices."""
    frames = read_deepmd_set(os.path.join(root, set_path))
    assign_species(frames, species)
    return frames


def read_sets(root: str, set_paths: Sequence[str], species: Sequence[str], r_c: float) -> List[Frame]:
    frames = []
    for sp in set_paths:
        frames += read_set(root, sp, species)
    for fr in frames:
        fr.build_neighbors(r_c)
    return frames


def dataset_statistics(frames: List[Frame], num_species: int) -> Dict:
    """E_ref (least squares of total energies on species counts), force RMS, mean neighbours, min distance."""
    counts = np.stack([np.bincount(fr.species, minlength=num_species) for fr in frames]).astype(np.float64)
    energies = np.array([fr.energy for fr in frames])
    # minimum-norm solution: with a fixed composition only the composition-weighted sum is determined
    e_ref, *_ = np.linalg.lstsq(counts, energies, rcond=None)
    residual = energies - counts @ e_ref
    n_atoms = counts.sum(1)
    forces = np.concatenate([fr.forces.reshape(-1) for fr in frames])
    n_edges = sum(len(fr.sender) for fr in frames)
    return {
        "E_ref": e_ref.tolist(),
        "force_rms": float(np.sqrt(np.mean(forces ** 2))),
        "energy_residual_std_per_atom": float(np.std(residual / n_atoms)),
        "avg_num_neighbors": float(n_edges / n_atoms.sum()) if n_edges else 1.0,
        # frames without edges (isolated atoms, e.g. for reference energies) have no pair distance
        "min_distance": float(min(fr.edge_lengths().min() for fr in frames if len(fr.sender))) if n_edges else 0.0,
    }


class Batcher:
    """Batches of frames as one disjoint graph: the atoms of B frames one after another with a per-atom frame index,
    each frame's edge indices offset by the atoms before it, per-frame cells (gathered per edge on the device).
    Frames of different sizes mix freely; the neighbour lists are each frame's own (built once, kept on the Frame).

    A batch is assembled on the host with a few numpy concatenations into two flat buffers (floating point and
    integer) and moved with one copy each; on CUDA the buffers are pinned and copied with non_blocking=True, so
    assembling the next batch never waits for the device. Besides tensors, a batch holds host-side facts about its
    frames (num_frames, equal_sizes, any_virial, all_virial) that the loss uses without reading the device."""

    def __init__(self, frames: Sequence[Frame], dtype: torch.dtype, device):
        self.frames = frames
        self.dtype, self.device = dtype, torch.device(device)
        self.np_dtype = np.float32 if dtype == torch.float32 else np.float64
        self.pinned = self.device.type == "cuda"

    def __call__(self, indices: Sequence[int]) -> Dict:
        frames = [self.frames[i] for i in indices]
        B = len(frames)
        n = np.array([len(fr.species) for fr in frames], dtype=np.int64)
        e = np.array([len(fr.sender) for fr in frames], dtype=np.int64)
        N, E = int(n.sum()), int(e.sum())
        first_atom = np.cumsum(n) - n
        has_virial = np.array([fr.virial is not None for fr in frames])
        zero = np.zeros((3, 3))
        floats = [("positions", (N, 3), [fr.positions for fr in frames]),
                  ("forces", (N, 3), [fr.forces for fr in frames]),
                  ("energy", (B,), [np.array([fr.energy for fr in frames])]),
                  ("num_atoms", (B,), [n]),
                  ("virial", (B, 3, 3), [zero if fr.virial is None else fr.virial for fr in frames]),
                  ("cell", (B, 3, 3), [fr.cell for fr in frames]),
                  # force-term weight of each atom: 1 / (3 N_frame B), a per-frame mean over the batch's frames
                  ("atom_weight", (N,), [np.repeat(1.0 / (3.0 * n * B), n)]),
                  # virial-term weight of each frame: 1 / (9 B) where the frame has a virial, else 0
                  ("virial_weight", (B,), [has_virial / (9.0 * B)])]
        longs = [("species", (N,), [fr.species for fr in frames]),
                 ("sender", (E,), [np.concatenate([fr.sender for fr in frames]) + np.repeat(first_atom, e)]),
                 ("receiver", (E,), [np.concatenate([fr.receiver for fr in frames]) + np.repeat(first_atom, e)]),
                 ("shifts", (E, 3), [fr.shifts for fr in frames]),
                 ("frame_of_atom", (N,), [np.repeat(np.arange(B), n)]),
                 ("frame_of_edge", (E,), [np.repeat(np.arange(B), e)])]
        batch = {**self._move(floats, self.dtype, self.np_dtype), **self._move(longs, torch.long, np.int64)}
        batch["has_virial"] = batch["virial_weight"] > 0
        batch.update(num_frames=B, equal_sizes=bool((n == n[0]).all()) if B else True,
                     any_virial=bool(has_virial.any()), all_virial=bool(has_virial.all()))
        return batch

    def _move(self, fields, dtype, np_dtype):
        sizes = [int(np.prod(shape)) for _, shape, _ in fields]
        total = int(sum(sizes))
        host = torch.empty(total, dtype=dtype, pin_memory=self.pinned)
        flat = host.numpy()
        at = 0
        for (_, shape, parts), size in zip(fields, sizes):
            if size:
                np.concatenate([np.asarray(x).reshape(-1) for x in parts], out=flat[at:at + size],
                               casting="same_kind")
            at += size
        dev = host.to(self.device, non_blocking=True) if self.pinned else host.to(self.device)
        out, at = {}, 0
        for (name, shape, _), size in zip(fields, sizes):
            out[name] = dev[at:at + size].view(shape)
            at += size
        return out


def batch_frames(frames: List[Frame], dtype: torch.dtype, device) -> Dict:
    """All the frames as one batch (Batcher)."""
    return Batcher(frames, dtype, device)(range(len(frames)))
