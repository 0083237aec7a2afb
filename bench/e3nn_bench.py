#!/usr/bin/env python3
"""e3nn 0.6 reference timings and cross-check for the Batmobile kernel benchmark.

Modes
  time:   e3nn_bench.py --graph-dir DIR --out e3nn.jsonl [--reps 50] [--warmup 5] [--cases full|quick]
          Same random graphs as the C++ bench (graph_<N>_<k>.bin written by `batmobile_bench --graph-dir`):
            sh                 o3.spherical_harmonics(l<=3, component) of the E edge vectors
            conv_fwd(_bwd)     gather -> o3.TensorProduct channel-wise "uvu", all 34 paths of
                               Cx0e+Cx1o+Cx2e+Cx3o (x) 0e+1o+2e+3o -> outputs of both parities l<=3, per-edge weights
                               -> scatter-sum (index_add); backward: grads of features, weights, edge vectors
            attention_fwd_bwd  docs/model.md steps 1-2 in PyTorch + e3nn (L=2, A=4, dk=8, NB=8, H=32): radial MLP,
                               two TensorProducts (conv and value weights), scatter softmax; fwd + bwd (h, positions)
  check:  e3nn_bench.py --check DIR   (DIR written by `batmobile_bench --check-dump DIR`, float64)
          compares SH, conv output, dE/dh, dE/dw and forces of the Batmobile kernels against e3nn; prints JSON,
          exit code 1 on mismatch (relative max error > 1e-9).
  merge:  e3nn_bench.py --merge CPP.jsonl E3NN.jsonl --device-name NAME --out-json kernels_h200.json
--backend dense replaces e3nn by a plain torch einsum over src/kernels/generated/cg_l3.npz (for testing this
script where e3nn is not installed; not a benchmark).
"""
import argparse
import json
import math
import os
import statistics
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
NPZ = os.path.join(HERE, "..", "src", "kernels", "generated", "cg_l3.npz")


def all_paths(L=3, natural_only=False):
    return [(a, b, c) for a in range(L + 1) for b in range(L + 1) for c in range(L + 1)
            if abs(a - b) <= c <= a + b and (not natural_only or (a + b + c) % 2 == 0)]


def out_irreps(L, natural_only):
    """Output irreps (l, natural?) in e3nn order; natural parity first, 0o omitted (no path produces it)."""
    outs = [(l, True) for l in range(L + 1)]
    if not natural_only:
        outs += [(l, False) for l in range(1, L + 1)]
    return outs


class DenseTP(torch.nn.Module):
    """Channel-wise uvu tensor product with e3nn's layout and normalisation, from the checked-in CG npz."""

    def __init__(self, C, L, natural_only):
        super().__init__()
        d = np.load(NPZ)
        self.C, self.L = C, L
        self.paths = all_paths(L, natural_only)
        self.outs = out_irreps(L, natural_only)
        self.cg = [torch.tensor(d["cg_%d_%d_%d" % p]) for p in self.paths]
        self.alpha = []
        for (l1, l2, l3) in self.paths:
            nat = (l1 + l2 + l3) % 2 == 0
            n = sum(1 for q in self.paths if q[2] == l3 and ((sum(q) % 2 == 0) == nat))
            self.alpha.append(math.sqrt((2 * l3 + 1) / n))
        self.in_off = np.cumsum([0] + [C * (2 * l + 1) for l in range(L + 1)])
        self.out_off = np.cumsum([0] + [C * (2 * l + 1) for l, _ in self.outs])
        self.dim_out = int(self.out_off[-1])

    def forward(self, x1, sh, w):
        E, C = x1.shape[0], self.C
        out = x1.new_zeros(E, self.dim_out)
        for p, (l1, l2, l3) in enumerate(self.paths):
            a = x1[:, self.in_off[l1]:self.in_off[l1 + 1]].reshape(E, C, 2 * l1 + 1)
            b = sh[:, l2 * l2:(l2 + 1) ** 2]
            cg = self.cg[p].to(x1)
            y = torch.einsum("eci,ej,ijk->eck", a, b, cg) * (self.alpha[p] * w[:, p * C:(p + 1) * C, None])
            o = self.outs.index((l3, (l1 + l2 + l3) % 2 == 0))
            out[:, self.out_off[o]:self.out_off[o + 1]] += y.reshape(E, -1)
        return out


