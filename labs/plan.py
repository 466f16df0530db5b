"""The pure plan: every operation that builds a lab, as data (ipmininet's build_commands()).

``build(topo, lab)`` returns an ordered list of small frozen ops; labs/apply.py turns them
into ``ip -b`` / ``tc -b`` / ``nft -f`` batches. Faults reuse the same ops: a hard restore
re-applies every op that touches the restored device (kernel-facts "Cutting links": admin
down deletes the addresses, routes, SIDs and neighbours of that device).

Rendering (``ip_line`` and friends) is pure too, so tests read exactly what will run.
"""

from __future__ import annotations

from dataclasses import dataclass

from labs import addressing as addr
from labs.topology import Link, LinkClass, Topology, namespace

SID_DEV = "sid0"
SID_PEER = "sid1"
NFT_TABLE = "mrc_lab"
USID_BEHAVIOUR = "End flavors next-csid lblen 32 nflen 16"
SID_TABLE = 109
"""With the BPF switch: the routing table that lists a switch's own SIDs, one blackhole
route each, which labs/bpf/srv6_switch.c looks up (MRC_SID_TABLE there)."""
SWITCH_PROGRAM = "srv6_switch"
PORT_PROGRAM = "mrc_port"
"""Trimming and RED marking on a switch port's egress (labs/bpf/mrc_port.c)."""
HTB_HIGH, HTB_LOW = 0x10010, 0x10020
"""htb classids 1:10 and 1:20 of a trimming port: stubs go high, everything else low."""
MPTCP_MAX_SUBFLOWS = 8
"""The kernel's cap on a connection's extra subflows and on a namespace's endpoints
(MPTCP_PM_ADDR_MAX: `ip mptcp limits set subflow 9` is refused)."""
MPTCP_TABLE = 200
"""Plane p's source routing table for MPTCP is MPTCP_TABLE + p (its rule's pref 1000 + p)."""
MPTCP_RULE_PREF = 1000


@dataclass(frozen=True, slots=True)
class Netns:
    """Create the namespace of a node."""

    node: str
    """Node the namespace belongs to."""


@dataclass(frozen=True, slots=True)
class Sysctl:
    """Set one sysctl inside the node's namespace."""

    node: str
    """Node whose namespace is changed."""
    key: str
    """Dotted name, e.g. net.ipv6.conf.all.forwarding."""
    value: str
    """Value written."""


@dataclass(frozen=True, slots=True)
class Veth:
    """Create a veth pair from node's namespace, the peer directly in peer_node's."""

    node: str
    """Node where the command runs and ``dev`` lives."""
    dev: str
    """Local end."""
    peer_node: str
    """Node of the other end (may equal node: the SID veth)."""
    peer_dev: str
    """Other end."""


@dataclass(frozen=True, slots=True)
class LinkUp:
    """Set MTU (and MAC) of an interface and bring it up."""

    node: str
    """Node owning dev."""
    dev: str
    """Interface."""
    mtu: int | None = None
    """MTU, or None to leave it."""
    mac: str | None = None
    """MAC address, or None to leave it."""


@dataclass(frozen=True, slots=True)
class Addr:
    """Add an address (no DAD: static lab, kernel-facts)."""

    node: str
    """Node owning dev."""
    dev: str
    """Interface."""
    cidr: str
    """Address with prefix length."""


@dataclass(frozen=True, slots=True)
class Neigh:
    """A permanent neighbour entry so no packet waits for ND."""

    node: str
    """Node owning dev."""
    dev: str
    """Interface."""
    ip: str
    """Neighbour's link-local address."""
    lladdr: str
    """Neighbour's MAC."""


@dataclass(frozen=True, slots=True)
class Route:
    """An IPv6 route (``ip route replace`` keeps re-applying idempotent)."""

    node: str
    """Node whose table changes."""
    dst: str
    """Prefix, possibly preceded by a route type ("local fcbb:...::/48")."""
    spec: str
    """Everything after the prefix: via/dev, nexthops or a seg6local encap."""
    devs: tuple[str, ...]
    """Devices the route uses: a hard restore of one re-adds it."""


