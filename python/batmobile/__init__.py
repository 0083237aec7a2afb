"""Batmobile: PyTorch reference of the equivariant attention potential defined in docs/model.md."""
from ._version import __version__
from .model import BatmobileModel, Hyperparameters, evaluate_structure


def load_potential(path, dtype=None):
    """Rebuild a model from a .pt model file (see batmobile.export); imported lazily so that
    `python -m batmobile.export` does not find its own module pre-imported."""
    import torch
    from .export import load_potential as _load
    return _load(path, torch.float64 if dtype is None else dtype)


def save_potential(model, path, extra_header=None):
    from .export import save_potential as _save
    _save(model, path, extra_header)


__all__ = ["__version__", "BatmobileModel", "Hyperparameters", "evaluate_structure", "load_potential",
           "save_potential"]
