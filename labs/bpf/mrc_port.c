// SPDX-License-Identifier: GPL-2.0
/* A switch port of the lab as MRC's switches run it: packet trimming and RED-style ECN
 * marking on a virtual queue, attached by `mrc lab up` to the tc egress (clsact,
 * direct-action) of the switch ports whose link class asks for it (docs/lab.md,
 * "Trimming and RED marking").
 *
 * The kernel has no trimming or AQM qdisc (kernel-facts.md), and a tc program cannot see
 * the tbf/htb backlog, so each port keeps a virtual queue that follows the port's rate:
 * every packet adds its bytes, and the time since the previous packet drains rate x dt.
 * Above trim_at an MRC data packet of a trimmable class (new data or a retransmission) is
 * cut to its headers, marked with the trimmed DSCP and sent to the high-priority htb class
 * (the paper's switches forward the stub at high priority so the receiver can NACK within
 * about one RTT), and a packet of the no-trim class is dropped; above limit every packet
 * is dropped. Marking uses the same queue (RED: probability rising linearly from mark_min
 * to mark_max). Counters live beside the queue in the port's map entry, read by
 * `mrc lab status --json`. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* The per-port record, keyed by the port's MAC address: a tc program gets no
 * per-attachment argument, ifindexes repeat across namespaces, and every lab port has its
 * own static MAC (labs/addressing.py). labs/trim.py packs the same fields in the same
 * order (a lab test reads them back by name through the object's BTF). */
#define PORT_TRIM 0x1       /* cut trimmable packets above trim_at */
#define PORT_MARK 0x2       /* RED-style CE marking between mark_min and mark_max */
#define PORT_FACES_HOST 0x4 /* the last hop to a receiver: trim_dscp is the last-hop class */

struct port_key {
	__u8 mac[6];
	__u8 pad[2];
};

struct port {
	struct bpf_spin_lock lock;
	__u32 flags;
	/* configuration, written once at attach time */
	__u64 rate;         /* the port's rate, bytes per second (its htb/tbf rate) */
	__u32 trim_at;      /* virtual queue bytes above which a trimmable packet is cut */
	__u32 limit;        /* virtual queue bytes above which every packet is dropped */
	__u32 mark_min;     /* RED: no mark below this queue depth (bytes) */
	__u32 mark_max;     /* RED: mark probability reaches mark_p here; every ECT above */
	__u32 mark_p;       /* RED: probability at mark_max, in units of 2^-32 */
	__u32 burst;        /* the port's bucket, bytes (its htb/tbf burst) */
	__u16 udp_port;     /* trimmable: the first UDP destination port of MRC's range */
	__u16 keep;         /* trimmable: L4 bytes kept in a stub (UDP + MRC headers) */
	__u16 opcodes;      /* trimmable: bit n set = MRC opcode n is data */
	__u8 version;       /* trimmable: MRC version byte */
	__u8 rtx_dscp;      /* DSCP of the retransmission class (counted apart when trimmed) */
	__u8 trim_dscp;     /* DSCP written into a stub made at this port */
	__u8 pad1;
	__u16 udp_ports;    /* trimmable: how many ports from udp_port on (one per server) */
	__u8 pad[4];
	__u32 prio_hi;      /* skb->priority (htb classid) of the high class, 0 = none */
	__u32 prio_lo;      /* skb->priority of every other packet */
	__u64 prio_dscps;   /* bit d set: DSCP d goes to the high class */
	__u64 trim_dscps;   /* bit d set: DSCP d is a trimmable class */
	__u64 no_trim_dscps; /* bit d set: DSCP d is dropped above trim_at instead */
	/* state */
	__u64 q_nb;         /* virtual queue, bytes x 1e9 (so the drain is exact) */
	__u64 tokens_nb;    /* the bucket's tokens, bytes x 1e9, at most burst */
	__u64 t_last;       /* bpf_ktime_get_ns() of the last packet */
	__u64 q_max;        /* deepest virtual queue seen, bytes */
	/* counters */
	__u64 passed;
	__u64 passed_bytes;
	__u64 trimmed;
	__u64 trimmed_bytes; /* payload bytes cut off */
	__u64 dropped;
	__u64 dropped_bytes;
	__u64 marked;
	__u64 trim_errors;   /* a helper failed while cutting: the packet was dropped */
	__u64 trimmed_rtx;   /* of trimmed: packets of the retransmission class */
	__u64 dropped_no_trim; /* of dropped: packets of the no-trim class above trim_at */
};


