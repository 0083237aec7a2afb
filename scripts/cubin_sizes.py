#!/usr/bin/env python3
"""Static instruction counts of the CUDA kernels in an object file, without a GPU or a disassembler.

nvcc embeds each architecture's cubin (an ELF file) uncompressed in the host object; every kernel's code is a
section .text.<mangled name> of 16-byte SASS instructions. This lists, for the kernels whose mangled name matches
REGEX, the instruction count (section size / 16), so that two builds of a kernel can be compared where
scripts/cuda_compile_check.sh --kernels left the objects (build/cuda-check). A static count is not the number
of instructions executed (Nsight Compute on a GPU gives that: bench/profile/ncu_sass_regions.py), but a change that
removes work from a loop body shows up in it.

  python3 scripts/cubin_sizes.py OBJECT [REGEX]    (default REGEX: const_slot_kernel_lb: the fused
                                                            kernels that MD launches)
"""
import re
import struct
import sys


def cubins(data):
    """ELF images inside the object (the object itself is the first)."""
    return [data[m.start():] for m in re.finditer(rb"\x7fELF\x02\x01\x01", data)][1:]


def text_sections(elf):
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx][4]

    def name(n):
        return elf[strtab + n: elf.index(b"\0", strtab + n)].decode(errors="replace")

    for h in heads:
        n = name(h[0])
        if n.startswith(".text."):
            yield n[len(".text."):], h[5]


def short(name):
    """'float L=2 ATTN=1 DKM=8 ROLE=2 SendAdjT<1> LaunchBounds<128,4> const_slot' for a fused kernel, else the name."""
    m = re.search(r"InteractionKernelI([fd])N\w*?4CudaELi(\d)ELb(\d)ELi(\d+)ELi(\d)E", name)
    if not m:
        return name
    tag = re.search(r"(ForwardT|PairAdjT|SendAdjT)ILb(\d)E", name)
    lb = re.search(r"LaunchBoundsILj(\d+)ELj(\d+)E", name)
    return (f"{'float' if m.group(1) == 'f' else 'double'} L={m.group(2)} ATTN={m.group(3)} DKM={m.group(4)} "
            f"ROLE={m.group(5)} {tag.group(1) + '<' + tag.group(2) + '>' if tag else '?'}"
            f"{' LaunchBounds<' + lb.group(1) + ',' + lb.group(2) + '>' if lb else ''}"
            f"{' const_slot' if 'const_slot_kernel' in name else ''}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    pattern = re.compile(sys.argv[2] if len(sys.argv) > 2 else r"const_slot_kernel_lb")
    data = open(sys.argv[1], "rb").read()
    rows = {}
    for elf in cubins(data):
        for n, size in text_sections(elf):
            if pattern.search(n):
                rows[short(n)] = size // 16
    for k in sorted(rows):
        print(f"{rows[k]:7d}  {k}")


if __name__ == "__main__":
    main()
