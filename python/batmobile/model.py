"""The Batmobile model in plain PyTorch, implementing docs/model.md (model file format versions 2 and 3) exactly.

Parameter names (state_dict keys) equal the model-file buffer names, so export/import is a rename-free copy.
All geometry enters through the edge vectors r_ij = x_j - x_i (receiver i, sender j), which gives forces and the
virial from one gradient with respect to the edge vectors.
"""
import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from .so3 import clebsch_gordan, natural_parity_paths, path_factors, spherical_harmonics

warnings.filterwarnings("ignore", message="scatter_reduce")  # beta-API notice in torch 1.13

NORM_EPS = 1e-6


@dataclass
class Hyperparameters:
    species: List[str] = field(default_factory=lambda: ["O", "H"])
    r_c: float = 5.0
    L: int = 2
    C: int = 32
    T: int = 2
    NB: int = 8
    H: int = 32
    A: int = 4
    dk: int = 8
    Hr: int = 16
    avg_num_neighbors: float = 1.0
    energy_scale: float = 1.0
    min_distance: float = 0.0
    correlation: int = 1   # 1: no product basis (format version 2); 2: the product basis of docs/model.md step 3

    def __post_init__(self):
        self.check_correlation()

    def check_correlation(self):
        """ValueError unless correlation is 1, or 2 with T >= 2 (also for hyperparameters edited after creation)."""
        if isinstance(self.correlation, bool) or self.correlation not in (1, 2):
            raise ValueError(f"correlation {self.correlation!r}: must be 1 (no product basis) or 2 (the product "
                             f"basis, docs/model.md step 3)")
        self.correlation = int(self.correlation)
        if self.correlation == 2 and self.T < 2:
            raise ValueError(f"correlation 2 needs T >= 2 (T is {self.T}): the product basis acts in the layers "
                             f"t < T - 1, not in the last one (docs/model.md step 3)")

    def to_dict(self) -> Dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: Dict) -> "Hyperparameters":
        names = Hyperparameters.__dataclass_fields__.keys()
        return Hyperparameters(**{k: d[k] for k in names if k in d})


def envelope(d: torch.Tensor, r_c: float) -> torch.Tensor:
    x = d / r_c
    x6 = x ** 6
    u = 1.0 - 28.0 * x6 + 48.0 * x6 * x - 21.0 * x6 * x * x
    return torch.where(x < 1.0, u, torch.zeros_like(u))


def bessel_basis(d: torch.Tensor, r_c: float, NB: int) -> torch.Tensor:
    n = torch.arange(1, NB + 1, dtype=d.dtype, device=d.device)
    return math.sqrt(2.0 / r_c) * torch.sin(n * math.pi * d[:, None] / r_c) / d[:, None]