def make_tp(C, L, natural_only, backend):
    if backend == "dense":
        return DenseTP(C, L, natural_only)
    from e3nn import o3
    par = lambda l, nat: (1 if l % 2 == 0 else -1) if nat else (-1 if l % 2 == 0 else 1)
    irreps_in1 = o3.Irreps([(C, (l, par(l, True))) for l in range(L + 1)])
    irreps_sh = o3.Irreps([(1, (l, par(l, True))) for l in range(L + 1)])
    outs = out_irreps(L, natural_only)
    irreps_out = o3.Irreps([(C, (l, par(l, nat))) for l, nat in outs])
    instr = [(l1, l2, outs.index((l3, (l1 + l2 + l3) % 2 == 0)), "uvu", True) for (l1, l2, l3) in all_paths(L, natural_only)]
    return o3.TensorProduct(irreps_in1, irreps_sh, irreps_out, instr, shared_weights=False, internal_weights=False,
                            irrep_normalization="component", path_normalization="element")


def spherical_harmonics(r, L, backend):
    if backend == "e3nn":
        from e3nn import o3
        return o3.spherical_harmonics(list(range(L + 1)), r, normalize=True, normalization="component")
    u = r / r.norm(dim=-1, keepdim=True)
    x, y, z = u[:, 0], u[:, 1], u[:, 2]
    s3, s5, s15 = math.sqrt(3), math.sqrt(5), math.sqrt(15)
    x2z2 = x * x + z * z
    q = 4 * y * y - x2z2
    cols = [torch.ones_like(x), s3 * x, s3 * y, s3 * z, s15 * x * z, s15 * x * y, s5 * (y * y - 0.5 * x2z2), s15 * y * z,
            0.5 * s15 * (z * z - x * x), math.sqrt(630) / 12 * x * (3 * z * z - x * x), math.sqrt(105) * x * y * z,
            math.sqrt(168) / 8 * x * q, math.sqrt(7) / 2 * y * (2 * y * y - 3 * x2z2), math.sqrt(168) / 8 * z * q,
            math.sqrt(105) / 2 * y * (z * z - x * x), math.sqrt(630) / 12 * z * (z * z - 3 * x * x)]
    return torch.stack(cols[:(L + 1) ** 2], dim=-1)


def to_e3nn_features(h, L):
    """(N, K, C) Batmobile layout -> (N, sum_l C (2l+1)) e3nn layout (multiplicity-major)."""
    N, _, C = h.shape
    return torch.cat([h[:, l * l:(l + 1) ** 2, :].transpose(1, 2).reshape(N, -1) for l in range(L + 1)], dim=1)


def from_e3nn_output(y, C, L, natural_only):
    """(N, dim_out) e3nn layout -> (N, KO, C) Batmobile slots (natural [0, K), other parity [K, 2K))."""
    N, K = y.shape[0], (L + 1) ** 2
    KO = K if natural_only else 2 * K
    out = y.new_zeros(N, KO, C)
    off = 0
    for l, nat in out_irreps(L, natural_only):
        n = C * (2 * l + 1)
        base = (0 if nat else K) + l * l
        out[:, base:base + 2 * l + 1, :] = y[:, off:off + n].reshape(N, C, 2 * l + 1).transpose(1, 2)
        off += n
    return out


def load_graph(graph_dir, N, k):
    raw = open(os.path.join(graph_dir, "graph_%d_%d.bin" % (N, k)), "rb").read()
    x = np.frombuffer(raw[:12 * N], dtype=np.float32).reshape(N, 3)
    send = np.frombuffer(raw[12 * N:], dtype=np.int32)
    recv = np.repeat(np.arange(N, dtype=np.int64), k)
    return x, send.astype(np.int64), recv


def timed(fn, warmup, reps, device):
    for _ in range(warmup):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    ts = []
    for _ in range(reps):
        if device == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            ts.append(a.elapsed_time(b))
        else:
            import time
            t0 = time.perf_counter()
            fn()
            ts.append(1e3 * (time.perf_counter() - t0))
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    return statistics.median(ts), peak