@dataclass(frozen=True, slots=True)
class Qdisc:
    """tbf on a device's egress: the link rate and the port's buffer."""

    node: str
    """Node owning dev."""
    dev: str
    """Interface."""
    rate_bps: int
    """Rate in bits per second."""
    burst: int
    """Bucket size, bytes."""
    limit: int
    """Queue limit, bytes."""


@dataclass(frozen=True, slots=True)
class PrioQdisc:
    """htb in place of tbf on a trimming port: the same rate and buffer, and a high class
    that trimmed stubs jump the queue in (this kernel has no prio qdisc: kernel-facts)."""

    node: str
    """Node owning dev."""
    dev: str
    """Interface."""
    rate_bps: int
    """Rate in bits per second."""
    burst: int
    """Bucket size, bytes."""
    limit: int
    """Queue limit of each class, bytes."""
    mtu: int
    """The port's MTU: one frame is each class's round-robin quantum."""


@dataclass(frozen=True, slots=True)
class PortMap:
    """A switch port's entry in the port program's map (labs/bpf/mrc_port.c, packed by
    labs/trim.py): its rate, thresholds, and what it does above them."""

    node: str
    """Switch owning dev."""
    dev: str
    """Egress port."""
    mac: str
    """The port's MAC: the entry's key (the program reads it as the frame's source)."""
    rate_bps: int
    """The rate the virtual queue drains at: the port's htb/tbf rate."""
    burst: int
    """The port's bucket, bytes: what may leave at once after an idle spell."""
    trim_at: int
    """Trimming threshold, bytes (0: no trimming)."""
    limit: int
    """Virtual queue bytes above which every packet is dropped."""
    mark_min: int
    """RED: no CE mark below this depth, bytes."""
    mark_max: int
    """RED: depth where the mark probability reaches mark_p (0: no marking)."""
    mark_p: float
    """RED: mark probability at mark_max."""
    faces_host: bool
    """The last hop to a receiver: its stubs carry DSCP_TRIMMED_LASTHOP."""


@dataclass(frozen=True, slots=True)
class TcBpf:
    """A tc-BPF program (labs/bpf/<program>.c) on a device's clsact hook, direct action."""

    node: str
    """Node owning dev."""
    dev: str
    """Interface."""
    hook: str
    """"ingress" or "egress"."""
    program: str
    """Name of the program's C source in labs/bpf/, without .c."""


@dataclass(frozen=True, slots=True)
class MptcpLimits:
    """The in-kernel MPTCP path manager's limits of a host's namespace."""

    node: str
    """Host whose namespace is changed."""
    subflows: int
    """Extra subflows a connection may have (beyond its first): those it opens, and those
    its peer opens to it."""
    add_addr_accepted: int = 0
    """Addresses a peer announces (ADD_ADDR) that a connection opens subflows to."""


@dataclass(frozen=True, slots=True)
class MptcpEndpoint:
    """A local address the host's MPTCP path manager opens an extra subflow from (a
    ``subflow`` endpoint), to the address the connection was made to."""

    node: str
    """Host owning dev."""
    address: str
    """The subflow's source address (no prefix length)."""
    dev: str
    """Its interface."""


@dataclass(frozen=True, slots=True)
class SourceRule:
    """Policy routing: packets from ``src`` are routed by ``table`` (``ip -6 rule``)."""

    node: str
    """Host whose rules change."""
    src: str
    """Source address (no prefix length)."""
    table: int
    """Routing table it selects."""
    pref: int
    """The rule's priority (before main's 32766)."""


@dataclass(frozen=True, slots=True)
class Nft:
    """A whole nftables table loaded with ``nft -f`` in the node's namespace."""

    node: str
    """Node whose ruleset changes."""
    table: str
    """``family name`` of the table, e.g. "inet mrc_lab"."""
    text: str
    """The table's definition."""


Op = (
    Netns
    | Sysctl
    | Veth
    | LinkUp
    | Addr
    | Neigh
    | Route
    | Qdisc
    | PrioQdisc
    | TcBpf
    | PortMap
    | MptcpLimits
    | MptcpEndpoint
    | SourceRule
    | Nft
)
TcOp = Qdisc | PrioQdisc | TcBpf
IpOp = Veth | LinkUp | Addr | Neigh | Route | MptcpLimits | MptcpEndpoint | SourceRule
"""Ops that are ``ip -b`` lines (ip_line); TcOp's are ``tc -b`` lines (tc_lines)."""


