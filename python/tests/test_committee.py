"""python -m batmobile.committee: training several seeds (argument checks) and selecting frames by model deviation
from a LAMMPS dump (orthogonal and triclinic boxes) into extended XYZ."""
import numpy as np
import pytest

from batmobile import committee

DEVI = """#       step         max_devi_v         min_devi_v         avg_devi_v         max_devi_f         min_devi_f         avg_devi_f
           0       1.0e-03       1.0e-05       2.0e-04       0.010       0.001       0.005
          10       1.0e-03       1.0e-05       2.0e-04       0.120       0.001       0.005
          20       1.0e-03       1.0e-05       2.0e-04       0.300       0.001       0.005
"""


def snapshot(step, ids, types, pos, box=None, tilt=None):
    head = "ITEM: BOX BOUNDS pp pp pp\n" if tilt is None else "ITEM: BOX BOUNDS xy xz yz pp pp pp\n"
    box = box or [(0.0, 10.0), (0.0, 11.0), (0.0, 12.0)]
    bounds = "".join(f"{lo} {hi}\n" if tilt is None else f"{lo} {hi} {t}\n" for (lo, hi), t in
                     zip(box, tilt or [0, 0, 0]))
    rows = "".join(f"{i} {t} {x} {y} {z}\n" for i, t, (x, y, z) in zip(ids, types, pos))
    return f"ITEM: TIMESTEP\n{step}\nITEM: NUMBER OF ATOMS\n{len(ids)}\n{head}{bounds}ITEM: ATOMS id type x y z\n{rows}"


def read_extxyz(path):
    lines = open(path).read().splitlines()
    frames, k = [], 0
    while k < len(lines):
        n = int(lines[k])
        comment = lines[k + 1]
        lattice = [float(v) for v in comment.split('Lattice="')[1].split('"')[0].split()]
        atoms = [l.split() for l in lines[k + 2:k + 2 + n]]
        frames.append((comment, np.array(lattice).reshape(3, 3), [a[0] for a in atoms],
                       np.array([[float(v) for v in a[1:]] for a in atoms])))
        k += 2 + n
    return frames


def test_select_by_max_force_deviation(tmp_path):
    devi = tmp_path / "model_devi.out"
    devi.write_text(DEVI)
    pos = [(1.0, 2.0, 3.0), (4.0, 5.0, 6.0), (7.0, 8.0, 9.0)]
    dump = tmp_path / "traj.dump"
    # atoms out of id order; step 5 has no deviation line; step 20 is triclinic (xy 1, xz 0.5, yz 0.25)
    dump.write_text(snapshot(0, [3, 1, 2], [1, 1, 2], pos) + snapshot(5, [1, 2, 3], [1, 2, 1], pos)
                    + snapshot(10, [3, 1, 2], [1, 1, 2], pos)
                    + snapshot(20, [1, 2, 3], [1, 2, 1], pos, box=[(-1.0, 11.5), (0.0, 11.25), (0.0, 12.0)],
                               tilt=[1.0, 0.5, 0.25]))
    out = tmp_path / "picked.extxyz"
    n = committee.main(["select", "--devi", str(devi), "--dump", str(dump), "--species", "H", "O",
                        "--lo", "0.05", "--hi", "1.0", "--out", str(out)])
    frames = read_extxyz(out)
    assert n == 2 and len(frames) == 2
    (c10, cell10, names10, pos10), (c20, cell20, names20, _) = frames
    assert "step=10" in c10 and "max_devi_f=0.12" in c10 and 'pbc="T T T"' in c10
    assert names10 == ["H", "O", "H"]                        # sorted by id: ids 1 (type 1), 2 (type 2), 3 (type 1)
    assert np.allclose(pos10[0], (4.0, 5.0, 6.0)) and np.allclose(cell10, np.diag([10.0, 11.0, 12.0]))
    # bounds -> lo/hi: xlo = -1 - min(0, 1, 0.5, 1.5) = -1, xhi = 11.5 - 1.5 = 10, ylo = 0, yhi = 11
    assert np.allclose(cell20, [[11.0, 0, 0], [1.0, 11.0, 0], [0.5, 0.25, 12.0]]) and names20 == ["H", "O", "H"]


