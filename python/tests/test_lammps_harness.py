"""The LAMMPS test harness (tests/lammps/batmobile/run_batmobile_test.py) pins GPU runs that name no precision to
`precision double` (the styles' GPU default is mixed; the tests compare with float64 references)."""
from script_loader import load_script

harness = load_script("tests/lammps/batmobile/run_batmobile_test.py")


def test_pin_double_precision_after_the_style_name():
    pin = harness.pin_double_precision
    assert pin("units metal\npair_style batmobile kernels fused\n") == \
        "units metal\npair_style batmobile precision double kernels fused\n"
    assert pin("pair_style batmobile/kk\n") == "pair_style batmobile/kk precision double\n"
    # hybrid: the keyword belongs to batmobile's arguments, before the next style
    assert pin("pair_style hybrid/overlay batmobile zero 4.0\n") == \
        "pair_style hybrid/overlay batmobile precision double zero 4.0\n"


def test_pin_double_precision_keeps_a_given_precision_and_other_styles():
    pin = harness.pin_double_precision
    assert pin("pair_style batmobile precision mixed device cuda\n") == \
        "pair_style batmobile precision mixed device cuda\n"
    assert pin("pair_style lj/cut 3.0\npair_coeff * * batmobile.pt O H\n") == \
        "pair_style lj/cut 3.0\npair_coeff * * batmobile.pt O H\n"
