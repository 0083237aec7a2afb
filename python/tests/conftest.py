import os
import sys

import numpy as np
import pytest
import torch

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# The package from python/, unless the tests run against the installed one (`pytest --installed`: scripts/test.sh
# after `pip install ./python` into a venv; test_package.py checks which one was imported). An installed package does
# not find the bundled water data beside itself: BATMOBILE_WATER_DATA points there.
INSTALLED = False   # set by pytest_configure, before any test module is imported
os.environ.setdefault("BATMOBILE_WATER_DATA", os.path.join(REPO, "data", "water", "dft_train"))
torch.set_num_threads(1)


def pytest_addoption(parser):
    parser.addoption("--installed", action="store_true",
                     help="test the pip-installed batmobile package instead of the one in python/")


def pytest_configure(config):
    global INSTALLED
    INSTALLED = config.getoption("installed")
    if not INSTALLED:
        sys.path.insert(0, os.path.join(REPO, "python"))
    # imported now, so that scripts that put python/ on sys.path later (bench/) find this package already loaded
    import batmobile  # noqa: F401


def random_model(L=2, C=8, T=2, seed=1, scale=0.3, correlation=1):
    """Small float64 model with every parameter perturbed (biases, gates, E_ref non-zero)."""
    from batmobile.model import BatmobileModel, Hyperparameters
    hp = Hyperparameters(L=L, C=C, T=T, A=2, dk=4, H=16, Hr=8, avg_num_neighbors=4.0, energy_scale=1.7,
                         correlation=correlation)
    model = BatmobileModel(hp, seed=seed).double()
    g = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
        model.E_ref.copy_(torch.tensor([-2.5, -0.75]))
    return model


def compute(model, positions, species, cell, virial=True):
    from batmobile.model import evaluate_structure
    from batmobile.neighbors import neighbor_list
    s, r, sh = neighbor_list(positions, cell, model.hp.r_c)
    T = lambda x, dt=torch.float64: torch.as_tensor(np.asarray(x), dtype=dt)
    out = evaluate_structure(model, T(positions), T(species, torch.long), T(cell), T(s, torch.long),
                             T(r, torch.long), T(sh, torch.long), virial=virial)
    return {k: v.detach().numpy() for k, v in out.items()}


@pytest.fixture(scope="module")
def model():
    return random_model()


@pytest.fixture(scope="module")
def system():
    """9 atoms in a small triclinic box (5.5 A < 2 r_c: several images of the same atom are neighbours)."""
    rng = np.random.default_rng(3)
    cell = np.array([[5.5, 0.0, 0.0], [0.7, 5.8, 0.0], [-0.4, 0.3, 6.1]])
    frac = rng.uniform(size=(9, 3))
    species = np.array([0, 1, 1, 0, 1, 1, 0, 1, 1])
    return frac @ cell, species, cell
