"""bench/e3nn_bench.py: each kernel variant's timing row is compared with the e3nn op it stands for."""
from script_loader import load_script

e3nn_bench = load_script("bench/e3nn_bench.py")


def test_variant_rows_map_to_their_e3nn_op():
    assert e3nn_bench.base_op("attention_fwd_bwd") == "attention_fwd_bwd"
    assert e3nn_bench.base_op("attention_fwd_bwd_radial_gemm") == "attention_fwd_bwd"
    assert e3nn_bench.base_op("attention_fwd_radial_mma") == "attention_fwd"
    assert e3nn_bench.base_op("attention_fwd_bwd_radial_mma_f16") == "attention_fwd_bwd"
    assert e3nn_bench.base_op("attention_fwd_bwd_radial_mma_f16_uncapped") == "attention_fwd_bwd"
    assert e3nn_bench.base_op("conv_fwd_bwd_staged3") == "conv_fwd_bwd"
