"""The parts of bench/accuracy/e3nn_train.py that need no e3nn: water box reader and replication, minimum-image
neighbour list, training loop and timing (with a small pair model standing in for the e3nn one)."""
import importlib.util
import os

import numpy as np
import pytest
import torch

from batmobile.data import DEFAULT_ROOT, dataset_statistics, read_set
from batmobile.model import envelope
from batmobile.neighbors import neighbor_list

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "accuracy", "e3nn_train.py")
spec = importlib.util.spec_from_file_location("e3nn_train", SCRIPT)
e3nn_train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(e3nn_train)


def edge_set(sender, receiver, shifts):
    return sorted(zip(np.asarray(sender).tolist(), np.asarray(receiver).tolist(),
                      map(tuple, np.asarray(shifts).tolist())))


def test_minimum_image_neighbors_match_full_list():
    rng = np.random.default_rng(5)
    cell = np.array([[11.0, 0.0, 0.0], [0.5, 10.8, 0.0], [-0.3, 0.4, 11.2]])
    positions = rng.uniform(size=(40, 3)) @ cell + rng.normal(scale=3.0, size=(40, 3))   # some outside the cell
    ref = neighbor_list(positions, cell, 5.0)
    got = e3nn_train.minimum_image_neighbors(torch.tensor(positions), torch.tensor(cell), 5.0, chunk=7)
    assert len(ref[0]) > 100 and edge_set(*ref) == edge_set(*got)
    with pytest.raises(ValueError):
        e3nn_train.minimum_image_neighbors(torch.tensor(positions), torch.tensor(cell), 6.0)


def test_water_box_and_replica():
    x, species, cell = e3nn_train.read_lammps_atomic(e3nn_train.WATER_BOX)
    assert x.shape == (648, 3) and (species == 0).sum() == 216 and (species == 1).sum() == 432
    assert np.allclose(np.diag(cell), 18.64) and x.min() >= 0 and x.max() <= 18.64
    pos, spc, box = e3nn_train.replicate(x, species, cell, (2, 1, 1))
    assert pos.shape == (1296, 3) and np.allclose(np.diag(box), [37.28, 18.64, 18.64])
    one = e3nn_train.minimum_image_neighbors(torch.tensor(x), torch.tensor(cell), 5.0)
    two = e3nn_train.minimum_image_neighbors(torch.tensor(pos), torch.tensor(box), 5.0)
    assert len(two[0]) == 2 * len(one[0])   # the replica has the same environments


class PairModel(torch.nn.Module):
    """E_i = E_ref[s_i] + sum_j a[s_i, s_j] exp(-b d_ij) u(d_ij): enough to exercise the loss, forces and loop."""

    def __init__(self, e_ref):
        super().__init__()
        self.a = torch.nn.Parameter(torch.full((2, 2), 0.1))
        self.b = torch.nn.Parameter(torch.tensor(1.0))
        self.register_buffer("E_ref", torch.tensor(e_ref))

    def atomic_energies(self, species, edge_vec, sender, receiver):
        d = edge_vec.norm(dim=1)
        pair = self.a[species[receiver], species[sender]] * torch.exp(-self.b * d) * envelope(d, 5.0)
        return self.E_ref[species] + torch.zeros(len(species), dtype=d.dtype).index_add(0, receiver, pair)


@pytest.mark.skipif(not os.path.isdir(DEFAULT_ROOT), reason="water data not available")
def test_training_loop_and_timing():
    frames = read_set(DEFAULT_ROOT, "data_0/set.000", ["O", "H"])[:3]
    for fr in frames:
        fr.build_neighbors(5.0)
    stats = dataset_statistics(frames, 2)
    lines = []
    model, curve, steps, seconds = e3nn_train.train_for(
        lambda: PairModel(stats["E_ref"]), frames, frames[:1], 0.0, 2e-2, 10.0, stats["force_rms"], torch.float64,
        "cpu", lines.append, curve_every=2, val_every=4, max_steps=8)
    assert steps == 8 and curve["train"]["step"] == [2, 4, 6, 8] and len(curve["validation"]) == 2
    assert curve["train"]["loss"][-1] < curve["train"]["loss"][0] and len(lines) == 2
    assert curve["train"]["lr"][0] > curve["train"]["lr"][-1]
    assert not torch.equal(model.a.detach(), torch.full((2, 2), 0.1, dtype=torch.float64))   # EMA weights moved
    x, species, cell = e3nn_train.read_lammps_atomic(e3nn_train.WATER_BOX)
    t = e3nn_train.time_energy_forces(model, x, species, cell, 5.0, torch.float64, "cpu", warmup=1, reps=2)
    assert t["seconds_per_evaluation"] > 0 and t["edges"] > 20 * 648 and t["peak_device_bytes"] is None