def test_select_errors(tmp_path):
    devi = tmp_path / "model_devi.out"
    devi.write_text(DEVI)
    dump = tmp_path / "traj.dump"
    dump.write_text(snapshot(10, [1, 2], [1, 3], [(0, 0, 0), (1, 1, 1)]))
    args = ["select", "--devi", str(devi), "--dump", str(dump), "--out", str(tmp_path / "o.xyz")]
    with pytest.raises(SystemExit, match="atom type 3"):
        committee.main(args + ["--species", "H", "O", "--lo", "0", "--hi", "1"])
    with pytest.raises(SystemExit, match="above --hi"):
        committee.main(args + ["--species", "H", "O", "--lo", "1", "--hi", "0.5"])
    (tmp_path / "bad.out").write_text("0 1 2\n")
    with pytest.raises(SystemExit, match="3 columns, expected 7"):
        committee.main(["select", "--devi", str(tmp_path / "bad.out")] + args[3:] + ["--species", "H", "O",
                                                                                   "--lo", "0", "--hi", "1"])
    (tmp_path / "nocol.dump").write_text(snapshot(10, [1], [1], [(0, 0, 0)]).replace("id type x y z", "id x y z"))
    with pytest.raises(SystemExit, match="lacks the column 'type'"):
        committee.main(["select", "--devi", str(devi), "--dump", str(tmp_path / "nocol.dump"), "--out",
                        str(tmp_path / "o.xyz"), "--species", "H", "--lo", "0", "--hi", "1"])


def test_train_arguments():
    with pytest.raises(SystemExit, match="at least 2 members"):
        committee.main(["train", "--members", "1", "--out", "x"])
    with pytest.raises(SystemExit, match="use --first-seed"):
        committee.main(["train", "--members", "2", "--out", "x", "--seed", "3"])
    with pytest.raises(SystemExit):
        committee.main(["nothing"])


def test_train_members_differ_by_seed(tmp_path):
    """Two tiny members: each a finished run with its own seed, exported; their weights differ."""
    import torch
    from batmobile.export import load_potential
    from test_train_resume import CALL_OPTIONS, run_options, write_deepmd_set
    root = str(tmp_path / "data")
    write_deepmd_set(root, "train", 5, seed=1)
    write_deepmd_set(root, "val", 2, seed=2)
    out = str(tmp_path / "committee")
    paths = committee.main(["train", "--members", "2", "--out", out, "--first-seed", "7", "--steps", "3"]
                           + run_options(root) + CALL_OPTIONS)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["member_0.pt", "member_1.pt"]
    a, b = (load_potential(p) for p in paths)
    assert a.header["training"]["train_command"].count("--seed 7") == 1
    assert b.header["training"]["train_command"].count("--seed 8") == 1
    assert not torch.equal(a.embed, b.embed)


def test_committee_evidence(tmp_path):
    """bench/accuracy/committee_evidence.py on two tiny members: DFT labels on the data frames, the label model's on
    the generated ones (here the first member itself, so its error there is exactly 0)."""
    import json
    import os
    from test_train_resume import CALL_OPTIONS, run_options, write_deepmd_set
    root = str(tmp_path / "data")
    write_deepmd_set(root, "train", 5, seed=1)
    write_deepmd_set(root, "val", 3, seed=2)
    paths = committee.main(["train", "--members", "2", "--out", str(tmp_path / "c"), "--steps", "2"]
                           + run_options(root) + CALL_OPTIONS)
    from script_loader import load_script
    ev = load_script("bench/accuracy/committee_evidence.py")
    out = str(tmp_path / "e.json")
    ev.main(["--members", *paths, "--label-model", paths[0], "--data", root, "--sets", "val/set.000",
             "--frames-per-kind", "2", "--displace", "0.05", "--compress", "0.98", "--out-json", out,
             "--out-png", str(tmp_path / "e.png")])
    r = json.load(open(out))
    dft = [p for p in r["points"] if p["labels"] == "DFT"]
    gen = [p for p in r["points"] if p["labels"] == "label model"]
    assert len(dft) == 3 and len(gen) == 4
    assert all(p["max_force_error"] > 0 and p["max_devi_f"] > 0 for p in dft)
    assert all(p["max_force_error"] == 0.0 and p["max_devi_f"] > 0 for p in gen)
    assert os.path.getsize(str(tmp_path / "e.png")) > 1000
