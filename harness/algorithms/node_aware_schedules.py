"""The schedules of the node-aware allreduces (``node_aware.py``): pure functions of the node
layout, no MPI. Each schedule is a list of operations on the pair (buf, tmp), ``(kind, peer,
tag)``: recursive doubling among given members (``rd_ops``), binomial reduce and broadcast,
SMP's three phases (``smp_schedule``), and NAP's groups and steps (Bienz et al., Algorithm 1:
``nap_steps``, ``nap_groups``, ``nap_step_pattern``, ``nap_schedule``).
"""

from __future__ import annotations

from .. import layout as _layout

TAG_NAP_LOCAL, TAG_NAP_EXCHANGE, TAG_NAP_FEED, TAG_NAP_SPREAD = 2101, 2102, 2103, 2104
TAG_SMP_REDUCE, TAG_SMP_MASTERS, TAG_SMP_BCAST = 2201, 2202, 2203

# operations of a schedule on the pair (buf, tmp): (kind, peer, tag)
SEND, RECV, RECV_REDUCE, EXCHANGE = 0, 1, 2, 3
# intra=shm (peer is then a communicator): allreduce / broadcast from local rank 0 on the node's
# shared-memory window, recursive doubling among the node masters
SHM, SHM_BCAST, MASTERS_RD = 4, 5, 6


def rd_ops(members, idx: int, tag: int) -> list:
    """Recursive doubling among ``members`` (ranks), seen from ``members[idx]``, with Open MPI's
    fold-in for a count that is not a power of two (``p2p.recursive_doubling``): the result
    ends in ``buf`` on every member."""
    m = len(members)
    ops: list = []
    if m <= 1 or idx < 0:
        return ops
    adj = 1 << (m.bit_length() - 1)
    extra = m - adj
    if idx < 2 * extra:
        if idx % 2 == 0:
            ops.append((SEND, members[idx + 1], tag))
            newidx = -1
        else:
            ops.append((RECV_REDUCE, members[idx - 1], tag))
            newidx = idx >> 1
    else:
        newidx = idx - extra
    if newidx >= 0:
        d = 1
        while d < adj:
            nr = newidx ^ d
            ops.append((EXCHANGE, members[nr * 2 + 1 if nr < extra else nr + extra], tag))
            d <<= 1
    if idx < 2 * extra:
        ops.append((RECV, members[idx + 1], tag) if idx % 2 == 0 else (SEND, members[idx - 1], tag))
    return ops


def binomial_reduce_ops(members, idx: int, tag: int) -> list:
    """Binomial-tree reduce of ``members`` to ``members[0]`` (result in its ``buf``)."""
    ops: list = []
    mask = 1
    while mask < len(members):
        if idx & mask:
            ops.append((SEND, members[idx - mask], tag))
            break
        if idx + mask < len(members):
            ops.append((RECV_REDUCE, members[idx + mask], tag))
        mask <<= 1
    return ops


def binomial_bcast_ops(members, idx: int, tag: int) -> list:
    """Binomial-tree broadcast of ``members[0]``'s ``buf`` (MPICH's order)."""
    m, ops = len(members), []
    mask = 1
    while mask < m:
        if idx & mask:
            ops.append((RECV, members[idx - mask], tag))
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if idx + mask < m:
            ops.append((SEND, members[idx + mask], tag))
        mask >>= 1
    return ops


def smp_schedule(lay: _layout.Layout, rank: int) -> list:
    """SMP's operations for ``rank``: reduce to the node master, recursive doubling among the
    masters, broadcast inside the node."""
    node = lay.nodes[lay.node_of[rank]]
    idx = node.index(rank)
    masters = [n[0] for n in lay.nodes]
    ops = binomial_reduce_ops(node, idx, TAG_SMP_REDUCE)
    if idx == 0:
        ops += rd_ops(masters, masters.index(rank), TAG_SMP_MASTERS)
    return ops + binomial_bcast_ops(node, idx, TAG_SMP_BCAST)


def nap_steps(n: int, ppn: int) -> int:
    """Inter-node steps of NAP over ``n`` nodes: ceil(log_ppn n) (0 for one node)."""
    if ppn < 2:
        raise ValueError(f"NAP needs ppn >= 2 for its inter-node steps, got ppn={ppn}")
    steps, span = 0, 1
    while span < n:
        span *= ppn
        steps += 1
    return steps


def _split_even(start: int, count: int, parts: int) -> list[tuple[int, int]]:
    """``count`` consecutive items from ``start`` in ``parts`` runs of nearly equal length
    (the first ``count % parts`` one longer): a list of (start, length)."""
    base, extra = divmod(count, parts)
    out, at = [], start
    for j in range(parts):
        length = base + (1 if j < extra else 0)
        out.append((at, length))
        at += length
    return out


