"""Full periodic neighbour lists (both directions, all images within r_c, small boxes included)."""
import math
from typing import Tuple

import numpy as np


def wrap_positions(positions: np.ndarray, cell: np.ndarray,
                   pbc: Tuple[bool, bool, bool] = (True, True, True)) -> np.ndarray:
    """Wrap Cartesian positions into the cell along its periodic directions (rows of `cell` = lattice vectors)."""
    frac = positions @ np.linalg.inv(cell)
    frac -= np.where(np.asarray(pbc), np.floor(frac), 0.0)
    return frac @ cell


def complete_cell(cell: np.ndarray, pbc: Tuple[bool, bool, bool]) -> np.ndarray:
    """The cell with each non-periodic lattice vector replaced by a unit vector normal to the others.

    A non-periodic direction never gets a shift, so its vector only has to make the cell invertible; files of
    molecules often store a zero vector there. Raises ValueError for a degenerate periodic part."""
    cell = np.array(cell, dtype=np.float64).reshape(3, 3)
    periodic = [k for k in range(3) if pbc[k]]
    for k in range(3):
        if pbc[k]:
            continue
        others = [cell[m] for m in range(3) if m != k and (pbc[m] or m < k)]
        basis = np.linalg.qr(np.array(others).T)[0] if others else np.zeros((3, 0))
        for trial in np.eye(3):   # the first axis with a component normal to the span of the others
            v = trial - basis @ (basis.T @ trial)
            if np.linalg.norm(v) > 0.5:
                cell[k] = v / np.linalg.norm(v)
                break
    if periodic and abs(np.linalg.det(cell)) < 1e-9 * max(1.0, np.abs(cell).max()) ** 3:
        raise ValueError(f"the periodic cell vectors {cell[periodic].tolist()} are (nearly) linearly dependent")
    return cell


def neighbor_list(positions: np.ndarray, cell: np.ndarray, r_c: float,
                  pbc: Tuple[bool, bool, bool] = (True, True, True)) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges i <- j with 0 < |x_j - x_i + S @ cell| < r_c.

    Returns (sender j, receiver i, integer shifts S) sorted by receiver. Every image within r_c is included,
    so a box smaller than 2 r_c (or even r_c) yields several edges to the same atom and edges to its own images.
    """
    cell = np.asarray(cell, dtype=np.float64)
    # search on wrapped positions (the image count below assumes atoms inside the cell), then express the shifts
    # relative to the positions as given: x = x_wrapped + n @ cell
    frac = np.asarray(positions, dtype=np.float64) @ np.linalg.inv(cell)
    n_wrap = np.where(np.asarray(pbc), np.floor(frac), 0.0)
    positions = (frac - n_wrap) @ cell
    # number of images per direction: distance between lattice planes is 1 / |reciprocal vector|
    recip = np.linalg.inv(cell).T
    reps = [int(math.ceil(r_c * np.linalg.norm(recip[k]))) if pbc[k] else 0 for k in range(3)]
    ranges = [np.arange(-n, n + 1) for n in reps]
    shifts = np.stack(np.meshgrid(*ranges, indexing="ij"), -1).reshape(-1, 3)
    senders, receivers, edge_shifts = [], [], []
    diff = positions[None, :, :] - positions[:, None, :]    # diff[i, j] = x_j - x_i
    N = len(positions)
    for S in shifts:
        vec = diff + S @ cell
        d2 = np.einsum("ijk,ijk->ij", vec, vec)
        mask = d2 < r_c * r_c
        if not S.any():
            mask &= ~np.eye(N, dtype=bool)
        mask &= d2 > 0.0
        i, j = np.nonzero(mask)
        receivers.append(i)
        senders.append(j)
        edge_shifts.append(np.broadcast_to(S, (len(i), 3)))
    receiver = np.concatenate(receivers)
    sender = np.concatenate(senders)
    shift = np.concatenate(edge_shifts).astype(np.int64)
    shift = shift + (n_wrap[receiver] - n_wrap[sender]).astype(np.int64)
    order = np.argsort(receiver, kind="stable")
    return sender[order].astype(np.int64), receiver[order].astype(np.int64), shift[order]
