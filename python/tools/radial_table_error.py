#!/usr/bin/env python3
"""Design study: how closely would a uniform cubic-Hermite table of the radial MLP reproduce it?

For each layer of a model file, R(d) = W2 . silu(W1 . B(d) + b1) (docs/model.md, without the envelope, which stays
analytic) is tabulated at NI + 1 nodes on [0, r_c] with its exact derivative; the script reports the largest error of
the interpolant and of its derivative over d in [0.5 A, r_c], each relative to the column's largest |R| or |dR/dd|,
and the table's size as one float4 (cubic coefficients) per interval and output column.
The kernels do not use such a table (they evaluate the MLP per chunk of edges on tensor cores); the numbers are an
input for deciding whether they should (src/kernels/README.md, "Next").

  /usr/bin/python3 python/tools/radial_table_error.py [potentials/water_fast.pt]   (torch on the CPU, ~1 min)
"""
import math
import sys

import torch

torch.set_default_dtype(torch.float64)
m = torch.jit.load(sys.argv[1] if len(sys.argv) > 1 else 'potentials/water_fast.pt')
b = dict(m.named_buffers())
rc = float(b['meta.r_c']); NB = int(b['meta.NB'])
def raw(layer, d):  # W2 . silu(W1 . B(d) + b1), no envelope; d: (N,)
    W1, b1, W2 = b[f'layers.{layer}.radial.W1'], b[f'layers.{layer}.radial.b1'], b[f'layers.{layer}.radial.W2']
    n = torch.arange(1, NB + 1, dtype=d.dtype)
    x = n[None, :] * math.pi * d[:, None] / rc
    B = math.sqrt(2 / rc) * torch.where(d[:, None] > 0, torch.sin(x) / d[:, None].clamp_min(1e-300), n * math.pi / rc)
    a = B @ W1.T + b1
    return torch.nn.functional.silu(a) @ W2.T
for layer in range(int(b['meta.T'])):
    # LAMMPS stops below half the smallest training distance (0.44 A for the bundled model)
    dd = torch.linspace(0.5, rc, 20001).requires_grad_(True)
    ref = raw(layer, dd)
    dref = torch.stack([torch.autograd.grad(ref[:, j].sum(), dd, retain_graph=True)[0] for j in range(ref.shape[1])], 1)
    ref, dd = ref.detach(), dd.detach()
    scale = ref.abs().max(dim=0).values.clamp_min(1e-30)
    dscale = dref.abs().max(dim=0).values.clamp_min(1e-30)
    for NI in (128, 256, 512, 1024):
        h = rc / NI
        nodes = torch.linspace(0, rc, NI + 1).requires_grad_(True)
        v = raw(layer, nodes)
        g = torch.stack([torch.autograd.grad(v[:, j].sum(), nodes, retain_graph=True)[0] for j in range(v.shape[1])], 1)
        v = v.detach()
        k = torch.clamp((dd / h).floor().long(), max=NI - 1)
        t = (dd / h - k)[:, None]
        h00, h10, h01, h11 = 2*t**3 - 3*t**2 + 1, t**3 - 2*t**2 + t, -2*t**3 + 3*t**2, t**3 - t**2
        interp = h00 * v[k] + h10 * h * g[k] + h01 * v[k + 1] + h11 * h * g[k + 1]
        dh00, dh10, dh01, dh11 = 6*t**2 - 6*t, 3*t**2 - 4*t + 1, -6*t**2 + 6*t, 3*t**2 - 2*t
        dinterp = (dh00 * v[k] + dh01 * v[k + 1]) / h + dh10 * g[k] + dh11 * g[k + 1]
        err = ((interp - ref).abs() / scale).max().item()
        derr = ((dinterp - dref).abs() / dscale).max().item()
        print(f'layer {layer}: {NI:5d} intervals ({NI * ref.shape[1] * 16 / 1e6:5.1f} MB as float4): '
              f'max |error| / max |R| = {err:.2e}, of dR/dd {derr:.2e}')