class TensorProduct(nn.Module):
    """TP(h_j, w)[l3][m3][c] = sum_p alpha_p w[p][c] sum_{m1,m2} CG_p[m1][m2][m3] h_j[l1][m1][c] Y^{l2}_{m2}.

    Grouped by input degree l1: for each l1 the (path, m3) output rows form one small per-edge matrix
    M[e, row, m1] = alpha_p sum_{m2} CG_p[m1][m2][m3] Y[e, k(l2, m2)], applied with one batched matmul.
    """

    def __init__(self, L: int):
        super().__init__()
        self.L = L
        self.K = (L + 1) ** 2
        paths = natural_parity_paths(L)
        alphas = path_factors(L)
        self.num_paths = len(paths)
        for l1 in range(L + 1):
            rows_cg, rows_path, rows_k3 = [], [], []
            for p, (a, l2, l3) in enumerate(paths):
                if a != l1:
                    continue
                cg = clebsch_gordan(l1, l2, l3) * alphas[p]
                for m3 in range(2 * l3 + 1):
                    block = np.zeros((2 * l1 + 1, self.K))
                    block[:, l2 * l2:(l2 + 1) ** 2] = cg[:, :, m3]
                    rows_cg.append(block)
                    rows_path.append(p)
                    rows_k3.append(l3 * l3 + m3)
            self.register_buffer(f"cg_rows_{l1}", torch.tensor(np.stack(rows_cg)), persistent=False)
            self.register_buffer(f"path_of_row_{l1}", torch.tensor(rows_path, dtype=torch.long), persistent=False)
            self.register_buffer(f"k3_of_row_{l1}", torch.tensor(rows_k3, dtype=torch.long), persistent=False)

        k3_all = torch.cat([getattr(self, f"k3_of_row_{l1}") for l1 in range(L + 1)])
        self.register_buffer("row_to_k3", torch.nn.functional.one_hot(k3_all, self.K).to(torch.float64),
                             persistent=False)

    def coupling_matrices(self, Y: torch.Tensor) -> List[torch.Tensor]:
        """Per l1: (E, rows, 2l1+1); depends on the edge direction only, so shared by both TPs of a layer."""
        return [torch.einsum("rak,ek->era", getattr(self, f"cg_rows_{l1}").to(Y.dtype), Y).contiguous()
                for l1 in range(self.L + 1)]

    def forward(self, h_j: torch.Tensor, w: torch.Tensor, coupling: List[torch.Tensor]) -> torch.Tensor:
        # h_j: (E, K, C) sender features; w: (E, P, C) per-edge path weights
        out_rows, out_k3 = [], []
        for l1 in range(self.L + 1):
            h_l1 = h_j[:, l1 * l1:(l1 + 1) ** 2, :].contiguous()
            rows = torch.bmm(coupling[l1], h_l1)                                  # (E, rows, C)
            out_rows.append(rows * w[:, getattr(self, f"path_of_row_{l1}"), :])
            out_k3.append(getattr(self, f"k3_of_row_{l1}"))
        rows = torch.cat(out_rows, dim=1)                                   # (E, R, C)
        # rows -> output components with one GEMM against a one-hot (R, K) matrix (index_add over dim 1 is slow)
        E, R, C = rows.shape
        out = rows.transpose(1, 2).reshape(E * C, R) @ self.row_to_k3.to(rows.dtype)   # (E*C, K)
        return out.reshape(E, C, self.K).transpose(1, 2)


def _linear_param(out_dim: int, in_dim: int) -> nn.Parameter:
    return nn.Parameter(torch.randn(out_dim, in_dim) / math.sqrt(in_dim))


def symmetric_paths(L: int) -> List[Tuple[int, int, int]]:
    """The product basis's paths q = (l1, l2, l3): natural_parity_paths(L) with l1 <= l2, in the same order."""
    return [q for q in natural_parity_paths(L) if q[0] <= q[1]]


def symmetric_path_factors(L: int) -> List[float]:
    """beta_q = sqrt((2 l3 + 1) / nq(l3)), nq(l3) = number of symmetric paths with output degree l3."""
    paths = symmetric_paths(L)
    nq = {l3: sum(1 for q in paths if q[2] == l3) for _, _, l3 in paths}
    return [math.sqrt((2 * l3 + 1) / nq[l3]) for _, _, l3 in paths]