def bench_case(N, k, C, args, out):
    dev, be = args.device, args.backend
    x, send, recv = load_graph(args.graph_dir, N, k)
    E = N * k
    pos = torch.tensor(x, device=dev)
    send_t, recv_t = torch.tensor(send, device=dev), torch.tensor(recv, device=dev)
    g = torch.Generator(device="cpu").manual_seed(0)
    rec = lambda op, ms, peak: out.write(json.dumps({"op": op, "atoms": N, "neighbors": k, "channels": C, "e3nn_ms": ms,
                                                     "e3nn_peak_bytes": peak}) + "\n")
    # SH
    r = torch.randn(E, 3, generator=g).to(dev)
    with torch.no_grad():
        ms, peak = timed(lambda: spherical_harmonics(r, 3, be), args.warmup, args.reps, dev)
    rec("sh", ms, peak)
    # conv, all 34 paths
    tp = make_tp(C, 3, False, be).to(dev)
    P = len(all_paths(3))
    h = torch.randn(N, 16, C, generator=g).to(dev)
    w = torch.randn(E, P * C, generator=g).to(dev)
    dim_out = tp.irreps_out.dim if hasattr(tp, "irreps_out") else tp.dim_out
    go = torch.randn(N, dim_out, generator=g).to(dev)

    def conv(hh, ww, pp):
        rr = pp[send_t] - pp[recv_t]
        sh = spherical_harmonics(rr, 3, be)
        y = tp(to_e3nn_features(hh, 3)[send_t], sh, ww)
        return torch.zeros(N, dim_out, device=dev, dtype=y.dtype).index_add_(0, recv_t, y)

    with torch.no_grad():
        ms, peak = timed(lambda: conv(h, w, pos), args.warmup, args.reps, dev)
    rec("conv_fwd", ms, peak)
    hg, wg, pg = h.clone().requires_grad_(), w.clone().requires_grad_(), pos.clone().requires_grad_()

    def conv_fb():
        hg.grad = wg.grad = pg.grad = None
        (conv(hg, wg, pg) * go).sum().backward()

    ms, peak = timed(conv_fb, args.warmup, args.reps, dev)
    rec("conv_fwd_bwd", ms, peak)
    # attention layer (docs/model.md steps 1-2), L = 2
    ms, peak = attention_bench(N, k, C, pos, send_t, recv_t, args)
    rec("attention_fwd_bwd", ms, peak)


def attention_layer(h, pos, send, recv, prm, tp, N, C, L, rc, avg, A, dk):
    rr = pos[send] - pos[recv]
    d = rr.norm(dim=-1)
    sh = spherical_harmonics(rr, L, prm["backend"])
    xx = d / rc
    u = torch.where(xx < 1, 1 - 28 * xx ** 6 + 48 * xx ** 7 - 21 * xx ** 8, torch.zeros_like(xx))
    n = torch.arange(1, prm["NB"] + 1, device=h.device, dtype=h.dtype)
    B = math.sqrt(2 / rc) * torch.sin(n * math.pi * d[:, None] / rc) / d[:, None]
    R = u[:, None] * (torch.nn.functional.silu(B @ prm["W1"].T + prm["b1"]) @ prm["W2"].T)
    P = R.shape[1] // (2 * C)
    x1 = to_e3nn_features(h, L)[send]
    m = torch.zeros(N, x1.shape[1], device=h.device, dtype=h.dtype).index_add_(0, recv, tp(x1, sh, R[:, :P * C])) / avg
    v = tp(x1, sh, R[:, P * C:])
    q = h[:, 0, :] @ prm["Wq"].T
    kk = h[:, 0, :] @ prm["Wk"].T
    s = (q[recv].view(-1, A, dk) * kk[send].view(-1, A, dk)).sum(-1) / math.sqrt(dk) + B @ prm["Wg"].T
    M = torch.full((N, A), -1e30, device=h.device, dtype=h.dtype).scatter_reduce(0, recv[:, None].expand(-1, A), s, "amax")
    e = torch.exp(s - M[recv]) * u[:, None]
    Z = torch.zeros(N, A, device=h.device, dtype=h.dtype).index_add_(0, recv, e)
    # channel c belongs to head c // (C / A); e3nn layout is multiplicity-major within each l block
    vv = from_e3nn_output(v, C, L, True)  # (E, K, C)
    head = torch.arange(C, device=h.device) // (C // A)
    o = torch.zeros(N, (L + 1) ** 2, C, device=h.device, dtype=h.dtype).index_add_(0, recv, e[:, head][:, None, :] * vv)
    # docs/model.md step 2: plain normalisation, no epsilon (shifting by max s instead of max s + log u is equivalent)
    o = o / torch.where(Z > 0, Z, torch.ones_like(Z))[:, head][:, None, :]
    return from_e3nn_output(m, C, L, True), o


