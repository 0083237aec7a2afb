"""Full periodic neighbour lists (both directions, all images within r_c, any triclinic cell, small boxes included,
per-direction periodicity), from a cell list: linear in the number of atoms."""
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
    # images of the wrapped atoms that can lie within r_c of an atom inside the cell: fractional coordinate within
    # r_c |recip_k| of [0, 1) along each periodic direction
    frac = frac - n_wrap
    reach = np.array([r_c * np.linalg.norm(recip[k]) if pbc[k] else np.inf for k in range(3)]) + 1e-9
    image_frac = frac[None, :, :] + shifts[:, None, :]                     # (shifts, N, 3)
    keep = ((image_frac > -reach) & (image_frac < 1.0 + reach)).all(-1)
    shift_id, atom = np.nonzero(keep)
    offsets = np.stack([S @ cell for S in shifts])
    receiver, image = _pairs_within(positions, atom, offsets[shift_id], r_c)
    sender, shift_id = atom[image], shift_id[image]
    order = np.lexsort((sender, shift_id, receiver))   # by receiver, then shift, then sender
    receiver, sender, shift_id = receiver[order], sender[order], shift_id[order]
    shift = shifts[shift_id].astype(np.int64) + (n_wrap[receiver] - n_wrap[sender]).astype(np.int64)
    return sender.astype(np.int64), receiver.astype(np.int64), shift


def _pairs_within(points: np.ndarray, atom: np.ndarray, offsets: np.ndarray,
                  r_c: float) -> Tuple[np.ndarray, np.ndarray]:
    """All (i, m) with 0 < |(points[atom[m]] - points[i]) + offsets[m]| < r_c, from a cell list of cubic bins of
    side r_c over the images points[atom] + offsets. The distance is formed in that order so that a pair exactly at
    r_c (such as an atom and its own image one lattice vector away) is never an edge through rounding."""
    images = points[atom] + offsets
    lo = np.minimum(points.min(0), images.min(0))
    bin_p = np.floor((points - lo) / r_c).astype(np.int64)
    bin_q = np.floor((images - lo) / r_c).astype(np.int64)
    dims = np.maximum(bin_p.max(0), bin_q.max(0)) + 1
    key = lambda b: (b[:, 0] * dims[1] + b[:, 1]) * dims[2] + b[:, 2]
    order = np.argsort(key(bin_q), kind="stable")
    sorted_keys = key(bin_q)[order]
    found_i, found_m = [], []
    for offset in np.stack(np.meshgrid(*[[-1, 0, 1]] * 3, indexing="ij"), -1).reshape(-1, 3):
        nb = bin_p + offset
        valid = ((nb >= 0) & (nb < dims)).all(1)
        k = key(nb)
        start = np.searchsorted(sorted_keys, k, "left")
        count = np.where(valid, np.searchsorted(sorted_keys, k, "right") - start, 0)
        i = np.repeat(np.arange(len(points)), count)
        # candidate m: the count[i] consecutive entries of `order` from start[i]
        first = np.repeat(start - np.cumsum(count) + count, count)
        m = order[first + np.arange(len(i))]
        d = (points[atom[m]] - points[i]) + offsets[m]
        d2 = np.einsum("ij,ij->i", d, d)
        same = (d2 == 0.0) & (atom[m] != i)   # distance 0 other than an atom's own S = 0 image
        if same.any():
            raise ValueError(f"atoms {int(i[same][0])} and {int(atom[m][same][0])} (or its periodic image) are at the "
                             f"same position")
        close = (d2 < r_c * r_c) & (d2 > 0.0)
        found_i.append(i[close])
        found_m.append(m[close])
    return np.concatenate(found_i), np.concatenate(found_m)
