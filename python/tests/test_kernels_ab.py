"""bench/kernels_ab.py: the kernel A/B summary reads every side of every case and takes ratios to the first
baseline, with the sides in the order base, base2, ..., new."""
import json

from script_loader import load_script

ab = load_script("bench/kernels_ab.py")


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def row(op, ms):
    return {"op": op, "atoms": 1000, "neighbors": 20, "channels": 32, "batmobile_ms": ms}


def test_sides_cases_and_ratios(tmp_path):
    write(tmp_path / "ab_base_1000_20_32.jsonl", [row("attention_fwd", 2.0), row("attention_bwd", 4.0)])
    write(tmp_path / "ab_base2_1000_20_32.jsonl", [row("attention_fwd", 1.0), row("attention_bwd", 5.0)])
    write(tmp_path / "ab_new_1000_20_32.jsonl", [row("attention_fwd", 1.5), {"op": "attention_bwd",
                                                                               "batmobile_ms": None}])
    write(tmp_path / "ab_base_10000_30_64.jsonl", [row("attention_fwd", 10.0)])
    write(tmp_path / "ab_new_10000_30_64.jsonl", [row("attention_fwd", 9.0)])
    (tmp_path / "bench_200_10_8.jsonl").write_text("not an A/B file\n")
    cases = ab.load(str(tmp_path))
    assert set(cases) == {"1000:20:32", "10000:30:64"}
    assert cases["1000:20:32"]["base2"] == {"attention_fwd": 1.0, "attention_bwd": 5.0}
    assert cases["1000:20:32"]["new"] == {"attention_fwd": 1.5}  # a row without a time is left out
    lines = ab.table(cases)
    first = lines.index("case 1000:20:32: base ms  base2 ms  new ms  (ratio to base)")
    assert lines[first + 1] == "  attention_fwd: 2.0000  1.0000 (0.500)  1.5000 (0.750)"
    assert lines[first + 2] == "  attention_bwd: 4.0000  5.0000 (1.250)  new -"
    assert "  attention_fwd: 10.0000  9.0000 (0.900)" in lines


def test_side_order():
    assert sorted(["new", "base3", "base", "base2"], key=ab.side_order) == ["base", "base2", "base3", "new"]
    assert sorted(["v-t96", "new", "base", "v-t128"], key=ab.side_order) == ["base", "new", "v-t128", "v-t96"]


def test_variants_without_a_baseline_take_ratios_to_this_build(tmp_path):
    write(tmp_path / "ab_new_648_52_32.jsonl", [row("attention_fwd_bwd", 0.5)])
    write(tmp_path / "ab_v-t96_648_52_32.jsonl", [row("attention_fwd_bwd", 0.4)])
    write(tmp_path / "ab_v-t128_648_52_32.jsonl", [row("attention_fwd_bwd", 0.6)])
    cases = ab.load(str(tmp_path))
    assert set(cases["648:52:32"]) == {"new", "v-t96", "v-t128"}
    lines = ab.table(cases)
    assert lines[0] == "case 648:52:32: new ms  v-t128 ms  v-t96 ms  (ratio to new)"
    assert lines[1] == "  attention_fwd_bwd: 0.5000  0.6000 (1.200)  0.4000 (0.800)"