def attention_bench(N, k, C, pos, send, recv, args):
    L, A, dk, NB, H = 2, 4, 8, 8, 32
    dev = args.device
    P = len(all_paths(L, True))
    g = torch.Generator(device="cpu").manual_seed(1)
    rnd = lambda *s, sc=1.0: (sc * torch.randn(*s, generator=g)).to(dev)
    prm = {"W1": rnd(H, NB, sc=0.3), "b1": rnd(H, sc=0.1), "W2": rnd(2 * P * C, H, sc=0.2), "Wg": rnd(A, NB, sc=0.3),
           "Wq": rnd(A * dk, C, sc=0.2), "Wk": rnd(A * dk, C, sc=0.2), "NB": NB, "backend": args.backend}
    box = (N / 0.1) ** (1 / 3)
    rc = box * 1.8 + 1.0
    tp = make_tp(C, L, True, args.backend).to(dev)
    h = rnd(N, (L + 1) ** 2, C).requires_grad_()
    p = pos.clone().requires_grad_()
    gm, go = rnd(N, (L + 1) ** 2, C), rnd(N, (L + 1) ** 2, C)

    def fb():
        h.grad = p.grad = None
        m, o = attention_layer(h, p, send, recv, prm, tp, N, C, L, rc, float(k), A, dk)
        ((m * gm).sum() + (o * go).sum()).backward()

    return timed(fb, args.warmup, args.reps, dev)


