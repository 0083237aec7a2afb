"""The training command on one's own data: extended XYZ with frame ranges, species from the data, config files
(flags override them), the virial loss, the progress bar, parity plots at the end, resume, export and evaluate."""
import json
import os

import numpy as np
import pytest
import torch

ase = pytest.importorskip("ase")
import ase.io  # noqa: E402
from ase import Atoms  # noqa: E402
from ase.calculators.lj import LennardJones  # noqa: E402

from batmobile import evaluate, export, train  # noqa: E402
from batmobile.data import DataError, batch_frames, dataset_statistics  # noqa: E402
from batmobile.io_utils import load_checkpoint  # noqa: E402
from batmobile.sources import prepare, read_source  # noqa: E402
from conftest import random_model  # noqa: E402
from test_train_resume import assert_same_run  # noqa: E402

TRICLINIC = np.array([[5.0, 0.0, 0.0], [2.0, 4.6, 0.0], [-1.0, 0.8, 5.2]])


def spread_positions(rng, n, cell, min_distance=1.4):
    """Random positions in a periodic cell, no two closer than min_distance (minimum image over 27 shifts)."""
    shifts = np.array([[a, b, c] for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)]) @ cell
    pos = []
    while len(pos) < n:
        x = rng.uniform(size=3) @ cell
        if all(np.linalg.norm(x - p + shifts, axis=1).min() > min_distance for p in pos):
            pos.append(x)
    return np.array(pos)


def lj_frames(count, seed):
    """An isolated Ni atom, then Ni/Al/H frames of 4-6 atoms in strained triclinic cells, labelled by ASE's
    Lennard-Jones (with stress)."""
    rng = np.random.default_rng(seed)
    frames = [Atoms("Ni", positions=[[0.0, 0.0, 0.0]], pbc=False)]   # an isolated atom: a frame without edges
    frames[0].calc = LennardJones(sigma=1.5, epsilon=0.05, rc=3.0, smooth=True)
    frames[0].get_potential_energy()
    for k in range(count):
        n = 4 + k % 3
        cell = TRICLINIC @ (np.eye(3) + 0.03 * rng.normal(size=(3, 3)))
        atoms = Atoms(list(rng.choice(["Ni", "Al", "H"], size=n)), positions=spread_positions(rng, n, cell),
                      cell=cell, pbc=True)
        atoms.calc = LennardJones(sigma=1.5, epsilon=0.05, rc=3.0, smooth=True)
        atoms.get_stress()
        frames.append(atoms)
    return frames


@pytest.fixture(scope="module")
def xyz(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("xyz") / "lj.xyz")
    ase.io.write(path, lj_frames(8, seed=4), format="extxyz")   # 9 frames
    return path


TINY = ["--C", "4", "--T", "1", "--H", "4", "--Hr", "4", "--A", "2", "--dk", "2", "--NB", "4", "--r_c", "3.0",
        "--dtype", "float64", "--device", "cpu", "--threads", "1", "--val-every", "3", "--checkpoint-every", "2",
        "--log-every", "2", "--val-frames", "0"]


def test_train_on_extxyz_end_to_end(xyz, tmp_path):
    out = str(tmp_path / "run")
    train.main(["--train", xyz + "@:6", "--val", xyz + "@6:", "--out", out, "--steps", "4", "--stress-weight", "1",
                "--batch-frames", "3",
                "--progress", "lines"] + TINY)
    ckpt = load_checkpoint(os.path.join(out, "checkpoint.pt"))
    first = read_source(xyz)
    seen = []
    for x in np.concatenate([fr.symbols for fr in first[:6]]).tolist():
        seen += [] if x in seen else [x]
    assert ckpt["hyperparameters"]["species"] == seen and ckpt["train_frames"] == 6
    final = ckpt["curve"]["validation"][-1]
    assert final["final"] and final["frames"] == 3 and final["virial_rmse_meV_per_atom"] > 0
    for name in ("parity_energy.png", "parity_forces.png"):
        assert os.path.getsize(os.path.join(out, name)) > 0
    with open(os.path.join(out, "validation.json")) as f:
        val = json.load(f)
    assert val["frames"] == 3 and abs(val["force_rmse_meV_per_A"] - final["force_rmse_meV_per_A"]) < 1e-6
    # evaluate's virial RMSE (stress_metrics) against the training validation's, computed another way
    assert abs(val["virial_rmse_meV_per_atom"] - final["virial_rmse_meV_per_atom"]) < 1e-6 * final[
        "virial_rmse_meV_per_atom"] and val["stress_rmse_GPa"] > 0 and val["stress_frames"] == 3
    # export, then evaluate the file on the same frames: the metrics of the training run's parity plots
    pt = str(tmp_path / "m.pt")
    export.main([os.path.join(out, "checkpoint.pt"), pt])
    metrics_path = str(tmp_path / "metrics.json")
    evaluate.main([pt, "--frames", xyz + "@6:", "--json", metrics_path, "--plots", str(tmp_path / "plots")])
    with open(metrics_path) as f:
        again = json.load(f)
    for k, v in again.items():
        assert abs(v - val[k]) < 1e-9 * max(1.0, abs(v)), k


