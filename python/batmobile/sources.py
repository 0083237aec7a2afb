"""Data sources named on the command line: PATH or PATH@START:STOP (frames START..STOP-1 of PATH, Python slice
rules, negative indices count from the end). PATH is an extended XYZ file, a DeePMD set directory (set.NNN) or a
DeePMD system directory (all its set.* in order)."""
import glob
import os
import re
from typing import Dict, List, Optional, Sequence

from .data import DataError, Frame, assign_species, read_deepmd_set

_RANGE = re.compile(r"^(-?\d*):(-?\d*)$")


def parse_source(spec: str):
    """(path, slice or None) of PATH[@START:STOP]."""
    path, sep, rng = spec.rpartition("@")
    if sep and _RANGE.match(rng):
        start, stop = _RANGE.match(rng).groups()
        return path, slice(int(start) if start else None, int(stop) if stop else None)
    if sep and re.match(r"^-?\d+$", rng):
        k = int(rng)
        return path, slice(k, k + 1 if k != -1 else None)
    return spec, None


def _read_path(path: str, keys: Dict) -> List[Frame]:
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        parent = os.path.dirname(os.path.normpath(path))
        if os.path.exists(os.path.join(parent, "type.raw")) or os.path.exists(os.path.join(path, "energy.npy")):
            return read_deepmd_set(path)
        sets = sorted(glob.glob(os.path.join(path, "set.*")))
        if os.path.exists(os.path.join(path, "type.raw")) and sets:
            return [fr for s in sets for fr in read_deepmd_set(s)]
        raise DataError(f"{path}: a directory that is neither a DeePMD set (in a directory with type.raw) nor a "
                        f"DeePMD system (type.raw and set.*)")
    from .extxyz import read_extxyz
    return read_extxyz(path, **keys)


def read_source(spec: str, keys: Optional[Dict] = None) -> List[Frame]:
    """The frames of one source, species not yet assigned; keys: energy_key, forces_key, stress_key, virial_key
    (extended XYZ only)."""
    path, rng = parse_source(spec)
    frames = _read_path(path, keys or {})
    if rng is None:
        return frames
    selected = frames[rng]
    if not selected:
        raise DataError(f"{spec}: the range selects no frame (the source has {len(frames)})")
    return selected


def read_sources(specs: Sequence[str], keys: Optional[Dict] = None) -> List[Frame]:
    return [fr for spec in specs for fr in read_source(spec, keys)]


def prepare(frames: List[Frame], species: Sequence[str], r_c: float) -> List[Frame]:
    """Species indices and neighbour lists of frames read by read_sources."""
    assign_species(frames, species)
    for fr in frames:
        try:
            fr.build_neighbors(r_c)
        except ValueError as e:
            raise DataError(f"{fr.origin}: {e}") from None
    return frames