def build(topo: Topology) -> list[Op]:
    """Every op that builds the lab, in an order that applies cleanly. ``topo.srv6`` must
    be decided ("seg6local" or "bpf"): apply.up resolves "auto" on the running kernel."""
    if topo.srv6 == "auto":
        raise ValueError('build() needs topo.srv6 decided: "seg6local" or "bpf", not "auto"')
    ops: list[Op] = [Netns(n) for n in topo.nodes]
    for node in topo.nodes:
        ops += sysctls(topo, node)
    ops += [Veth(link.a, link.a_dev, link.b, link.b_dev) for link in topo.links]
    if topo.srv6 == "seg6local":
        ops += [Veth(sw, SID_DEV, sw, SID_PEER) for sw in topo.switches]
    for node in topo.nodes:
        ops += node_config(topo, node)
    for node in topo.switches:
        nft = ecn_table(topo, node)
        if nft is not None:
            ops.append(nft)
    return ops


def sysctls(topo: Topology, node: str) -> list[Sysctl]:
    """Set before interfaces exist, so the ``default`` values reach every new device."""
    common = {
        "net.ipv6.conf.all.accept_dad": "0",
        "net.ipv6.conf.default.accept_dad": "0",
        "net.ipv6.conf.default.addr_gen_mode": "1",  # no automatic link-local: ours is static
        "net.ipv6.conf.all.ignore_routes_with_linkdown": "1",
        "net.ipv6.conf.default.ignore_routes_with_linkdown": "1",
        "net.ipv6.fib_multipath_hash_policy": "1",  # L4 hash, like RoCE ECMP
    }
    if topo.kind_of(node) == "host":
        # A host receiving a packet that still carries an SRH needs seg6_enabled on all and
        # on the incoming interface (kernel-facts "seg6 / seg6local").
        extra = {
            "net.ipv6.conf.all.seg6_enabled": "1",
            "net.ipv6.conf.default.seg6_enabled": "1",
        }
    else:
        extra = {"net.ipv6.conf.all.forwarding": "1"}  # End is dropped without it
    return [Sysctl(node, k, v) for k, v in (common | extra).items()]


def node_config(topo: Topology, node: str) -> list[Op]:
    ops: list[Op] = [LinkUp(node, "lo")]
    for index, link in enumerate(topo.links):
        for end, (n, dev) in enumerate(((link.a, link.a_dev), (link.b, link.b_dev))):
            if n == node:
                ops += port_ops(topo, link, index, end, node, dev)
    if topo.kind_of(node) == "host":
        return ops + host_ops(topo, node)
    return ops + switch_ops(topo, node)


def port_ops(topo: Topology, link: Link, index: int, end: int, node: str, dev: str) -> list[Op]:
    lc = topo.link_class(link)
    peer = link.b if end == 0 else link.a
    mac = addr.mac(index, end)
    return [
        LinkUp(node, dev, lc.mtu, mac),
        Addr(node, dev, f"{addr.link_local(topo, node)}/64"),
        Neigh(node, dev, str(addr.link_local(topo, peer)), addr.mac(index, 1 - end)),
        *queue_ops(topo, lc, node, dev, peer, mac),
    ]


def queue_ops(topo: Topology, lc: LinkClass, node: str, dev: str, peer: str, mac: str) -> list[Op]:
    """A port's queue: tbf; on a switch port that trims or marks RED, the port program on
    its egress too, and htb instead of tbf when it trims (docs/lab.md)."""
    tbf = Qdisc(node, dev, lc.rate_bps, lc.burst, lc.limit)
    faces_host = topo.kind_of(peer) == "host"
    marks = lc.ecn == "red" and not faces_host  # never the last hop, as the nft modes
    if topo.kind_of(node) == "host" or not (lc.trim_at or marks):
        return [tbf]
    entry = PortMap(
        node,
        dev,
        mac,
        lc.rate_bps,
        lc.burst,
        lc.trim_at,
        lc.hard_limit,
        lc.ecn_min if marks else 0,
        lc.ecn_max if marks else 0,
        lc.ecn_probability if marks else 0.0,
        faces_host,
    )
    queue = PrioQdisc(node, dev, lc.rate_bps, lc.burst, lc.limit, lc.mtu) if lc.trim_at else tbf
    return [queue, TcBpf(node, dev, "egress", PORT_PROGRAM), entry]