class ProductBasis(nn.Module):
    """docs/model.md step 3 (correlation 2, layers t < T - 1): the aggregated message's symmetric product with
    itself, channel-wise,
    p[l3][m3][c] = sum_q beta_q wq[q][c] sum_{m1,m2} CG_q[m1][m2][m3] m[l1][m1][c] m[l2][m2][c], and the mix
    matrices Wp<l> that add Wp<l> . p[l] to z_l (step 4).

    Per atom: the products m[k1][c] m[k2][c] of the component pairs k1 <= k2 (m[k1] m[k2] = m[k2] m[k1], so the
    coefficients of (k1, k2) and (k2, k1) are summed into one) go through one GEMM with the constant
    (pairs, rows) matrix of beta_q CG_q, rows = (q, m3); each row is scaled by wq[q][c], and a GEMM against a one-hot
    (rows, K) matrix sums the rows of each output component k3 = (l3, m3).
    """

    def __init__(self, L: int, C: int):
        super().__init__()
        self.L, self.K = L, (L + 1) ** 2
        paths, betas = symmetric_paths(L), symmetric_path_factors(L)
        self.num_paths = len(paths)
        pairs = [(k1, k2) for k1 in range(self.K) for k2 in range(k1, self.K)]
        pair_index = {kk: i for i, kk in enumerate(pairs)}
        rows_cg, rows_path, rows_k3 = [], [], []
        for q, (l1, l2, l3) in enumerate(paths):
            cg = clebsch_gordan(l1, l2, l3) * betas[q]
            for m3 in range(2 * l3 + 1):
                col = np.zeros(len(pairs))
                for m1 in range(2 * l1 + 1):
                    for m2 in range(2 * l2 + 1):
                        k1, k2 = l1 * l1 + m1, l2 * l2 + m2
                        col[pair_index[(min(k1, k2), max(k1, k2))]] += cg[m1, m2, m3]
                rows_cg.append(col)
                rows_path.append(q)
                rows_k3.append(l3 * l3 + m3)
        coupling = np.stack(rows_cg, axis=1)                                   # (pairs, rows)
        used = np.abs(coupling).max(axis=1) > 0                                # pairs that some row reads
        pairs = [kk for kk, u in zip(pairs, used) if u]
        self.register_buffer("pair_k1", torch.tensor([a for a, _ in pairs], dtype=torch.long), persistent=False)
        self.register_buffer("pair_k2", torch.tensor([b for _, b in pairs], dtype=torch.long), persistent=False)
        self.register_buffer("coupling", torch.tensor(coupling[used]), persistent=False)
        self.register_buffer("path_of_row", torch.tensor(rows_path, dtype=torch.long), persistent=False)
        self.register_buffer("row_to_k3", torch.nn.functional.one_hot(torch.tensor(rows_k3), self.K)
                             .to(torch.float64), persistent=False)
        # wq starts small: p is quadratic in m and enters z_l as m does (through C x C matrices Wp<l>, initialised
        # like the other mix matrices), so with wq ~ 0.1 training starts close to the correlation-1 model while both
        # wq and Wp<l> get non-zero gradients from the first step (a zero wq or Wp would leave the other one none)
        self.wq = nn.Parameter(0.1 * torch.randn(self.num_paths, C))
        for l in range(L + 1):
            setattr(self, f"Wp{l}", _linear_param(C, C))

    def forward(self, m: torch.Tensor) -> torch.Tensor:
        """p (N, K, C) of the messages m (N, K, C)."""
        N, K, C = m.shape
        mt = m.transpose(1, 2)                                                  # (N, C, K)
        prod = mt.index_select(2, self.pair_k1) * mt.index_select(2, self.pair_k2)   # (N, C, pairs)
        rows = prod.reshape(N * C, -1) @ self.coupling.to(m.dtype)             # (N C, rows)
        rows = rows.reshape(N, C, -1) * self.wq[self.path_of_row].T             # wq[q(row)][c]
        p = rows.reshape(N * C, -1) @ self.row_to_k3.to(m.dtype)                # (N C, K)
        return p.reshape(N, C, K).transpose(1, 2)


class Radial(nn.Module):
    def __init__(self, NB: int, H: int, out_dim: int):
        super().__init__()
        self.W1 = _linear_param(H, NB)
        self.b1 = nn.Parameter(torch.zeros(H))
        self.W2 = _linear_param(out_dim, H)


class Gate(nn.Module):
    def __init__(self, A: int, NB: int):
        super().__init__()
        self.Wg = nn.Parameter(0.1 * torch.randn(A, NB) / math.sqrt(NB))


class Attention(nn.Module):
    def __init__(self, A: int, dk: int, C: int):
        super().__init__()
        self.Wq = _linear_param(A * dk, C)
        self.Wk = _linear_param(A * dk, C)


class Mix(nn.Module):
    def __init__(self, L: int, C: int):
        super().__init__()
        self.L = L
        self.Wm0 = _linear_param(C, C)
        self.Wo0 = _linear_param(C, C)
        self.b0 = nn.Parameter(torch.zeros(C))
        self.Wgm = _linear_param(L * C, C)
        self.Wgo = _linear_param(L * C, C)
        self.bg = nn.Parameter(torch.zeros(L * C))
        for l in range(1, L + 1):
            setattr(self, f"Wm{l}", _linear_param(C, C))
            setattr(self, f"Wo{l}", _linear_param(C, C))


class Update(nn.Module):
    def __init__(self, L: int, C: int):
        super().__init__()
        for l in range(L + 1):
            # small initial update keeps the residual stream close to the embedding at the start
            setattr(self, f"Wu{l}", nn.Parameter(0.5 * torch.randn(C, C) / math.sqrt(C)))