def test_config_file_and_resume_match_one_run(xyz, tmp_path):
    """Options from a YAML file, the run split into chunks and resumed: the same as one run with flags."""
    one, split = str(tmp_path / "one"), str(tmp_path / "split")
    train.main(["--train", xyz + "@:6", "--val", xyz + "@6:", "--out", one, "--steps", "5", "--lr", "0.02",
                "--species", "H", "Al", "Ni", "--no-parity-plots"] + TINY)
    cfg = str(tmp_path / "run.yaml")
    with open(cfg, "w") as f:
        f.write(f"train: ['{xyz}@:6']\nval: ['{xyz}@6:']\nsteps: 5\nlr: 0.5\nspecies: [H, Al, Ni]\n"
                "parity-plots: false\n")
    train.main(["--config", cfg, "--out", split, "--chunk-steps", "3", "--lr", "0.02"] + TINY)  # flag beats file
    train.main(["--config", cfg, "--out", split, "--resume", "--lr", "0.02"] + TINY)
    a = load_checkpoint(os.path.join(one, "checkpoint.pt"))
    b = load_checkpoint(os.path.join(split, "checkpoint.pt"))
    assert b["args"]["lr"] == 0.02 and b["hyperparameters"]["species"] == ["H", "Al", "Ni"]
    assert_same_run(a, b)
    assert not os.path.exists(os.path.join(one, "parity_forces.png"))


def test_config_json_and_errors(tmp_path):
    cfg = str(tmp_path / "c.json")
    with open(cfg, "w") as f:
        json.dump({"max_minutes": 3, "energy-weight-final": 2, "train": "a.xyz", "resume": True}, f)
    args, given = train.parse_args(["--config", cfg, "--val", "b.xyz"])
    assert args.total_minutes == 3.0 and args.energy_weight_final == 2.0 and args.train == ["a.xyz"] and args.resume
    assert {"total_minutes", "energy_weight_final", "train", "resume", "val"} <= given
    for text, message in [('{"stepz": 3}', "unknown option 'stepz'"), ('{"steps": "many"}', "'many' is not a int"),
                          ('{"dtype": "float16"}', "not one of"), ('{"resume": "yes"}', "expected true or false"),
                          ("[1, 2]", "expected a mapping"), ("{", "not valid JSON")]:
        with open(cfg, "w") as f:
            f.write(text)
        with pytest.raises(SystemExit, match=message):
            train.parse_args(["--config", cfg])
    yml = str(tmp_path / "c.yaml")
    with open(yml, "w") as f:
        f.write("species: [NO, H]\n")      # YAML 1.1 reads an unquoted NO as false
    with pytest.raises(SystemExit, match="read as a boolean; quote it"):
        train.parse_args(["--config", yml])
    with open(yml, "w") as f:
        f.write("val:\n  - md.xyz@900:\n")
    with pytest.raises(SystemExit, match="YAML read 'md.xyz@900:' as a mapping; quote it"):
        train.parse_args(["--config", yml])


def test_data_errors_name_the_frame(xyz, tmp_path):
    out = str(tmp_path / "bad")
    with pytest.raises(DataError, match="--train needs --val"):
        train.main(["--train", xyz, "--out", out] + TINY)
    with pytest.raises(DataError, match=r"lj.xyz frame \d+: element\(s\) \['Ni'\] not in the model's species"):
        train.main(["--train", xyz, "--val", xyz, "--species", "H", "Al", "--out", out] + TINY)
    with pytest.raises(DataError, match="named twice"):
        train.main(["--train", xyz, "--val", xyz, "--species", "H", "H", "Al", "Ni", "--out", out] + TINY)


def test_virial_loss_terms(xyz):
    """The virial residual per frame is (model's virial - label) / N; zero for a frame labelled with the model's
    own virial."""
    model = random_model(C=8, T=1)
    model.hp.species = ["Ni", "Al"]
    model.E_ref = torch.zeros(3, dtype=torch.float64)
    model.embed = torch.nn.Parameter(torch.randn(3, 8, dtype=torch.float64))
    frames = prepare(read_source(xyz + "@1:3"), ["Ni", "Al", "H"], model.hp.r_c)
    batch = batch_frames(frames, torch.float64, "cpu")
    *_, dw = train.loss_terms(model, batch, training=False, with_virial=True)
    from conftest import compute
    for k, fr in enumerate(frames):
        W = compute(model, fr.positions, fr.species, fr.cell)["virial"]
        assert np.allclose(dw[k].detach().numpy(), (W - fr.virial) / len(fr.species), atol=1e-10)
    fr = frames[0]
    fr.virial = compute(model, fr.positions, fr.species, fr.cell)["virial"]
    *_, dw = train.loss_terms(model, batch_frames([fr], torch.float64, "cpu"), training=False, with_virial=True)
    assert np.abs(dw.detach().numpy()).max() < 1e-12