#define NS_PER_SEC 1000000000ULL
#define NEXTHDR_ROUTING 43
#define NEXTHDR_UDP 17
#define NEXTHDR_IPV6 41
#define CSUM_CHUNK 256
#define CSUM_CHUNKS 256      /* 256 x 256 bytes covers any IPv6 payload */
#define F_IPV6 (1ULL << 7)  /* BPF_F_IPV6 (6.16+): pseudo-header update of an IPv6 packet */
/* skb->mark of a stub sent back through this port's egress (see mrc_port below); a packet
 * from another namespace arrives with mark 0 (skb_scrub_packet), so nothing else has it. */
#define REQUEUED 0x6d727472 /* "mrtr" */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct port_key);
	__type(value, struct port);
} ports SEC(".maps");

enum verdict { PASS, TRIM, DROP };

/* What the parser found: l4 is the UDP header's offset (behind an SRH or an inner IPv6
 * header if there is one), inner the inner header's (0: none). */
struct pkt {
	__u32 l4;
	__u32 inner;
	__u32 ulen;
	__u8 dscp;
	__u8 ecn;
	__u8 trimmable;
	__u8 no_trim;
};

/* The MRC common header's first bytes, after the UDP header (docs/protocol.md). */
struct udp_mrc {
	struct udphdr udp;
	__u8 version;
	__u8 opcode;
};

static __always_inline int parse(struct __sk_buff *skb, const struct port *cfg, struct pkt *p)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct udp_mrc h;
	__u8 nexthdr, rh[2];

	if ((void *)(ip6 + 1) > end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return -1;
	p->dscp = (ip6->priority << 2) | (ip6->flow_lbl[0] >> 6);
	p->ecn = (ip6->flow_lbl[0] >> 4) & 3;
	/* a class, as a switch matches it: the DSCP alone */
	p->no_trim = (cfg->no_trim_dscps >> p->dscp) & 1;
	nexthdr = ip6->nexthdr;
	p->l4 = sizeof(*eth) + sizeof(*ip6);
	/* An SRH (RFC 8754) sits between IPv6 and UDP on classic SRv6 paths: skip it. */
	if (nexthdr == NEXTHDR_ROUTING) {
		if (bpf_skb_load_bytes(skb, p->l4, rh, sizeof(rh)) < 0)
			return 0;
		nexthdr = rh[0];
		p->l4 += 8 + 8 * (__u32)rh[1];
	}
	/* The encap encoding (RFC 2473): an inner IPv6 header between the NICs carries the UDP;
	 * this port marks and trims the outer header, which the switches route on. */
	if (nexthdr == NEXTHDR_IPV6) {
		if (bpf_skb_load_bytes(skb, p->l4 + offsetof(struct ipv6hdr, nexthdr), &nexthdr, 1) < 0)
			return 0;
		p->inner = p->l4;
		p->l4 += sizeof(struct ipv6hdr);
	}
	if (nexthdr != NEXTHDR_UDP || bpf_skb_load_bytes(skb, p->l4, &h, sizeof(h)) < 0)
		return 0;
	p->ulen = bpf_ntohs(h.udp.len);
	p->trimmable = ((cfg->trim_dscps >> p->dscp) & 1) &&
		       (__u16)(bpf_ntohs(h.udp.dest) - cfg->udp_port) < cfg->udp_ports &&
		       h.version == cfg->version && h.opcode < 16 &&
		       (cfg->opcodes >> h.opcode) & 1 && p->ulen > cfg->keep &&
		       p->l4 + p->ulen == skb->len && skb->gso_segs <= 1;
	return 0;
}

/* The port as a token bucket (what tbf and htb are): dt ns of rate first drain the queue,
 * then refill the bucket up to burst. Past (queue + burst) / rate all is drained and
 * full, and below it dt x rate cannot overflow. */
static __always_inline void drain(struct port *port, __u64 now)
{
	__u64 dt = now - port->t_last, burst_nb = (__u64)port->burst * NS_PER_SEC, c;

	port->t_last = now;
	if (dt >= (port->q_nb + burst_nb) / port->rate) {
		port->q_nb = 0;
		port->tokens_nb = burst_nb;
		return;
	}
	c = dt * port->rate;
	if (c <= port->q_nb) {
		port->q_nb -= c;
		return;
	}
	c -= port->q_nb;
	port->q_nb = 0;
	port->tokens_nb = port->tokens_nb + c < burst_nb ? port->tokens_nb + c : burst_nb;
}