class Norm(nn.Module):
    def __init__(self, L: int, C: int):
        super().__init__()
        for l in range(L + 1):
            setattr(self, f"g{l}", nn.Parameter(torch.ones(C)))


class InteractionBlock(nn.Module):
    def __init__(self, hp: Hyperparameters, num_paths: int):
        super().__init__()
        self.hp = hp
        self.num_paths = num_paths
        self.radial = Radial(hp.NB, hp.H, 2 * num_paths * hp.C)
        self.gate = Gate(hp.A, hp.NB)
        self.attn = Attention(hp.A, hp.dk, hp.C)
        self.mix = Mix(hp.L, hp.C)
        self.update = Update(hp.L, hp.C)
        self.norm = Norm(hp.L, hp.C)
        # ProductBasis with correlation 2 in the layers t < T - 1 (the last layer's message matters for l = 0 only),
        # set by BatmobileModel after every other parameter is drawn (so a seed gives the same other parameters for
        # both correlations); with correlation 1 and in the last layer no module and no state_dict entries
        self.product: Optional[ProductBasis] = None
        self.register_buffer("head_of_channel", torch.arange(hp.C) // (hp.C // hp.A), persistent=False)

    def forward(self, h, tp: TensorProduct, coupling, B, u, sender, receiver):
        hp, P, C, L = self.hp, self.num_paths, self.hp.C, self.hp.L
        N, E = h.shape[0], sender.shape[0]
        # radial MLP -> conv weights w and value weights wv
        hidden = torch.nn.functional.silu(B @ self.radial.W1.T + self.radial.b1)
        R = u[:, None] * (hidden @ self.radial.W2.T)
        w = R[:, :P * C].reshape(E, P, C)
        wv = R[:, P * C:].reshape(E, P, C)
        h_j = h[sender]

        # 1. message
        msg = tp(h_j, w, coupling)
        m = torch.zeros_like(h).index_add(0, receiver, msg) / hp.avg_num_neighbors

        # 2. attention; logits from scalar channels plus the radial gate
        q = (h[:, 0, :] @ self.attn.Wq.T).reshape(N, hp.A, hp.dk)
        k = (h[:, 0, :] @ self.attn.Wk.T).reshape(N, hp.A, hp.dk)
        s = (q[receiver] * k[sender]).sum(-1) / math.sqrt(hp.dk) + B @ self.gate.Wg.T    # (E, A)
        # softmax over the envelope-weighted logits s + log u (docs/model.md step 2); the max edge gets weight 1,
        # so Z >= 1 and no epsilon is needed. Edges whose u rounds to <= 0 next to r_c get weight 0.
        positive = u > 0
        log_u = torch.log(torch.where(positive, u, torch.ones_like(u)))
        s_env = torch.where(positive[:, None], s + log_u[:, None], torch.full_like(s, -math.inf))
        s_max = _segment_max(s_env.detach(), receiver, N)   # E does not depend on the max: no gradient
        ex = torch.where(positive[:, None], torch.exp(s_env - s_max[receiver]), torch.zeros_like(s))
        Z = torch.zeros(N, hp.A, dtype=h.dtype, device=h.device).index_add(0, receiver, ex)
        Z = torch.where(Z > 0, Z, torch.ones_like(Z))      # atoms without edges: o = 0
        values = tp(h_j, wv, coupling) * ex[:, self.head_of_channel][:, None, :]
        o = torch.zeros_like(h).index_add(0, receiver, values) / Z[:, self.head_of_channel][:, None, :]

        # 3. product basis (correlation 2), per atom from the aggregated message
        pb = self.product
        p = pb(m) if pb is not None else None

        # 4./5. mix and gate; the gates do not see p
        mix = self.mix
        m0, o0 = m[:, 0, :], o[:, 0, :]
        z0 = m0 @ mix.Wm0.T + o0 @ mix.Wo0.T + mix.b0
        if p is not None:
            z0 = z0 + p[:, 0, :] @ pb.Wp0.T
        gam = torch.sigmoid(m0 @ mix.Wgm.T + o0 @ mix.Wgo.T + mix.bg)
        act = [torch.nn.functional.silu(z0)[:, None, :]]
        for l in range(1, L + 1):
            sl = slice(l * l, (l + 1) ** 2)
            z_l = m[:, sl, :] @ getattr(mix, f"Wm{l}").T + o[:, sl, :] @ getattr(mix, f"Wo{l}").T
            if p is not None:
                z_l = z_l + p[:, sl, :] @ getattr(pb, f"Wp{l}").T
            act.append(z_l * gam[:, None, (l - 1) * C:l * C])

        # 6./7. residual update and equivariant RMS norm per l
        out = []
        for l in range(L + 1):
            sl = slice(l * l, (l + 1) ** 2)
            h_l = h[:, sl, :] + act[l] @ getattr(self.update, f"Wu{l}").T
            rms = torch.sqrt((h_l * h_l).mean(dim=(1, 2), keepdim=True) + NORM_EPS)
            out.append(h_l * getattr(self.norm, f"g{l}") / rms)
        return torch.cat(out, dim=1)


def _segment_max(s: torch.Tensor, receiver: torch.Tensor, N: int) -> torch.Tensor:
    """Per-receiver max of s (E, A); -inf entries and receivers without edges give 0 (any finite shift works)."""
    E, A = s.shape
    smax = torch.full((N, A), -math.inf, dtype=s.dtype, device=s.device)
    if E > 0:
        smax = smax.scatter_reduce(0, receiver[:, None].expand(E, A), s, reduce="amax", include_self=True)
    return torch.where(torch.isfinite(smax), smax, torch.zeros_like(smax))


class Readout(nn.Module):
    def __init__(self, C: int, Hr: int):
        super().__init__()
        self.W1 = _linear_param(Hr, C)
        self.b1 = nn.Parameter(torch.zeros(Hr))
        self.w2 = nn.Parameter(torch.randn(Hr) / math.sqrt(Hr))
        self.b2 = nn.Parameter(torch.zeros(()))


class BatmobileModel(nn.Module):
    def __init__(self, hp: Hyperparameters, seed: Optional[int] = None):
        super().__init__()
        if hp.L < 1 or hp.L > 3 or hp.C % hp.A != 0:
            raise ValueError("need 1 <= L <= 3 and C divisible by A")
        hp.check_correlation()
        if seed is not None:
            torch.manual_seed(seed)
        self.hp = hp
        self.tp = TensorProduct(hp.L)
        S = len(hp.species)
        self.embed = nn.Parameter(torch.randn(S, hp.C))
        self.layers = nn.ModuleList([InteractionBlock(hp, self.tp.num_paths) for _ in range(hp.T)])
        self.readout = Readout(hp.C, hp.Hr)
        self.register_buffer("E_ref", torch.zeros(S))
        if hp.correlation == 2:
            for layer in self.layers[:-1]:
                layer.product = ProductBasis(hp.L, hp.C)

    def atomic_energies(self, species: torch.Tensor, edge_vec: torch.Tensor, sender: torch.Tensor,
                        receiver: torch.Tensor) -> torch.Tensor:
        """Per-atom energies E_n (N,) from species (N,) and edge vectors r_ij = x_j - x_i (E, 3)."""
        hp = self.hp
        N = species.shape[0]
        d = edge_vec.norm(dim=1)
        rhat = edge_vec / d[:, None]
        Y = spherical_harmonics(hp.L, rhat)
        coupling = self.tp.coupling_matrices(Y)
        B = bessel_basis(d, hp.r_c, hp.NB)
        u = envelope(d, hp.r_c)
        K = (hp.L + 1) ** 2
        h = torch.zeros(N, K, hp.C, dtype=edge_vec.dtype, device=edge_vec.device)
        h = torch.cat([self.embed[species][:, None, :], h[:, 1:, :]], dim=1)
        for layer in self.layers:
            h = layer(h, self.tp, coupling, B, u, sender, receiver)
        ro = self.readout
        e = torch.nn.functional.silu(h[:, 0, :] @ ro.W1.T + ro.b1) @ ro.w2 + ro.b2
        return hp.energy_scale * e + self.E_ref[species]


@torch.no_grad()
def scale_product_basis(model: BatmobileModel, species: torch.Tensor, edge_vec: torch.Tensor, sender: torch.Tensor,
                        receiver: torch.Tensor, fraction: float = 0.1) -> List[float]:
    """Scales each product-basis layer's path weights wq so that on these atoms RMS(p) = fraction x RMS(m), layer
    after layer (a layer's input depends on the layers before it). p is quadratic in the message m, whose entries
    are small on real data (~0.01 on the water frames): with wq at its initial ~0.1 the product would start at
    ~0.1 % of the linear term, and Adam would spend thousands of steps growing it. Returns the factors applied (one
    per product layer); layers whose p is zero on these atoms are left as they are (factor 1)."""
    factors = []
    for layer in model.layers:
        if layer.product is None:
            continue
        seen = {}
        hook = layer.product.register_forward_hook(lambda mod, inp, out: seen.update(m=inp[0], p=out))
        try:
            model.atomic_energies(species, edge_vec, sender, receiver)
        finally:
            hook.remove()
        rms_m, rms_p = (seen[k].double().pow(2).mean().sqrt().item() for k in ("m", "p"))
        factor = fraction * rms_m / rms_p if rms_p > 0 else 1.0
        layer.product.wq.mul_(factor)
        factors.append(factor)
    return factors


def edge_vectors(positions: torch.Tensor, cell: torch.Tensor, sender: torch.Tensor, receiver: torch.Tensor,
                 shifts: torch.Tensor) -> torch.Tensor:
    """r_ij = x_j - x_i + shifts @ cell (E, 3); cell (3, 3), or (E, 3, 3) per-edge cells for batched structures."""
    if cell.dim() == 2:
        offset = shifts.to(positions.dtype) @ cell
    else:
        offset = torch.einsum("ek,ekl->el", shifts.to(positions.dtype), cell)
    return positions[sender] - positions[receiver] + offset


def evaluate_structure(model: BatmobileModel, positions: torch.Tensor, species: torch.Tensor, cell: torch.Tensor,
                       sender: torch.Tensor, receiver: torch.Tensor, shifts: torch.Tensor,
                       training: bool = False, virial: bool = False,
                       edge_terms: bool = False) -> Dict[str, torch.Tensor]:
    """Energy, per-atom energies and forces (and virials) of one or more structures.

    shifts: integer cell offsets (E, 3) so that r_ij = x_j - x_i + shifts @ cell. For batched structures pass
    cell as (E, 3, 3) per-edge cells. With training=True the graph is kept for a force loss. edge_terms=True adds
    the edge vectors r_ij and dE/dr_ij (with the graph when training), from which a virial loss is built.
    """
    edge_vec = edge_vectors(positions, cell, sender, receiver, shifts)
    if not edge_vec.requires_grad:
        edge_vec.requires_grad_(True)
    atomic = model.atomic_energies(species, edge_vec, sender, receiver)
    energy = atomic.sum()
    (dE_dr,) = torch.autograd.grad(energy, [edge_vec], create_graph=training)
    N = positions.shape[0]
    # r_ij depends on x_j with +1 and on x_i with -1
    forces = torch.zeros(N, 3, dtype=dE_dr.dtype, device=dE_dr.device)
    forces = forces.index_add(0, receiver, dE_dr).index_add(0, sender, -dE_dr)
    out = {"energy": energy, "atomic_energies": atomic, "forces": forces}
    if edge_terms:
        out["edge_vectors"], out["edge_gradients"] = edge_vec, dE_dr
    if virial:
        # per-edge tally W_e = -(r (x) g + g (x) r) / 2, g = dE/dr_ij: symmetric per edge, so the per-atom virials
        # are symmetric too; the sum equals -sum r (x) g, which is symmetric for a rotation-invariant E
        rg = edge_vec.detach()[:, :, None] * dE_dr.detach()[:, None, :]      # (E, 3, 3)
        edge_virial = -0.5 * (rg + rg.transpose(1, 2))
        out["virial"] = edge_virial.sum(0)
        # per-atom virial: half of each edge's tally to its receiver and half to its sender
        half = 0.5 * edge_virial
        per_atom = torch.zeros(N, 3, 3, dtype=half.dtype, device=half.device)
        out["atomic_virial"] = per_atom.index_add(0, receiver, half).index_add(0, sender, half)
    return out


def virial_voigt(W: torch.Tensor) -> torch.Tensor:
    """3x3 (..., 3, 3) -> LAMMPS order xx, yy, zz, xy, xz, yz."""
    return torch.stack([W[..., 0, 0], W[..., 1, 1], W[..., 2, 2], W[..., 0, 1], W[..., 0, 2], W[..., 1, 2]], -1)