def host_ops(topo: Topology, host: str) -> list[Op]:
    base = addr.baseline_address(topo, host)
    ops: list[Op] = [Addr(host, "lo", f"{base}/128")]
    hops: list[tuple[str, str]] = []
    for plane in range(topo.planes):
        port = f"p{plane}"
        t0 = topo.t0(plane, topo.rack_of(host))
        gw = addr.link_local(topo, t0)
        here = addr.host_address(topo, plane, host)
        ops += [
            Addr(host, port, f"{here}/128"),
            # Catch-all: whatever spare bits a shifted container keeps, it is delivered.
            Route(host, f"local {addr.node_prefix(topo, plane, host)}", "dev lo", ()),
            Route(host, addr.block_prefix(plane), f"via {gw} dev {port} src {here}", (port,)),
        ]
        hops.append((str(gw), port))
    ops.append(_multipath(host, addr.baseline_prefix(), hops, f"src {base}"))
    return ops + (mptcp_ops(topo, host) if topo.mptcp != "off" else [])


def mptcp_ops(topo: Topology, host: str) -> list[Op]:
    """One MPTCP subflow per plane (docs/lab.md, "MPTCP"). A client binds its plane-0
    address and connects to the peer's baseline address, which every plane routes; its
    path manager then opens a subflow from its address in each plane 1.. (``subflow``
    endpoints) to that same address, and a rule per plane address routes whatever leaves
    from it through that plane's port. Nobody announces an address: when both ends do,
    their subflows to each other's cross, each end's own attempt uses up its limit, each
    refuses the other's, and a loaded connection kept one subflow (seen on tiny). A
    server's own attempts, from its plane addresses to the client's plane-0 address,
    find no route in their plane's table and fail at once, leaving its limit to the
    client's. The kernel allows at most MPTCP_MAX_SUBFLOWS endpoints and extra subflows:
    planes beyond carry none."""
    extra = min(topo.planes - 1, MPTCP_MAX_SUBFLOWS)
    ops: list[Op] = [MptcpLimits(host, extra)]
    gw = str(addr.link_local(topo, topo.t0(0, topo.rack_of(host))))  # every T0's is the same
    for plane in range(extra + 1):
        here, port, table = (
            str(addr.host_address(topo, plane, host)),
            f"p{plane}",
            MPTCP_TABLE + plane,
        )
        ops += [
            SourceRule(host, here, table, MPTCP_RULE_PREF + plane),
            Route(host, addr.baseline_prefix(), f"via {gw} dev {port} table {table}", (port,)),
            Route(host, addr.block_prefix(plane), f"via {gw} dev {port} table {table}", (port,)),
            Route(host, "unreachable ::/0", f"table {table}", ()),
        ]
        if plane:
            ops.append(MptcpEndpoint(host, here, port))
    return ops


def _multipath(node: str, dst: str, hops: list[tuple[str, str]], extra: str = "") -> Route:
    if len(hops) == 1:
        gw, dev = hops[0]
        spec = f"via {gw} dev {dev}"
    else:
        spec = " ".join(f"nexthop via {gw} dev {dev}" for gw, dev in hops)
    spec = f"{extra} {spec}".strip()
    return Route(node, dst, spec, tuple(dev for _, dev in hops))


def switch_ops(topo: Topology, sw: str) -> list[Op]:
    plane = topo.plane_of(sw)
    ops = sid_ops(topo, sw) if topo.srv6 == "seg6local" else bpf_sid_ops(topo, sw)
    up: list[tuple[str, str]] = []
    for dev, peer, _link in topo.ports(sw):
        gw = str(addr.link_local(topo, peer))
        ops.append(Route(sw, addr.node_prefix(topo, plane, peer), f"via {gw} dev {dev}", (dev,)))
        if topo.kind_of(peer) == "host":
            ops.append(
                Route(sw, f"{addr.baseline_address(topo, peer)}/128", f"via {gw} dev {dev}", (dev,))
            )
        elif topo.kind_of(peer) == "t0" and topo.kind_of(sw) == "t1":
            rack = topo.index_of(peer)
            for h in topo.hosts_in_rack(rack):
                ops.append(
                    Route(sw, addr.node_prefix(topo, plane, h), f"via {gw} dev {dev}", (dev,))
                )
                ops.append(
                    Route(
                        sw, f"{addr.baseline_address(topo, h)}/128", f"via {gw} dev {dev}", (dev,)
                    )
                )
        else:
            up.append((gw, dev))
    if up:  # a T0 reaches everything else of its plane through any T1 (ECMP, L4 hash)
        ops.append(_multipath(sw, addr.block_prefix(plane), up))
        ops.append(_multipath(sw, addr.baseline_prefix(), up))
    return ops