/* A packet leaves at once on the bucket's tokens when nothing waits, else it queues. */
static __always_inline void enqueue(struct port *port, __u32 len)
{
	__u64 len_nb = (__u64)len * NS_PER_SEC;

	if (port->q_nb == 0 && port->tokens_nb >= len_nb)
		port->tokens_nb -= len_nb;
	else
		port->q_nb += len_nb;
}

/* RED (Floyd & Jacobson 1993) without the averaging: p rises linearly with the depth. */
static __always_inline int red_mark(const struct port *cfg, __u64 q, __u32 rnd)
{
	if (q < cfg->mark_min)
		return 0;
	if (q >= cfg->mark_max)
		return 1;
	return rnd < (__u64)cfg->mark_p * (q - cfg->mark_min) / (cfg->mark_max - cfg->mark_min);
}

/* Decide under the port's lock: drain, compare the backlog with the thresholds, enqueue. */
static __always_inline enum verdict admit(struct port *port, const struct pkt *p, __u32 len,
					  __u32 stub, __u64 now, __u32 rnd, int *mark)
{
	enum verdict v = PASS;
	__u64 q;

	bpf_spin_lock(&port->lock);
	drain(port, now);
	q = port->q_nb / NS_PER_SEC;
	if ((port->flags & PORT_TRIM) && (p->trimmable || p->no_trim) && q + len > port->trim_at)
		v = p->no_trim || q + stub > port->limit ? DROP : TRIM;
	else if (q + len > port->limit)
		v = DROP;
	if (v != DROP)
		enqueue(port, v == TRIM ? stub : len);
	*mark = v == PASS && (port->flags & PORT_MARK) && red_mark(port, q, rnd);
	q = port->q_nb / NS_PER_SEC;
	if (q > port->q_max)
		port->q_max = q;
	bpf_spin_unlock(&port->lock);
	return v;
}

/* n & (CSUM_CHUNK - 1), in a form the compiler cannot drop: the verifier needs the bound
 * on the register itself, and a branch that already implies n < CSUM_CHUNK does not
 * survive into the register clang passes to the helper. */
static __always_inline __u32 below_chunk(__u32 n)
{
	__u64 r = n;

	asm volatile("%[r] &= %[m]" : [r] "+r"(r) : [m] "i"(CSUM_CHUNK - 1));
	return r;
}

/* Ones' complement sum of bytes [from, to) as a bpf_csum_diff "removed" term. */
static __always_inline __s64 removed_sum(struct __sk_buff *skb, __u32 from, __u32 to)
{
	__u8 buf[CSUM_CHUNK];
	__s64 sum = 0;
	__u32 off = from, i;

	for (i = 0; i < CSUM_CHUNKS && off < to; i++, off += CSUM_CHUNK) {
		__u32 n = to - off, padded;

		if (n >= CSUM_CHUNK) {
			if (bpf_skb_load_bytes(skb, off, buf, CSUM_CHUNK) < 0)
				return -1;
			sum = bpf_csum_diff((__be32 *)buf, CSUM_CHUNK, 0, 0, (__wsum)sum);
		} else {
			/* the tail, zero-padded to a multiple of 4 (zeros add nothing) */
			__builtin_memset(buf, 0, sizeof(buf));
			n = below_chunk(n - 1) + 1; /* 1..CSUM_CHUNK for the verifier */
			if (bpf_skb_load_bytes(skb, off, buf, n) < 0)
				return -1;
			padded = below_chunk(n + 3) & ~3U;
			if (padded == 0)
				padded = CSUM_CHUNK;
			sum = bpf_csum_diff((__be32 *)buf, padded, 0, 0, (__wsum)sum);
		}
		if (sum < 0)
			return -1;
	}
	return off >= to ? sum : -1;
}

/* Cut to IPv6 [+ SRH or inner IPv6] + UDP + MRC headers; fix lengths (an inner header's
 * too) and the UDP checksum incrementally.
 * The checksum stays over whatever final destination the sender summed (RFC 8200 8.1):
 * only the cut bytes and the two length fields (UDP header, pseudo-header) change. */
