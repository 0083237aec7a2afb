"""Batmobile: PyTorch reference of the equivariant attention potential defined in docs/model.md."""
from .export import load_potential, save_potential
from .model import BatmobileModel, Hyperparameters, evaluate_structure

__all__ = ["BatmobileModel", "Hyperparameters", "evaluate_structure", "load_potential", "save_potential"]
