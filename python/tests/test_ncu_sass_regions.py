"""bench/profile/ncu_sass_regions.py: Nsight Compute's SASS source page becomes per-kernel instruction regions,
stall shares and shared-memory bank-conflict figures."""
import csv

from script_loader import load_script

regions = load_script("bench/profile/ncu_sass_regions.py")

NAME = ("void batmobile::kernels::detail::const_slot_kernel_lb<Kokkos::Impl::ParallelFor<batmobile::kernels::"
        "InteractionKernel<float, Kokkos::Cuda, (int)2, (bool)1, (int)8, (int)1, batmobile::kernels::FixedDims<(int)32, "
        "(int)32, (int)8, (int)4, (int)8>>, Kokkos::TeamPolicy<Kokkos::Cuda, batmobile::kernels::InteractionKernel<float,"
        " Kokkos::Cuda, (int)2, (bool)1, (int)8, (int)1, batmobile::kernels::FixedDims<(int)32, (int)32, (int)8, (int)4, "
        "(int)8>>::RecvAdjT<(bool)1>, Kokkos::LaunchBounds<(unsigned int)128, (unsigned int)4>>, Kokkos::Cuda>, (int)0, "
        "(unsigned int)128, (unsigned int)4>()")
HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
          "L1 Wavefronts Shared Excessive", "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal",
          "stall_long_sb", "stall_short_sb", "stall_long_sb (Not Issued)"]
# (source, stall samples, executed, shared excess, shared wavefronts, ideal, long_sb, short_sb)
ROWS = [("LDG.E.128 R12, [R8.64]", 1, 100, 0, 0, 0, 0, 1),
        ("HMMA.16816.F32 R12, R12, R22, RZ", 9, 100, 0, 0, 0, 9, 0),
        ("STS [R13], R12", 2, 100, 300, 400, 100, 0, 2),
        ("FFMA R1, R2, R3, R4", 4, 20, 0, 0, 0, 2, 2),
        ("LDS R9, [R8]", 4, 20, 140, 160, 20, 0, 4)]


def write_report(path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(["Kernel Name", NAME])
        w.writerow(HEADER)
        for k, (src, samples, ex, exc, wf, ideal, lsb, ssb) in enumerate(ROWS):
            w.writerow([hex(k * 16), src, samples, ex, exc, wf, ideal, lsb, ssb, 99])


def test_kernel_name_tag_and_dimensions():
    assert regions.short_name(NAME) == ("InteractionKernel<float, Cuda, 2, 1, 8, 1, FixedDims<32, 32, 8, 4, 8>>"
                                        "::RecvAdjT")
    assert regions.short_name("bm_node_adjoint") == "bm_node_adjoint"


def test_stalls_shared_memory_and_regions(tmp_path):
    path = tmp_path / "ncu_sass.csv"
    write_report(path)
    [(name, hdr, rows)] = regions.read_kernels(path)
    # all-sample stall columns only: long_sb 11 and short_sb 9 of 20 samples (the "Not Issued" column is ignored)
    assert regions.stall_shares(hdr, rows) == [("long_sb", 0.55), ("short_sb", 0.45)]
    excess, waves, worst = regions.shared_excess(hdr, rows)
    assert (excess, waves) == (440, 560)
    assert worst == [(2, 300, 4.0), (4, 140, 8.0)]  # the 4-way stores first, then the 8-way loads
    ie, ss = hdr.index("Instructions Executed"), hdr.index("Warp Stall Sampling (All Samples)")
    # runs of equal execution counts: the three per-tile instructions, then the two per-edge ones
    assert regions.regions(rows, ie, ss) == [[0, 100, 3, 12], [3, 20, 2, 8]]
    assert regions.region_opcodes(rows, 0, 3) == [("LDG", 1), ("HMMA", 1), ("STS", 1)]


def test_report_lines(tmp_path, capsys, monkeypatch):
    path = tmp_path / "ncu_sass.csv"
    write_report(path)
    monkeypatch.setattr("sys.argv", ["ncu_sass_regions.py", str(path)])
    regions.main()
    out = capsys.readouterr().out
    assert "::RecvAdjT: 5 SASS instructions, 0.0 M warp instructions" in out
    assert "stalls: long_sb 55%, short_sb 45%" in out
    assert "wavefronts beyond the ideal (79 %); @2 STS [R13], R12 4x; @4 LDS R9, [R8] 8x" in out
    assert "@    0:    3 instructions x       100 =  88.2 % (stall samples 12): LDG 1, HMMA 1, STS 1" in out
    assert "@    3:    2 instructions x        20 =  11.8 % (stall samples 8): FFMA 1, LDS 1" in out