def test_stress_weight_enters_the_loss(xyz, tmp_path):
    runs = {}
    for w in ("0", "1"):
        out = str(tmp_path / w)
        train.main(["--train", xyz + "@1:3", "--val", xyz + "@3:4", "--out", out, "--steps", "1", "--stress-weight", w,
                    "--no-parity-plots", "--progress", "lines"] + TINY)
        runs[w] = load_checkpoint(os.path.join(out, "checkpoint.pt"))["model"]["embed"]
    assert not torch.equal(runs["0"], runs["1"])


def test_reference_energies_with_mixed_compositions(xyz):
    frames = prepare(read_source(xyz), ["Ni", "Al", "H"], 3.0)
    e_s = np.array([-5.0, -3.0, -1.0])
    for fr in frames:
        fr.energy = float(e_s[fr.species].sum())
    st = dataset_statistics(frames, 3)
    assert np.allclose(st["E_ref"], e_s) and st["energy_residual_std_per_atom"] < 1e-10


def test_progress_bar(xyz, tmp_path, capsys):
    train.main(["--train", xyz + "@:2", "--val", xyz + "@2:3", "--out", str(tmp_path / "p"), "--steps", "2",
                "--progress", "bar", "--no-parity-plots"] + TINY)
    captured = capsys.readouterr()
    assert "2/2" in captured.err and "loss" in captured.err and "meV/A" in captured.err
    assert "final validation" in captured.out


def test_committee_members_in_parallel_processes(xyz, tmp_path):
    """python -m batmobile.committee train --jobs 2: both members train at once (own processes, own logs), each with
    its own seed, and are exported; one member per process gives the same model as the sequential command."""
    from batmobile import committee
    args = ["--train", xyz + "@:6", "--val", xyz + "@6:", "--steps", "2"] + TINY
    par = str(tmp_path / "par")
    seq = str(tmp_path / "seq")
    committee.main(["train", "--members", "2", "--jobs", "2", "--out", par] + args)
    committee.main(["train", "--members", "2", "--out", seq] + args)
    for k in range(2):
        assert os.path.isfile(os.path.join(par, f"member_{k}.log"))
        a = load_checkpoint(os.path.join(par, f"member_{k}", "checkpoint.pt"))["model"]
        b = load_checkpoint(os.path.join(seq, f"member_{k}", "checkpoint.pt"))["model"]
        assert all(torch.equal(a[n], b[n]) for n in a), f"member {k}: parallel and sequential runs differ"
    m0 = load_checkpoint(os.path.join(par, "member_0", "checkpoint.pt"))["model"]
    m1 = load_checkpoint(os.path.join(par, "member_1", "checkpoint.pt"))["model"]
    assert not all(torch.equal(m0[n], m1[n]) for n in m0), "the members' seeds made no difference"
    with pytest.raises(SystemExit, match="--jobs"):
        committee.main(["train", "--members", "2", "--jobs", "0", "--out", par] + args)


def test_deepmd_systems_round_trip(xyz, tmp_path):
    """python -m batmobile.deepmd_io: extended XYZ frames (mixed sizes, triclinic, an isolated atom, with stress) as
    DeePMD systems read back equal, frame order kept within each system; partly periodic frames are refused."""
    from batmobile import deepmd_io
    out = str(tmp_path / "npy")
    systems = deepmd_io.main([xyz, "--out", out])
    frames = read_source(xyz)
    back = [fr for s in systems for fr in read_source(s)]
    assert len(back) == len(frames) and len(systems) > 1
    key = lambda fr: (tuple(fr.symbols.tolist()), fr.energy)
    by_key = {key(fr): fr for fr in back}
    for fr in frames:
        b = by_key[key(fr)]
        assert np.allclose(b.positions, fr.positions) and np.allclose(b.forces, fr.forces)
        assert b.pbc == fr.pbc
        if any(fr.pbc):
            assert np.allclose(b.cell, fr.cell)
        assert (b.virial is None) == (fr.virial is None)
        if fr.virial is not None:
            assert np.allclose(b.virial, fr.virial)
    part = read_source(xyz)[1]
    part.pbc = (True, True, False)
    with pytest.raises(DataError, match="periodic along some directions only"):
        deepmd_io.write_systems([part], str(tmp_path / "bad"))