def sid_ops(topo: Topology, sw: str) -> list[Op]:
    """The switch's uN and classic End SIDs as seg6local routes. They live on the always-up
    SID veth, never on lo (kernel-facts: silently not forwarded)."""
    plane = topo.plane_of(sw)
    return [
        LinkUp(sw, SID_DEV),
        LinkUp(sw, SID_PEER),
        Route(
            sw,
            addr.node_prefix(topo, plane, sw),
            f"encap seg6local action {USID_BEHAVIOUR} dev {SID_DEV}",
            (SID_DEV,),
        ),
        Route(
            sw,
            f"{addr.classic_sid(topo, plane, sw)}/128",
            f"encap seg6local action End dev {SID_DEV}",
            (SID_DEV,),
        ),
    ]


def bpf_sid_ops(topo: Topology, sw: str) -> list[Op]:
    """The same SIDs for the BPF switch: its /48 (the classic SID is inside it) in the SID
    table, and the program on the ingress of every port. A blackhole route has no device,
    so no cut deletes it."""
    sid = addr.node_prefix(topo, topo.plane_of(sw), sw)
    ops: list[Op] = [Route(sw, f"blackhole {sid}", f"table {SID_TABLE}", ())]
    ops += [TcBpf(sw, dev, "ingress", SWITCH_PROGRAM) for dev, _peer, _link in topo.ports(sw)]
    return ops


def marking_ports(topo: Topology, sw: str) -> list[tuple[str, LinkClass]]:
    """Switch egress ports that mark CE: all but the last hop to a receiver (T0 -> host)."""
    return [
        (dev, topo.link_class(link))
        for dev, peer, link in topo.ports(sw)
        if topo.kind_of(peer) != "host"
    ]


def ecn_table(topo: Topology, sw: str) -> Nft | None:
    """nft CE marking (no red/fq_codel in this kernel: by probability or above a rate)."""
    rules = [
        _ecn_rule(dev, lc) for dev, lc in marking_ports(topo, sw) if lc.ecn not in ("none", "red")
    ]
    if not rules:
        return None
    body = "\n".join(f"    {r}" for r in rules)
    text = (
        f"table inet {NFT_TABLE} {{\n  chain mark_ce {{\n"
        f"    type filter hook postrouting priority 0; policy accept;\n{body}\n  }}\n}}\n"
    )
    return Nft(sw, f"inet {NFT_TABLE}", text)


def _ecn_rule(dev: str, lc: LinkClass) -> str:
    match = f'oifname "{dev}" ip6 ecn {{ ect0, ect1 }}'
    if lc.ecn == "probability":
        per_million = round(lc.ecn_probability * 1_000_000)
        return f"{match} numgen random mod 1000000 < {per_million} ip6 ecn set ce"
    kbytes = max(1, int(lc.rate_bps * lc.ecn_rate_fraction / 8 / 1000))
    return f"{match} limit rate over {kbytes} kbytes/second ip6 ecn set ce"


# -- rendering: what apply.py runs --------------------------------------------------------


