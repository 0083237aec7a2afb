"""The size/temperature g_OO study's analysis (examples/lammps_inputs/water216/analyze_rdf_study.py) on synthetic
data with known answers: peak finding, block-jackknife errors, reading a resumed case, the comparison output."""
import json

import numpy as np

from script_loader import load_script

study = load_script("examples/lammps_inputs/water216/analyze_rdf_study.py")
R = np.arange(0.015, 6.0, 0.03)   # the bin centres of in.water216's compute rdf (200 bins to 6 A)


def gaussian_goo(r0, height=3.0, width=0.12):
    return 1.0 + (height - 1.0) * np.exp(-((R - r0) / width) ** 2)


def test_first_peak_between_bins():
    for r0 in (2.70, 2.743, 2.757, 2.78):
        pr, pg = study.first_peak(R, gaussian_goo(r0))
        assert abs(pr - r0) < 0.003 and abs(pg - 3.0) < 0.02, (r0, pr, pg)
    # the window keeps a higher second maximum out
    g = gaussian_goo(2.75) + 5.0 * np.exp(-((R - 4.5) / 0.3) ** 2)
    assert abs(study.first_peak(R, g)[0] - 2.75) < 0.003


def binned(fine, g_fine, dr):
    n = int(round(dr / 0.001))
    m = len(fine) // n * n
    return fine[:m].reshape(-1, n).mean(1), g_fine[:m].reshape(-1, n).mean(1)


def test_fitted_peak_depends_little_on_bin_width_and_noise():
    # a mildly skewed peak (steeper inside), binned by averaging a fine curve over bins of 0.02, 0.025 and 0.03 A
    fine = np.arange(0.0005, 6.0, 0.001)
    g_fine = 1.0 + 2.0 * np.exp(-((fine - 2.75) / np.where(fine < 2.75, 0.10, 0.14)) ** 2)
    fits = [study.peak_fit(*binned(fine, g_fine, dr))[0] for dr in (0.02, 0.025, 0.03)]
    assert np.ptp(fits) < 0.003 and abs(np.mean(fits) - 2.75) < 0.015, fits
    # with bin noise (2 % at 0.02 A bins), the fit scatters less than the three-bin parabola
    rng = np.random.default_rng(5)
    r, g = binned(fine, g_fine, 0.02)
    fit, par = [], []
    for _ in range(200):
        noisy = g * (1 + rng.normal(0, 0.02, g.size))
        fit.append(study.peak_fit(r, noisy)[0])
        par.append(study.first_peak(r, noisy)[0])
    assert np.std(fit) < 0.6 * np.std(par), (np.std(fit), np.std(par))


def test_jackknife_of_a_linear_quantity_is_the_standard_error_of_group_means():
    rng = np.random.default_rng(1)
    blocks = rng.normal(2.0, 0.5, size=(100, 3))
    value, err = study.jackknife(blocks, lambda b: b, 10)
    means = blocks.reshape(10, 10, 3).mean(axis=1)
    assert np.allclose(value, blocks.mean(axis=0))
    assert np.allclose(err, means.std(axis=0, ddof=1) / np.sqrt(10))
    # unequal groups (103 blocks) still give the standard error of independent blocks, sigma / sqrt(n)
    many = rng.normal(0.0, 1.0, size=(103 * 40, 1)).reshape(40, 103)
    errs = [study.jackknife(m[:, None], lambda b: b[0], 10)[1] for m in many]
    assert abs(np.mean(errs) / (1.0 / np.sqrt(103)) - 1.0) < 0.15
    assert study.jackknife(blocks[:1], lambda b: b, 10)[1] is None   # one block: no error


def test_peak_error_matches_the_scatter_of_independent_runs():
    rng = np.random.default_rng(7)
    est, errs = [], []
    for _ in range(40):
        # 100 blocks whose peak positions scatter by 0.02 A around 2.75 A, plus bin noise
        blocks = np.array([gaussian_goo(2.75 + rng.normal(0, 0.02)) + rng.normal(0, 0.02, R.size)
                           for _ in range(100)])
        p = study.peak_with_error(R, blocks, n_groups=10)
        est.append(p["r"])
        errs.append(p["r_err"])
        assert p["groups"] == 10 and p["g_err"] > 0
    scatter = np.std(est, ddof=1)
    assert abs(np.mean(est) - 2.75) < 3 * scatter / np.sqrt(len(est)) + 0.002
    assert 0.6 < np.mean(errs) / scatter < 1.6, (np.mean(errs), scatter)