def check(args):
    dev, be = args.device, args.backend
    torch.set_default_dtype(torch.float64)
    d = args.check
    meta = json.load(open(os.path.join(d, "check_meta.json")))
    N, k, C, P, KO = meta["N"], meta["k"], meta["C"], meta["P"], meta["KO"]
    E = N * k
    rd = lambda name, shape, dt=np.float64: torch.tensor(np.fromfile(os.path.join(d, name), dtype=dt).reshape(shape))
    x = rd("check_x.bin", (N, 3)).to(dev)
    send = rd("check_send.bin", (E,), np.int32).long().to(dev)
    recv = torch.arange(N, device=dev).repeat_interleave(k)
    h, w, go = rd("check_h.bin", (N, 16, C)).to(dev), rd("check_w.bin", (E, P, C)).to(dev), rd("check_go.bin", (N, KO, C)).to(dev)
    tp = make_tp(C, 3, False, be).to(dev)
    hg, wg, xg = h.clone().requires_grad_(), w.clone().requires_grad_(), x.clone().requires_grad_()
    rr = xg[send] - xg[recv]
    sh = spherical_harmonics(rr, 3, be)
    y = tp(to_e3nn_features(hg, 3)[send], sh, wg.reshape(E, P * C))
    dim_out = y.shape[1]
    out_e3 = torch.zeros(N, dim_out, device=dev).index_add_(0, recv, y)
    out = from_e3nn_output(out_e3, C, 3, False)
    (out * go).sum().backward()
    res = {}

    def cmp(name, mine, ref):
        ref = ref.detach().cpu()
        err = (mine - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
        res[name] = err

    cmp("sh", rd("check_Y.bin", (E, 16)), sh)
    cmp("conv_out", rd("check_out.bin", (N, KO, C)), out)
    cmp("grad_h", rd("check_gh.bin", (N, 16, C)), hg.grad)
    cmp("grad_w", rd("check_gw.bin", (E, P, C)), wg.grad)
    cmp("forces", rd("check_f.bin", (N, 3)), -xg.grad)
    # docs/model.md steps 1-2 (L = 2): the fused interaction + attention kernels vs the PyTorch/e3nn layer
    am = json.load(open(os.path.join(d, "attn_meta.json")))
    L, Ca, A, dk, NB, H, Pa = am["L"], am["C"], am["A"], am["dk"], am["NB"], am["H"], am["P"]
    K = (L + 1) ** 2
    prm = {"W1": rd("attn_W1.bin", (H, NB)).to(dev), "b1": rd("attn_b1.bin", (H,)).to(dev),
           "W2": rd("attn_W2.bin", (2 * Pa * Ca, H)).to(dev), "Wg": rd("attn_Wg.bin", (A, NB)).to(dev),
           "Wq": rd("attn_Wq.bin", (A * dk, Ca)).to(dev), "Wk": rd("attn_Wk.bin", (A * dk, Ca)).to(dev), "NB": NB,
           "backend": be}
    ha = rd("attn_h.bin", (N, K, Ca)).to(dev).requires_grad_()
    xa = x.clone().requires_grad_()
    keep = ((x[send] - x[recv]).norm(dim=-1) < am["rc"])  # docs/model.md: only pairs with d < r_c are edges
    tpa = make_tp(Ca, L, True, be).to(dev)
    ma, oa = attention_layer(ha, xa, send[keep], recv[keep], prm, tpa, N, Ca, L, am["rc"], am["avg"], A, dk)
    ((ma * rd("attn_gm.bin", (N, K, Ca)).to(dev)).sum() + (oa * rd("attn_go.bin", (N, K, Ca)).to(dev)).sum()).backward()
    cmp("attn_m", rd("attn_m.bin", (N, K, Ca)), ma)
    cmp("attn_o", rd("attn_o.bin", (N, K, Ca)), oa)
    cmp("attn_grad_h", rd("attn_gh.bin", (N, K, Ca)), ha.grad)
    cmp("attn_forces", rd("attn_f.bin", (N, 3)), -xa.grad)
    res["attn_edges_kept"] = int(keep.sum().item())
    res["attn_edges_total"] = int(keep.numel())
    res["backend"] = be
    res["ok"] = all(v < 1e-9 for key, v in res.items() if not key.startswith("attn_edges") and key != "backend")
    print(json.dumps(res))
    return 0 if res["ok"] else 1


def base_op(op):
    """The e3nn op an alternative kernel variant of an op is compared with: "attention_fwd_bwd_radial_gemm",
    "..._radial_mma_uncapped", "..._radial_mma_f16", "conv_fwd_bwd_unstaged", "_staged2" / "_staged3" -> the op
    without its variant suffixes."""
    for variant in ("_uncapped", "_radial_gemm", "_radial_mma_f16", "_radial_mma", "_unstaged", "_staged2",
                    "_staged3"):
        if op.endswith(variant):
            op = op[:-len(variant)]
    return op


def merge(args):
    cpp = [json.loads(l) for l in open(args.merge[0]) if l.strip()]
    ref = {(r["op"], r["atoms"], r["neighbors"], r["channels"]): r for r in
           (json.loads(l) for l in open(args.merge[1]) if l.strip())}
    e3v = None
    try:
        import e3nn
        e3v = e3nn.__version__
    except Exception:
        pass
    cases = []
    for r in cpp:
        key = (r["op"], r["atoms"], r["neighbors"], r["channels"])
        e = ref.get(key) or ref.get((base_op(r["op"]),) + key[1:], {})
        ems = e.get("e3nn_ms")
        cases.append({"op": r["op"], "atoms": r["atoms"], "neighbors": r["neighbors"], "channels": r["channels"],
                      "batmobile_ms": r["batmobile_ms"], "e3nn_ms": ems,
                      "speedup": (ems / r["batmobile_ms"]) if ems else None,
                      "batmobile_peak_bytes": r["batmobile_peak_bytes"], "e3nn_peak_bytes": e.get("e3nn_peak_bytes"),
                      "fp32_roofline_fraction": r["fp32_roofline_fraction"]})
    doc = {"provenance": {"commit": args.commit, "machine": args.device_name, "command": args.command},
           "device": args.device_name, "e3nn_version": e3v, "cases": cases}
    with open(args.out_json, "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps(doc, indent=1))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph-dir")
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cases", default="full")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--backend", default="e3nn", choices=["e3nn", "dense"])
    ap.add_argument("--check")
    ap.add_argument("--merge", nargs=2)
    ap.add_argument("--device-name", default="")
    ap.add_argument("--out-json")
    ap.add_argument("--commit", default="unknown", help="merge: the commit that was measured")
    ap.add_argument("--command", default="bench/run_gpu_bench.sh", help="merge: the command that ran the benchmark")
    args = ap.parse_args()
    if args.merge:
        return merge(args)
    if args.check:
        return check(args)
    with open(args.out, "w") as out:
        cases = [(60, 6, 8)] if args.cases == "quick" else [(1000, 20, 32), (10000, 30, 64)]
        for N, k, C in cases:
            bench_case(N, k, C, args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
