"""The max-rate cost model of RD, SMP and NAP allreduce (Bienz et al., Sect. IV, eqs. 3-6).

For P = n x ppn processes (n nodes) and a message of s bytes per process:

- RD (eq. 4):  (a_l + b_l s) log2(ppn) + (a + ppn s / min(R_N, ppn R_b)) log2(n) + g s log2(P)
- SMP (eq. 5): (a_l + b_l s) log2(ppn) + (a + s / R_b) log2(n)                 + g s log2(P)
- NAP (eq. 6): (a_l + b_l s) log2(P)   + (a + ppn s / min(R_N, ppn R_b)) log_ppn(n)
               + g s (log2(P) + log_ppn(n))

with a_l, b_l the intra-node latency (s) and cost per byte (s/B), a the inter-node latency
(s), R_b the inter-process bandwidth (B/s, 1/beta), R_N the injection bandwidth of a node (B/s)
and g the reduction cost per byte (s/B; the paper's gamma, written per value there: we count
bytes so that s means the same in every term). Each term is eq. 3 with the step counts of the
algorithm: the intra-node part, the inter-node part (``ppn s / min(R_N, ppn R_b)`` is the
time ppn processes of a node need to inject s bytes each; SMP has one process per node
injecting, so its messages move at R_b), and the local reductions.

``steps="paper"`` (default) uses the real-valued logarithms as printed; ``steps="ceil"``
rounds every count up to whole steps, as the implementations run them (``ceil(log2 n)``,
``ceil(log_ppn n)``, ...). NAP needs ppn >= 2 (log_ppn is undefined for ppn = 1).

``MaxRateParams.defaults()`` are illustrative values of the order of a current cluster
(0.5 us / 0.1 ns per byte inside a node, 2 us and 10 GB/s per process between nodes, 25 GB/s
of injection per node, 0.1 ns per byte reduced); the paper measured Blue Waters' but does not
print them. Every value can be set (``harness model nap --alpha ...``) or read from a JSON
file of the same keys.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

ALGORITHMS = ("rd", "smp", "nap")
STEPS = ("paper", "ceil")


@dataclass(frozen=True)
class MaxRateParams:
    alpha_l: float  # s, intra-node latency
    beta_l: float  # s/B, intra-node cost per byte
    alpha: float  # s, inter-node latency
    R_b: float  # B/s, inter-process (inter-node) bandwidth
    R_N: float  # B/s, injection bandwidth of a node
    gamma: float  # s/B, reduction cost per byte

    @classmethod
    def defaults(cls) -> "MaxRateParams":
        return cls(alpha_l=0.5e-6, beta_l=1e-10, alpha=2e-6, R_b=10e9, R_N=25e9, gamma=1e-10)

    @classmethod
    def from_dict(cls, doc: dict, base: "MaxRateParams | None" = None) -> "MaxRateParams":
        """Parameters from a dict (keys as the fields; missing keys from ``base`` or the
        defaults). Unknown keys and values that are not positive numbers raise ValueError
        naming the key. A ``model_params.json`` written by ``harness fit`` (harness/analysis/netparams.py)
        is read through its ``"maxrate"`` section (whose ``provenance`` is left aside)."""
        if "maxrate" in doc:
            doc = {k: v for k, v in doc["maxrate"].items() if k != "provenance"}
        elif "ab" in doc:
            failed = (doc.get("provenance") or {}).get("maxrate_error")
            why = (f"its fit failed: {failed}" if failed else
                   "it was fitted from a campaign without ping-pong cells")
            raise ValueError(f"this parameter file has no 'maxrate' section ({why}); expected "
                             "keys: " + ", ".join(f.name for f in fields(cls)))
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(doc) - set(names))
        if unknown:
            raise ValueError(f"unknown max-rate parameter(s) {', '.join(map(repr, unknown))}; "
                             f"expected keys: {', '.join(names)}")
        values = asdict(base or cls.defaults())
        for key, value in doc.items():
            try:
                v = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"max-rate parameter {key}: expected a number, got {value!r}") from None
            if not (v >= 0 and math.isfinite(v)) or (key in ("R_b", "R_N") and v == 0):
                raise ValueError(f"max-rate parameter {key}: expected a "
                                 f"{'positive' if key in ('R_b', 'R_N') else 'non-negative'} "
                                 f"finite number, got {value!r}")
            values[key] = v
        return cls(**values)


@dataclass(frozen=True)
class Cost:
    """A predicted time and its three parts (seconds), with the step counts used."""

    algorithm: str
    intra: float
    inter: float
    compute: float
    intra_steps: float
    inter_steps: float
    compute_steps: float

    @property
    def total(self) -> float:
        return self.intra + self.inter + self.compute


def _log(x: float, base: float, steps: str) -> float:
    if x <= 1:
        return 0.0
    value = math.log(x) / math.log(base)
    if steps == "ceil":
        near = round(value)
        return float(near if abs(value - near) < 1e-9 else math.ceil(value))
    return value


def injection_time(s: float, ppn: int, p: MaxRateParams) -> float:
    """Time for each of ``ppn`` processes of a node to send ``s`` bytes off the node at once:
    ``ppn s / min(R_N, ppn R_b)`` (eq. 3)."""
    return ppn * s / min(p.R_N, ppn * p.R_b)


def cost(algorithm: str, nodes: int, ppn: int, size: float, params: MaxRateParams,
         steps: str = "paper") -> Cost:
    """Eq. 4 (rd), 5 (smp) or 6 (nap) for ``nodes`` x ``ppn`` processes, ``size`` bytes."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm: expected one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if steps not in STEPS:
        raise ValueError(f"steps: expected one of {', '.join(STEPS)}, got {steps!r}")
    if nodes < 1 or ppn < 1:
        raise ValueError(f"nodes and ppn: expected integers >= 1, got nodes={nodes}, ppn={ppn}")
    if size < 0:
        raise ValueError(f"size: expected a number of bytes >= 0, got {size}")
    p, s = params, float(size)
    procs = nodes * ppn
    lg_p, lg_ppn, lg_n = _log(procs, 2, steps), _log(ppn, 2, steps), _log(nodes, 2, steps)
    local = p.alpha_l + p.beta_l * s
    if algorithm == "rd":
        return Cost("rd", local * lg_ppn, (p.alpha + injection_time(s, ppn, p)) * lg_n,
                    p.gamma * s * lg_p, lg_ppn, lg_n, lg_p)
    if algorithm == "smp":
        return Cost("smp", local * lg_ppn, (p.alpha + s / p.R_b) * lg_n, p.gamma * s * lg_p,
                    lg_ppn, lg_n, lg_p)
    if ppn < 2 and nodes > 1:
        raise ValueError(f"ppn: NAP needs ppn >= 2 (log_ppn n is undefined for ppn = 1), got {ppn}")
    lg_ppn_n = _log(nodes, ppn, steps) if nodes > 1 else 0.0
    return Cost("nap", local * lg_p, (p.alpha + injection_time(s, ppn, p)) * lg_ppn_n,
                p.gamma * s * (lg_p + lg_ppn_n), lg_p, lg_ppn_n, lg_p + lg_ppn_n)
