"""bench/profile/roofline.py: Nsight Compute's raw CSV becomes a per-step account per kernel role with the right
FLOP, byte and peak-fraction arithmetic."""
import json

from script_loader import load_script

roofline = load_script("bench/profile/roofline.py")

FWD0 = ("void batmobile::kernels::detail::const_slot_kernel_lb<Kokkos::Impl::ParallelFor<batmobile::kernels::"
        "InteractionKernel<float, Kokkos::Cuda, (int)2, (bool)1, (int)8, (int)1>, Kokkos::TeamPolicy<Kokkos::Cuda, "
        "batmobile::kernels::InteractionKernel<float, Kokkos::Cuda, (int)2, (bool)1, (int)8, (int)1>::ForwardT<(bool)1>"
        ">, Kokkos::Cuda>, (int)0, (unsigned int)128, (unsigned int)4>()")
ADJ1 = FWD0.replace("(int)1>", "(int)2>").replace("ForwardT", "SendAdjT")
NODE = ("void Kokkos::Impl::cuda_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<batmobile::model_detail::"
        "NodeForward<float, Kokkos::Cuda, 2>, Kokkos::TeamPolicy<Kokkos::Cuda>, Kokkos::Cuda>>()")
METRICS = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg", "smsp__inst_executed.sum",
           "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
           "sm__inst_executed_pipe_tensor_op_hmma.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"]


def write_csv(path, rows):
    head = ["ID", "Kernel Name"] + METRICS
    lines = ["==PROF== Connected to process 1", ",".join(f'"{h}"' for h in head),
             ",".join(['""', '""'] + ['"unit"'] * len(METRICS))]
    for k, (name, vals) in enumerate(rows):
        lines.append(",".join([f'"{k}"', f'"{name}"'] + [f'"{v:,}"' for v in vals]))
    path.write_text("\n".join(lines) + "\n")


# the same kernels as ncu --kernel-name-base demangled prints them (no namespaces, no casts)
FWD0_SHORT = ("void detail::const_slot_kernel_lb<ParallelFor<kernels::InteractionKernel<float, Cuda, 2, 1, 32, 1>, "
              "TeamPolicy<Cuda, kernels::InteractionKernel<float, Cuda, 2, 1, 32, 1>::ForwardT<1>, LaunchBounds<128, 4>>, "
              "Cuda>, 0, 128, 4>()")
RECV1_SHORT = FWD0_SHORT.replace("32, 1>", "8, 2>").replace("ForwardT", "RecvAdjT")
READOUT_LAMBDA = ("void cuda_parallel_launch_local_memory<ParallelReduce<CudaFunctorAdapter<void model_detail::readout<float, "
                  "Cuda>(ModelData<T1, T2>, const View<double, T2, MemoryTraits<1>> &)::[lambda(const CudaTeamMember &, "
                  "double &) (instance 1)], TeamPolicy<Cuda>, double>, Cuda>>(T1)")
CSR_SCAN = ("void cuda_parallel_launch_local_memory<ParallelScan<void build_sender_csr<Cuda>(int, int, const View<int *, "
            "T1> &)::[lambda(int, int &, bool) (instance 2)], RangePolicy<Cuda>, Cuda>>(T1)")


def test_kernel_groups_name_the_fused_roles():
    assert roofline.kernel_group(FWD0_SHORT) == "fused forward (first layer)"
    assert roofline.kernel_group(RECV1_SHORT) == "fused receiver adjoint (last layer)"
    assert roofline.kernel_group(READOUT_LAMBDA) == "readout reduce #1"
    assert roofline.kernel_group(CSR_SCAN) == "build_sender_csr scan #2"
    assert roofline.kernel_group(FWD0) == "fused forward (first layer)"
    assert roofline.kernel_group(ADJ1) == "fused sender adjoint (last layer)"
    assert roofline.kernel_group(NODE) == "NodeForward"


def test_account_per_step_and_peak_fractions(tmp_path):
    # two evaluations: the first layer's forward twice; 1 ms at 1.5 GHz (1.5e6 cycles)
    fwd = [1_000_000, 1_500_000, 1_000_000, 2_000_000, 1_000_000, 100, 4_800_000, 0]
    node = [500_000, 750_000, 10, 0, 0, 7, 0, 0]  # (tensor-pipe counts outside the fused kernels are not FLOP)
    write_csv(tmp_path / "ncu_648_mixed.csv", [(FWD0, fwd), (NODE, node), (FWD0, fwd)])
    rows = roofline.read_ncu_csv(str(tmp_path / "ncu_648_mixed.csv"))
    assert len(rows) == 3 and rows[0]["gpu__time_duration.sum"] == 1e6
    acc = roofline.account(rows, "f16")
    assert acc["evaluations_in_file"] == 2
    f = acc["kernels"][0]
    assert f["kernel"] == "fused forward (first layer)" and f["launches_per_step"] == 1
    assert abs(f["time_us_per_step"] - 1000.0) < 1e-9 and abs(f["sm_clock_ghz"] - 1.5) < 1e-12
    assert abs(f["fp32_gflop"] - 5e-3) < 1e-15                         # 2 x 2e6 FMA + 1e6 add
    assert abs(f["tensor_gflop"] - 100 * 4096e-9) < 1e-15
    assert abs(f["fp32_fraction_of_peak"] - 5e6 / (1e-3 * 132 * 256 * 1.5e9)) < 1e-15
    assert abs(f["dram_fraction_of_peak"] - 4.8e6 / (1e-3 * 4.8e12)) < 1e-15
    assert abs(f["issue_fraction"] - 1e6 / (1.5e6 * 132 * 4)) < 1e-15
    assert acc["kernels"][1]["kernel"] == "NodeForward" and acc["kernels"][1]["tensor_gflop"] == 0
    assert abs(sum(k["share_of_kernel_time"] for k in acc["kernels"]) - 1) < 1e-12
    out = tmp_path / "roofline.json"
    roofline.main([str(tmp_path / "ncu_648_mixed.csv"), "--out", str(out), "--commit", "abc"])
    doc = json.loads(out.read_text())
    assert doc["provenance"]["commit"] == "abc" and "648 mixed" in doc["cases"]