def ip_line(lab: str, op: Op) -> str:
    """The ``ip -b`` line of an op (run with ``ip -n <ns> -b``)."""
    if isinstance(op, Veth):
        peer_ns = namespace(lab, op.peer_node)
        if op.peer_node == op.node:
            return f"link add {op.dev} type veth peer name {op.peer_dev}"
        return f"link add {op.dev} type veth peer name {op.peer_dev} netns {peer_ns}"
    if isinstance(op, LinkUp):
        parts = [f"link set dev {op.dev}"]
        if op.mtu is not None:
            parts.append(f"mtu {op.mtu}")
        if op.mac is not None:
            parts.append(f"address {op.mac}")
        return " ".join([*parts, "up"])
    if isinstance(op, Addr):
        return f"addr replace {op.cidr} dev {op.dev} nodad"
    if isinstance(op, Neigh):
        return f"neigh replace {op.ip} lladdr {op.lladdr} dev {op.dev} nud permanent"
    if isinstance(op, Route):
        return f"route replace {op.dst} {op.spec}"
    if isinstance(op, MptcpLimits):
        return f"mptcp limits set subflow {op.subflows} add_addr_accepted {op.add_addr_accepted}"
    if isinstance(op, MptcpEndpoint):
        return f"mptcp endpoint add {op.address} dev {op.dev} subflow"
    if isinstance(op, SourceRule):
        return f"rule add from {op.src} table {op.table} pref {op.pref}"
    raise TypeError(f"{type(op).__name__} is not an ip op")


def tc_lines(op: TcOp, pins: dict[str, str] | None = None) -> list[str]:
    """The ``tc -b`` lines of an op; ``pins`` maps a BPF program to where the lab pinned
    it (labs/bpf.py), "<program>" where not given. Every line is a replace: re-applying
    after a restore changes nothing that is already in place."""
    if isinstance(op, Qdisc):
        return [
            f"qdisc replace dev {op.dev} root tbf rate {op.rate_bps}bit "
            f"burst {op.burst} limit {op.limit}"
        ]
    if isinstance(op, PrioQdisc):
        return _htb_lines(op)
    pin = (pins or {}).get(op.program, op.program)
    return [
        f"qdisc replace dev {op.dev} clsact",
        f"filter replace dev {op.dev} {op.hook} pref 1 handle 1 bpf da object-pinned {pin}",
    ]


def _htb_lines(op: PrioQdisc) -> list[str]:
    """Strict priority from htb: the high class may use the whole rate on its own tokens,
    so it is always served first (htb serves classes within their rate before borrowers);
    the low class is guaranteed 1% and borrows the rest from the parent, which every send
    of either class is charged to, so together they keep the port's rate."""
    dev, rate = op.dev, op.rate_bps
    low = max(8000, rate // 100)
    shape = f"burst {op.burst} cburst {op.burst} quantum {op.mtu + 64}"
    high_id, low_id = f"1:{HTB_HIGH & 0xFFFF:x}", f"1:{HTB_LOW & 0xFFFF:x}"
    return [
        f"qdisc replace dev {dev} root handle 1: htb default {HTB_LOW & 0xFFFF:x}",
        f"class replace dev {dev} parent 1: classid 1:1 htb rate {rate}bit ceil {rate}bit {shape}",
        f"class replace dev {dev} parent 1:1 classid {high_id} htb rate {rate}bit "
        f"ceil {rate}bit {shape} prio 0",
        f"class replace dev {dev} parent 1:1 classid {low_id} htb rate {low}bit "
        f"ceil {rate}bit {shape} prio 1",
        f"qdisc replace dev {dev} parent {high_id} handle {HTB_HIGH & 0xFFFF:x}: "
        f"bfifo limit {op.limit}",
        f"qdisc replace dev {dev} parent {low_id} handle {HTB_LOW & 0xFFFF:x}: "
        f"bfifo limit {op.limit}",
    ]


def op_devs(op: Op) -> tuple[str, ...]:
    """Devices an op depends on (for a hard restore)."""
    if isinstance(op, Route):
        return op.devs
    if isinstance(op, LinkUp | Addr | Neigh | Qdisc | PrioQdisc | TcBpf):
        return (op.dev,)
    # A PortMap entry survives a cut (rewriting it would zero its counters), and so do the
    # MPTCP path manager's limits and endpoints (adding an endpoint again is refused) and
    # the rules (adding one again doubles it).
    return ()


def describe(op: Op) -> str:
    """Short human text of an op, for error messages."""
    if isinstance(op, Qdisc | PrioQdisc | TcBpf):
        return f"tc {'; '.join(tc_lines(op))}"
    if isinstance(op, PortMap):
        return f"bpf map entry of {op.dev} ({op.mac})"
    if isinstance(op, Nft):
        return f"nft table {op.table}"
    if isinstance(op, Sysctl):
        return f"sysctl {op.key}={op.value}"
    if isinstance(op, Netns):
        return "netns add"
    return f"ip {ip_line('LAB', op)}"