static __always_inline int trim(struct __sk_buff *skb, const struct pkt *p, __u16 keep,
				__u8 dscp)
{
	__u32 stub = p->l4 + keep, csum_off = p->l4 + offsetof(struct udphdr, check);
	__be16 old_ulen = bpf_htons(p->ulen), new_ulen = bpf_htons(keep);
	__be16 plen = bpf_htons(stub - sizeof(struct ethhdr) - sizeof(struct ipv6hdr));
	__s64 cut = removed_sum(skb, stub, skb->len);
	__u8 tc[2];

	if (cut < 0 || bpf_skb_change_tail(skb, stub, 0) < 0)
		return -1;
	if (bpf_l4_csum_replace(skb, csum_off, 0, (__u32)cut, BPF_F_MARK_MANGLED_0) < 0 ||
	    bpf_l4_csum_replace(skb, csum_off, old_ulen, new_ulen, BPF_F_MARK_MANGLED_0 | 2) < 0 ||
	    bpf_l4_csum_replace(skb, csum_off, old_ulen, new_ulen,
				BPF_F_MARK_MANGLED_0 | BPF_F_PSEUDO_HDR | F_IPV6 | 2) < 0)
		return -1;
	if (p->inner && bpf_skb_store_bytes(skb, p->inner + offsetof(struct ipv6hdr, payload_len),
					    &new_ulen, 2, 0) < 0)
		return -1; /* the inner header carries only the UDP datagram */
	if (bpf_skb_store_bytes(skb, p->l4 + offsetof(struct udphdr, len), &new_ulen, 2, 0) < 0 ||
	    bpf_skb_store_bytes(skb, sizeof(struct ethhdr) + offsetof(struct ipv6hdr, payload_len),
				&plen, 2, 0) < 0 ||
	    bpf_skb_load_bytes(skb, sizeof(struct ethhdr), tc, 2) < 0)
		return -1;
	/* traffic class = DSCP (6 bits) << 2 | ECN, spread over the first two bytes */
	tc[0] = (tc[0] & 0xf0) | (dscp >> 2);
	tc[1] = (tc[1] & 0x3f) | ((dscp & 3) << 6);
	return bpf_skb_store_bytes(skb, sizeof(struct ethhdr), tc, 2, 0);
}

/* CE in the traffic class (RFC 3168 5); the IPv6 header has no checksum to fix. */
static __always_inline void mark_ce(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);

	if ((void *)(ip6 + 1) <= end)
		ip6->flow_lbl[0] |= 0x30;
}

static __always_inline void count(__u64 *pkts, __u64 *bytes, __u64 n)
{
	__sync_fetch_and_add(pkts, 1);
	if (bytes)
		__sync_fetch_and_add(bytes, n);
}

SEC("tc")
int mrc_port(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct port_key key = {};
	struct port *port;
	struct pkt p = {};
	__u32 len = skb->len, rnd = bpf_get_prandom_u32();
	int mark = 0;
	enum verdict v;

	if ((void *)(eth + 1) > end)
		return TC_ACT_OK;
	__builtin_memcpy(key.mac, eth->h_source, sizeof(key.mac));
	port = bpf_map_lookup_elem(&ports, &key);
	if (!port)
		return TC_ACT_OK; /* not a port of this lab: leave it alone */
	if (skb->mark == REQUEUED) { /* our own stub, back with its new length: enqueue it */
		skb->mark = 0;
		skb->priority = port->prio_hi;
		return TC_ACT_OK;
	}
	if (parse(skb, port, &p) < 0)
		return TC_ACT_OK;
	v = admit(port, &p, len, p.l4 + port->keep, bpf_ktime_get_ns(), rnd, &mark);
	if (v == DROP) {
		count(&port->dropped, &port->dropped_bytes, len);
		if (p.no_trim && (port->flags & PORT_TRIM))
			count(&port->dropped_no_trim, 0, 0);
		return TC_ACT_SHOT;
	}
	if (v == TRIM) {
		if (trim(skb, &p, port->keep, port->trim_dscp) < 0) {
			count(&port->trim_errors, 0, 0);
			count(&port->dropped, &port->dropped_bytes, len);
			return TC_ACT_SHOT;
		}
		count(&port->trimmed, &port->trimmed_bytes, len - skb->len);
		if (p.dscp == port->rtx_dscp)
			count(&port->trimmed_rtx, 0, 0);
		/* The qdisc took the packet's length before this hook ran (qdisc_pkt_len_init in
		 * __dev_queue_xmit), so a stub enqueued now would cost htb a full packet's time.
		 * Sent through this egress again, it is measured anew. */
		skb->mark = REQUEUED;
		return bpf_redirect(skb->ifindex, 0);
	}
	if (mark && (p.ecn == 1 || p.ecn == 2)) { /* ECT(1), ECT(0): RFC 3168 5 */
		mark_ce(skb);
		count(&port->marked, 0, 0);
	}
	count(&port->passed, &port->passed_bytes, len);
	if (port->prio_hi)
		skb->priority = (port->prio_dscps >> (p.dscp & 63)) & 1 ? port->prio_hi : port->prio_lo;
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
