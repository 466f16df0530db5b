// SPDX-License-Identifier: GPL-2.0
/* The SRv6 behaviour of a lab switch, as a tc-BPF program on the ingress of every switch
 * port, for kernels built without CONFIG_IPV6_SEG6_LWTUNNEL (no seg6local routes).
 *
 * It does what the kernel's seg6local routes would do (labs/plan.py, docs/lab.md):
 * - uN, "End with NEXT-C-SID" in the F3216 format (RFC 9800 4.1, the paper's uSIDs): the
 *   destination's first uSID (bits 32-47) is this switch's, so the uSIDs after it move up
 *   by 16 bits and the last 16 bits become zero;
 * - End (RFC 8986 4.1) when no uSID follows (bits 48-63 are 0) or when the destination is
 *   the switch's classic SID (bits 48-63 are 0xffff): Segments Left of the SRH goes down by
 *   one and the destination becomes that segment.
 * The packet then continues into the IPv6 stack, which routes it on the new destination
 * with the switch's static routes, as it would after seg6local.
 *
 * Which destinations are this switch's SIDs is the lab's SID table (routing table
 * MRC_SID_TABLE: one blackhole route per SID prefix), looked up with bpf_fib_lookup: the
 * program needs no per-switch configuration and `ip -6 route show table 109` shows it.
 * The UDP checksum is left alone: MRC computes it over the final destination (RFC 8200
 * 8.1), which the shift does not change.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MRC_SID_TABLE 109 /* labs/plan.py SID_TABLE */
#define AF_INET6 10 /* from linux/socket.h, which BPF programs cannot include */
#define NEXTHDR_ROUTING 43
#define SRH_TYPE 4
#define CLASSIC_END_MARK 0xffff

#define ETH_LEN sizeof(struct ethhdr)
#define DA_OFF (ETH_LEN + offsetof(struct ipv6hdr, daddr))
#define SRH_OFF (ETH_LEN + sizeof(struct ipv6hdr))

/* The SRH's fixed part (RFC 8754 2); segments follow, 16 bytes each. */
struct srh {
	__u8 nexthdr;
	__u8 hdrlen;
	__u8 type;
	__u8 segments_left;
	__u8 last_entry;
	__u8 flags;
	__u16 tag;
};

/* Whether the destination is one of this switch's SIDs (a route in the SID table). */
static __always_inline int is_local_sid(struct __sk_buff *skb, struct ipv6hdr *ip6)
{
	struct bpf_fib_lookup fib = {};

	fib.family = AF_INET6;
	fib.ifindex = skb->ingress_ifindex;
	fib.tbid = MRC_SID_TABLE;
	__builtin_memcpy(fib.ipv6_src, &ip6->saddr, sizeof(fib.ipv6_src));
	__builtin_memcpy(fib.ipv6_dst, &ip6->daddr, sizeof(fib.ipv6_dst));
	return bpf_fib_lookup(skb, &fib, sizeof(fib),
			      BPF_FIB_LOOKUP_DIRECT | BPF_FIB_LOOKUP_TBID) ==
	       BPF_FIB_LKUP_RET_BLACKHOLE;
}

/* uN: drop the first uSID, shift the rest up by 16 bits, zero-fill. */
static __always_inline int shift_usid(struct __sk_buff *skb, const __u8 *da)
{
	__u8 moved[12];

	__builtin_memcpy(moved, da + 6, 10);
	moved[10] = 0;
	moved[11] = 0;
	return bpf_skb_store_bytes(skb, DA_OFF + 4, moved, sizeof(moved), 0);
}

/* End: the next segment of the SRH right after the IPv6 header becomes the destination. */
static __always_inline int end(struct __sk_buff *skb, struct ipv6hdr *ip6)
{
	void *data_end = (void *)(long)skb->data_end;
	struct srh *srh = (void *)(ip6 + 1);
	struct in6_addr next;
	__u8 sl;

	if (ip6->nexthdr != NEXTHDR_ROUTING || (void *)(srh + 1) > data_end)
		return -1;
	sl = srh->segments_left;
	if (srh->type != SRH_TYPE || sl == 0 || sl - 1 > srh->last_entry)
		return -1;
	sl -= 1;
	if (bpf_skb_load_bytes(skb, SRH_OFF + sizeof(*srh) + 16 * (__u32)sl, &next,
			       sizeof(next)) < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, SRH_OFF + offsetof(struct srh, segments_left), &sl, 1,
				0) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, DA_OFF, &next, sizeof(next), 0);
}

SEC("tc")
int srv6_switch(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	__u8 da[16];
	__u16 next;

	if ((void *)(ip6 + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK;
	if (!is_local_sid(skb, ip6))
		return TC_ACT_OK;
	__builtin_memcpy(da, &ip6->daddr, sizeof(da));
	next = ((__u16)da[6] << 8) | da[7];
	if (next != 0 && next != CLASSIC_END_MARK)
		return shift_usid(skb, da) < 0 ? TC_ACT_SHOT : TC_ACT_OK;
	/* end() may move the packet's data (load/store helpers): no pointer is reused */
	return end(skb, ip6) < 0 ? TC_ACT_SHOT : TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