def nap_groups(n: int, ppn: int) -> list[list[list[tuple[int, int]]]]:
    """The groups of every inter-node step of NAP over ``n`` nodes: ``groups[i]`` lists the
    groups of step i, each as its subgroups, each a run (first node, node count).

    Built from the top: the ``n`` nodes form one group of the last step, cut into
    ``ceil(n / ppn^(k-1))`` runs of nearly equal size (k = ceil(log_ppn n)); each run is a
    group of the step before, cut the same way, down to single nodes. For n a power of ppn
    this is Algorithm 1's grouping (ppn equal subgroups of consecutive nodes at every step);
    for n divisible by ppn the first step is the regular one and the last has fewer
    subgroups (Fig. 8); otherwise the first step's groups have nearly equal sizes (Fig. 9).
    Keeping the runs balanced bounds how many nodes lack a partner in a smaller subgroup."""
    k = nap_steps(n, ppn)
    groups: list[list] = [[] for _ in range(k)]

    def cut(start: int, count: int, level: int) -> None:  # level: steps left, >= 1
        if count <= 1 or level == 0:
            return
        nsub = -(-count // ppn ** (level - 1))
        subs = _split_even(start, count, nsub)
        if nsub > 1:
            groups[level - 1].append(subs)
        for s_start, s_len in subs:
            cut(s_start, s_len, level - 1)

    cut(0, n, k)
    return groups


def nap_step_pattern(n: int, ppn: int, step: int):
    """Who does what in inter-node step ``step`` of NAP over ``n`` nodes of ``ppn`` processes,
    in (node, local rank) pairs. Returns (roles, feeds) where ``roles[(node, r)]`` is
    ``("exchange", (node', r'))``, ``("receive", (node', r'))``, ``("own", None)`` or
    ``("none", None)`` for every process of a node whose group has work in this step, and
    ``feeds[(node, r)]`` lists the (node', r') it sends its data to."""
    roles, feeds = {}, {}
    for subs in nap_groups(n, ppn)[step]:
        nsub = len(subs)
        for s, (s_start, s_len) in enumerate(subs):
            for pos in range(s_len):
                m = s_start + pos
                for r in range(ppn):
                    if r >= nsub:
                        roles[(m, r)] = ("none", None)
                    elif r == s:
                        roles[(m, r)] = ("own", None)
                    elif pos < subs[r][1]:
                        roles[(m, r)] = ("exchange", (subs[r][0] + pos, s))
        # Fig. 9: a node at a position subgroup t lacks gets t's data from t's idle processes
        for t, (t_start, t_len) in enumerate(subs):
            extras = [s_start + pos for s, (s_start, s_len) in enumerate(subs) if s != t
                      for pos in range(t_len, s_len)]
            feeders = [(t_start + q, lr) for lr in [t, *range(nsub, ppn)] for q in range(t_len)]
            for j, x in enumerate(extras):
                src = feeders[j % len(feeders)]
                roles[(x, t)] = ("receive", src)
                feeds.setdefault(src, []).append((x, t))
    return roles, feeds


def nap_schedule(lay: _layout.Layout, rank: int) -> dict:
    """NAP's plan for ``rank``: the first intra-node allreduce and, per inter-node step, the
    role (exchange / receive / own / none) with its peer, the ranks it feeds, and the
    intra-node allreduce among the node's participating ranks plus the hand-over of its
    result to the others."""
    ppn = lay.ppn
    if ppn is None:
        raise _layout.LayoutError(
            "nap: every node needs the same number of processes, got nodes of "
            + ", ".join(str(len(n)) for n in lay.nodes) + " processes")
    n = lay.n_nodes
    node_id = lay.node_of[rank]
    node = lay.nodes[node_id]
    r = node.index(rank)
    plan = {"first": rd_ops(node, r, TAG_NAP_LOCAL), "steps": [], "fallback": None}
    if ppn == 1:
        everyone = [nd[0] for nd in lay.nodes]
        plan["first"] = rd_ops(everyone, everyone.index(rank), TAG_NAP_EXCHANGE)
        plan["fallback"] = "ppn=1: recursive doubling between the nodes"
        plan["n_steps"] = (n - 1).bit_length()
        return plan
    plan["n_steps"] = nap_steps(n, ppn)
    world = lambda pair: lay.nodes[pair[0]][pair[1]]  # noqa: E731
    for step in range(plan["n_steps"]):
        roles, feeds = nap_step_pattern(n, ppn, step)
        if (node_id, r) not in roles:  # the node's group has a single subgroup: nothing to do
            continue
        role, peer = roles[(node_id, r)]
        nsub = sum(1 for j in range(ppn) if roles[(node_id, j)][0] != "none")
        members = list(node[:nsub])
        if r < nsub:
            local = rd_ops(members, r, TAG_NAP_LOCAL)
            local += [(SEND, node[j], TAG_NAP_SPREAD) for j in range(nsub, ppn) if j % nsub == r]
        else:
            local = [(RECV, node[r % nsub], TAG_NAP_SPREAD)]
        plan["steps"].append({
            "members": nsub,
            "role": role,
            "peer": world(peer) if peer is not None else None,
            "feeds": [world(x) for x in feeds.get((node_id, r), [])],
            "local": local,
        })
    return plan
