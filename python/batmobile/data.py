"""Reader for DeePMD "npy" data sets (type_map.raw, type.raw, set.NNN/{coord,force,energy,box}.npy)."""
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from .neighbors import neighbor_list, wrap_positions

# The shared DFT water frames are bundled in the repository (data/water, see its README for source and licence);
# BATMOBILE_WATER_DATA points elsewhere.
DEFAULT_ROOT = os.environ.get(
    "BATMOBILE_WATER_DATA",
    os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "water", "dft_train")))
TRAIN_SETS = ("data_0/set.000", "data_1/set.000", "data_1/set.001")
VALIDATION_SETS = ("data_2/set.000",)


@dataclass
class Frame:
    positions: np.ndarray   # (N, 3) float64, wrapped into the cell
    cell: np.ndarray        # (3, 3) rows = lattice vectors
    species: np.ndarray     # (N,) int64, index into the model's species list
    energy: float
    forces: np.ndarray      # (N, 3)
    sender: Optional[np.ndarray] = None
    receiver: Optional[np.ndarray] = None
    shifts: Optional[np.ndarray] = None

    def build_neighbors(self, r_c: float) -> None:
        self.sender, self.receiver, self.shifts = neighbor_list(self.positions, self.cell, r_c)

    def edge_lengths(self) -> np.ndarray:
        vec = self.positions[self.sender] - self.positions[self.receiver] + self.shifts @ self.cell
        return np.linalg.norm(vec, axis=1)


def read_set(root: str, set_path: str, species: Sequence[str]) -> List[Frame]:
    """Frames of one DeePMD set, e.g. set_path = "data_0/set.000"; species maps names to model indices."""
    system_dir = os.path.join(root, os.path.dirname(set_path))
    type_map = open(os.path.join(system_dir, "type_map.raw")).read().split()
    types = np.loadtxt(os.path.join(system_dir, "type.raw"), dtype=np.int64).reshape(-1)
    missing = [type_map[t] for t in set(types.tolist()) if type_map[t] not in species]
    if missing:
        raise ValueError(f"{set_path}: element(s) {missing} not in model species {list(species)}")
    model_species = np.array([list(species).index(type_map[t]) for t in types], dtype=np.int64)
    d = os.path.join(root, set_path)
    coord = np.load(os.path.join(d, "coord.npy")).astype(np.float64)
    force = np.load(os.path.join(d, "force.npy")).astype(np.float64)
    energy = np.load(os.path.join(d, "energy.npy")).astype(np.float64).reshape(-1)
    box = np.load(os.path.join(d, "box.npy")).astype(np.float64)
    n = len(types)
    frames = []
    for f in range(len(energy)):
        cell = box[f].reshape(3, 3)
        frames.append(Frame(positions=wrap_positions(coord[f].reshape(n, 3), cell), cell=cell,
                            species=model_species, energy=float(energy[f]), forces=force[f].reshape(n, 3)))
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
    return {
        "E_ref": e_ref.tolist(),
        "force_rms": float(np.sqrt(np.mean(forces ** 2))),
        "energy_residual_std_per_atom": float(np.std(residual / n_atoms)),
        "avg_num_neighbors": float(sum(len(fr.sender) for fr in frames) / n_atoms.sum()),
        "min_distance": float(min(fr.edge_lengths().min() for fr in frames)),
    }


def batch_frames(frames: List[Frame], dtype: torch.dtype, device) -> Dict[str, torch.Tensor]:
    """Concatenate frames into one disjoint graph (per-edge cells handle different boxes)."""
    pos, spc, snd, rcv, shf, cells, frame_of_atom, e, f = [], [], [], [], [], [], [], [], []
    offset = 0
    for k, fr in enumerate(frames):
        n = len(fr.species)
        pos.append(fr.positions)
        spc.append(fr.species)
        snd.append(fr.sender + offset)
        rcv.append(fr.receiver + offset)
        shf.append(fr.shifts)
        cells.append(np.broadcast_to(fr.cell, (len(fr.sender), 3, 3)))
        frame_of_atom.append(np.full(n, k))
        e.append(fr.energy)
        f.append(fr.forces)
        offset += n

    def t(x, dt=dtype):
        return torch.as_tensor(np.ascontiguousarray(np.concatenate(x) if isinstance(x, list) else x), dtype=dt,
                               device=device)
    return {
        "positions": t(pos), "species": t(spc, torch.long), "sender": t(snd, torch.long),
        "receiver": t(rcv, torch.long), "shifts": t(shf, torch.long), "cell": t(cells),
        "frame_of_atom": t(frame_of_atom, torch.long), "energy": t(np.array(e)), "forces": t(f),
        "num_atoms": t(np.array([len(fr.species) for fr in frames]), dtype),
    }