def test_stderr_by_group_length_grows_for_correlated_blocks():
    rng = np.random.default_rng(3)
    # a slow drift of the peak position (correlated over ~10 blocks) makes longer groups show larger errors
    walk = np.convolve(rng.normal(0, 0.02, 130), np.ones(10) / np.sqrt(10), mode="valid")[:120]
    blocks = np.array([gaussian_goo(2.75 + w) for w in walk])
    by = study.stderr_by_group_length(R, blocks, block_ps=0.5)
    assert set(by) == {"0.5", "1", "2.5", "5", "10"}
    assert by["5"] > 1.5 * by["0.5"]


def write_case(d, name, n, T, r0, steps=(200, 400, 600, 800, 1000, 1200), equil=200, total=1200, done=True,
               truncated=False):
    c = d / name
    c.mkdir()
    (c / "case.env").write_text(f"n_water={n}\ntemperature={T}\nbox=12.444661\ndata='water64_start.lmp'\n"
                                f"model='m.pt'\ntimestep_fs=0.5\nequil_steps={equil}\ntotal_steps={total}\n"
                                f"rdf_block=200\nlmp_args=''\n")

    def block(step, r0_):
        g = gaussian_goo(r0_)
        return f"{step} {R.size}\n" + "".join(f"{k + 1} {R[k]:.6f} {g[k]:.6f} 0 1 0 1 0\n" for k in range(R.size))

    # part 1 reaches step 800 (its block at 800 is superseded by part 2's), part 2 continues from 600
    first = [s for s in steps if s <= 800]
    (c / "rdf.dat").write_text("# a\n# b\n# c\n" + "".join(block(s, 3.5 if s <= equil else r0 + 0.1 * (s == 800))
                                                          for s in first))
    text = "# a\n" + "".join(block(s, r0 + 0.001 * (s % 400 == 0)) for s in steps if s > 600)
    if truncated:
        text += f"1400 {R.size}\n1 0.015 0.0 0"     # a part killed while writing a block
    (c / "rdf_cont_1.dat").write_text(text)
    log = "Step Time Temp PotEng\n" + "".join(f"{s} {s * 5e-4} {T + (s % 400 == 0)} 0\n" for s in range(0, 1201, 100))
    (c / "log.lammps").write_text(log + "Loop time of 1 on 1 procs\n\nPerformance: 1 ns/day, 1 hours/ns, "
                                  "321.0 timesteps/s\n")
    if done:
        (c / "DONE").write_text("")
    return c


def test_case_merges_parts_skips_equilibration_and_a_cut_block(tmp_path):
    c = write_case(tmp_path, "n64_T300", 64, 300, 2.76, truncated=True)
    res, (r, g) = study.analyze_case(str(c), n_groups=5)
    assert res["rdf_blocks"] == 5 and res["production_ps"] == 0.5 and res["complete"]
    assert abs(res["first_peak_r"] - 2.7604) < 0.003 and res["first_peak_r_err"] < 0.002
    assert abs(res["temperature_K_mean"] - 300.3) < 1e-9 and res["steps_per_second_last_part"] == 321.0
    out = np.loadtxt(c / "results" / "gOO.dat")
    assert out.shape == (R.size, 3) and np.allclose(out[:, 0], R, atol=1e-6)
    assert json.load(open(c / "results" / "summary.json"))["n_water"] == 64


def test_compare_writes_json_and_png(tmp_path):
    for name, r0 in (("n64_T300", 2.74), ("n64_T330", 2.76), ("n216_T300", 2.75)):
        n, T = name[1:].split("_T")
        write_case(tmp_path, name, int(n), int(T), r0, done=name != "n216_T300")
    out = tmp_path / "res"
    s = study.compare(str(tmp_path), str(out), study.SHARED)
    j = json.load(open(out / "rdf_size_temperature.json"))
    assert set(j["cases"]) == {"n64_T300", "n64_T330", "n216_T300"} and not j["all_complete"]
    # the DFT frames binned as the cases (0.03 A) and as analyze_rdf.py (0.02 A, the headline 2.734 A)
    assert j["dft_frames"]["bin_width_A"] == 0.03 and j["dft_frames"]["first_peak_r_err"] > 0
    assert abs(j["dft_frames_headline_binning"]["first_peak_r"] - 2.734) < 0.002
    assert abs(j["dft_frames"]["first_peak_fit_r"] - 2.744) < 0.003
    d = j["differences"]["first_peak_r"]
    assert abs(d["temperature_330_minus_300_at_64"]["value"] - 0.02) < 0.004
    assert abs(d["size_216_minus_64_at_300K"]["value"] - 0.01) < 0.004
    assert "size_216_minus_64_at_330K" not in d and s["cases"]["n216_T300"]["complete"] is False
    assert (out / "rdf_size_temperature.png").stat().st_size > 0
