/* MRC over SRv6 fast path: declarations shared by mrc_fast.c and the cffi cdef.
 *
 * csrc/build.py hands this file to cffi's cdef, so it holds only plain C declarations
 * (no includes, no macros with expressions, no preprocessor conditionals). Byte layouts are
 * in docs/protocol.md; mrc_transport/wire/codec.py is the reference this code must match
 * byte for byte (tests/unit/test_fastpath.py checks it).
 */

/* Error codes: every function returns >= 0 on success and one of these on failure. The
 * decoder's codes map one-to-one onto BadPacket reasons in mrc_transport/wire/fast.py. */
enum mrc_err {
    MRC_OK = 0,
    MRC_E_NOSPACE = -1,          /* encode: output buffer too small */
    MRC_E_ARG = -2,              /* encode: a field out of range */
    MRC_E_IPV6_TRUNCATED = -10,
    MRC_E_IPV6_VERSION = -11,
    MRC_E_IPV6_LENGTH = -12,
    MRC_E_NEXT_HEADER = -13,
    MRC_E_SRH_TRUNCATED = -20,
    MRC_E_SRH_TYPE = -21,
    MRC_E_SRH_LENGTH = -22,
    MRC_E_SRH_LAST_ENTRY = -23,
    MRC_E_SRH_SEGMENTS_LEFT = -24,
    MRC_E_SRH_NEXT_HEADER = -25,
    MRC_E_SRH_TLV = -26,
    MRC_E_UDP_TRUNCATED = -30,
    MRC_E_UDP_LENGTH = -31,
    MRC_E_UDP_CHECKSUM_ZERO = -32,
    MRC_E_UDP_CHECKSUM = -33,
    MRC_E_UDP_PORT = -34,
    MRC_E_MRC_TRUNCATED = -40,
    MRC_E_MRC_VERSION = -41,
    MRC_E_OPCODE = -42,
    MRC_E_BODY_TRUNCATED = -43,
    MRC_E_TRAILING = -44,
    MRC_E_MSG_BOUNDS = -45,
    MRC_E_FIRST_OFFSET = -46,
    MRC_E_LAST_END = -47,
    MRC_E_NACK_REASON = -48,
    MRC_E_FLAGS = -49,
    MRC_E_ACK_BITMAP = -50,
    MRC_E_PENALTY = -51,
    MRC_E_INNER_NEXT_HEADER = -60
};

/* Everything outside the MRC header, for transmit. segments points at n_segments * 16
 * bytes in path order (first hop first); n_segments == 0 means no SRH. encap: an inner
 * IPv6 header src -> final_dst follows the outer one (next header 41); not with segments. */
struct mrc_path {
    uint8_t src[16];
    uint8_t dst[16];
    uint8_t final_dst[16];   /* UDP checksum address (RFC 8200 8.1), already resolved */
    const char *segments;
    uint32_t n_segments;
    uint32_t ev;
    uint8_t dscp;
    uint8_t ecn;
    uint8_t hop_limit;
    uint16_t dport;
    uint8_t encap;
};

/* A prebuilt IPv6 [+ SRH or inner IPv6] + UDP header for one path, lengths and checksum left zero, and
 * the address the checksum covers. Built once per path, reused for every packet on it. */
struct mrc_template {
    uint8_t bytes[2096];     /* 40 + 8 + 16 * 128 + 8 */
    uint32_t len;            /* bytes used; the UDP header is the last 8 */
    uint8_t final_dst[16];
};

/* Every MRC header field; each opcode uses its own subset (docs/protocol.md). */
struct mrc_header {
    uint8_t opcode;
    uint8_t flags;
    uint32_t dst_conn;
    uint32_t src_conn;
    uint32_t psn;            /* data, NACK */
    uint32_t msn;
    uint32_t msg_offset;
    uint32_t msg_len;
    uint64_t ts;             /* every opcode but CLOSE */
    uint32_t cum_psn;
    uint32_t sack_base;
    uint64_t bitmap;
    uint32_t ev;             /* SACK, NACK, PROBE, PROBE_REPLY: reflected EV */
    uint16_t ooo_count;
    uint8_t rwnd_penalty;    /* SACK: 7 bits, 0-127 */
    uint32_t rwnd;           /* SACK, SETUP */
    uint64_t rcvd_bytes;     /* SACK: payload bytes the receiver took so far */
    uint32_t service_time;   /* SACK: ns the receiver held the trigger */
    uint64_t ports_down;     /* SACK: bit p set, the receiver's port of plane p is down */
    uint8_t reason;          /* NACK */
    uint32_t probe_id;
    uint32_t initial_psn;
    uint16_t mtu;
    uint16_t ev_count;
    uint32_t final_psn;
};

/* A parsed packet. Offsets index the caller's buffer, which must outlive the struct. */
struct mrc_decoded {
    uint8_t src[16];
    uint8_t dst[16];
    uint32_t seg_off;        /* first segment in WIRE order (segments[0] = last hop) */
    uint32_t n_segments;
    uint32_t ev;
    uint8_t dscp;
    uint8_t ecn;
    uint8_t hop_limit;
    uint16_t sport;
    uint16_t dport;
    uint32_t l4_off;         /* offset of the UDP header */
    uint8_t encap;           /* an inner IPv6 header at inner_off carries the UDP */
    uint32_t inner_off;
    struct mrc_header hdr;
    uint32_t payload_off;
    uint32_t payload_len;
};

/* RFC 1071 checksum of data (the one's complement of the one's complement sum, plus the
 * partial sum `initial`), as the integer read big-endian from the wire. */
uint16_t mrc_internet_checksum(const char *data, size_t len, uint32_t initial);

/* The UDP checksum field for the datagram udp[0:len] from src to dst (RFC 8200 8.1); the
 * field already in udp is ignored. A computed 0 is returned as 0xffff. */
uint16_t mrc_udp6_checksum(const uint8_t *src, const uint8_t *dst, const char *udp, size_t len);

/* Build the per-path template. Returns its length or a negative mrc_err. */
int mrc_template_build(struct mrc_template *t, const struct mrc_path *path);

/* Encode one complete packet into out[0:cap] from a template. Returns the packet length
 * or a negative mrc_err. */
int mrc_encode_tmpl(char *out, size_t cap, const struct mrc_template *t,
                    const struct mrc_header *hdr, const char *payload, size_t payload_len);

/* The data-packet special case with scalar arguments (no header struct to fill). */
int mrc_encode_data(char *out, size_t cap, const struct mrc_template *t,
                    uint8_t opcode, uint8_t flags, uint32_t dst_conn, uint32_t src_conn,
                    uint32_t psn, uint32_t msn, uint32_t msg_offset, uint32_t msg_len,
                    uint64_t ts, const char *payload, size_t payload_len);

/* The SACK/ACK special case with scalar arguments. */
int mrc_encode_sack(char *out, size_t cap, const struct mrc_template *t,
                    uint8_t opcode, uint8_t flags, uint32_t dst_conn, uint32_t src_conn,
                    uint32_t cum_psn, uint32_t sack_base, uint64_t bitmap, uint32_t ev,
                    uint64_t ts, uint16_t ooo_count, uint8_t rwnd_penalty, uint32_t rwnd,
                    uint64_t rcvd_bytes, uint32_t service_time, uint64_t ports_down);

/* Encode one complete packet from a path and header. */
int mrc_encode(char *out, size_t cap, const struct mrc_path *path,
               const struct mrc_header *hdr, const char *payload, size_t payload_len);

/* N data packets back to back into out[0:cap]: packet i from *templates[i], hdrs[i] and
 * payloads[poffs[i]:poffs[i+1]]. offsets (n + 1 entries) receives where each packet
 * starts and the total. Returns the total length or a negative mrc_err. */
int mrc_encode_data_batch(char *out, size_t cap, const struct mrc_template *const *templates,
                          const struct mrc_header *hdrs,
                          const char *payloads, const uint32_t *poffs, uint32_t n,
                          uint32_t *offsets);

/* Up to n data packets of one run (sender.py DataRun: consecutive packets of one message)
 * back to back into out[0:cap], each at most max_len bytes: packet i from *templates[i],
 * PSN psn + i, the payload at offset + i * seg of data[0:msg_len] (seg bytes, or what is
 * left of the message), its opcode from where that payload sits in the message, flags
 * `flags`, and `flags | last_flags` for packet n - 1. ends[i] receives base + where packet
 * i ends (base: where out sits in the caller's buffer). Returns k: n, or the index of the
 * first packet that could not be encoded (an offset beyond the message, too long, no
 * room), which the caller encodes alone to name the error. */
int mrc_encode_data_run(char *out, size_t cap, size_t max_len,
                        const struct mrc_template *const *templates, uint32_t n,
                        uint8_t flags, uint8_t last_flags, uint32_t dst_conn,
                        uint32_t src_conn, uint32_t psn, uint32_t msn, uint32_t offset,
                        uint32_t seg, const char *data, uint32_t msg_len, uint64_t ts,
                        uint32_t base, uint32_t *ends);

/* Templates by key (the caller's: batchio keys them by its EV objects' ids and keeps
 * those objects alive while they have an entry, so a key is never reused meanwhile). A
 * direct-mapped table: a new key evicts the one in its slot. */
#define MRC_TMPL_SLOTS 4096
struct mrc_tmpl_cache {
    uint64_t key[MRC_TMPL_SLOTS];
    const struct mrc_template *tmpl[MRC_TMPL_SLOTS];
};

/* Fill templates[i] for keys[i], i from `from` on, up to n; returns n, or the first i
 * whose key has no entry (the caller builds its template, puts it, and calls again). */
uint32_t mrc_tmpl_lookup(const struct mrc_tmpl_cache *cache, const uint64_t *keys,
                         uint32_t from, uint32_t n, const struct mrc_template **templates);

void mrc_tmpl_put(struct mrc_tmpl_cache *cache, uint64_t key,
                  const struct mrc_template *tmpl);

/* Parse buf[0:len] (untrusted). dport < 0 accepts any UDP destination port. Returns
 * MRC_OK or a negative mrc_err; never reads outside buf[0:len]. */
int mrc_decode(const char *buf, size_t len, int dport, struct mrc_decoded *out);

/* mrc_decode without the struct, for callers that parse the (validated) fields
 * themselves: returns the offset of the UDP header, or a negative mrc_err. */
int mrc_decode_l4(const char *buf, size_t len, int dport);

/* The MRC header and payload of a UDP payload the kernel delivered (IPv6, SRH and UDP
 * already checked by it), its IPv6 traffic class tclass (IPV6_TCLASS: a trimmed stub's
 * DSCP lifts the rule that a last segment ends at msg_len): the same MRC checks as
 * mrc_decode, in its order. Returns the offset of the data payload (12 + the body
 * length), or a negative mrc_err. */
int mrc_decode_mrc(const char *buf, size_t len, uint8_t tclass);

/* The inner packet of an encapsulated one as a raw IPPROTO_IPV6 socket delivers it
 * (inner IPv6 + UDP + MRC, untrusted): its IPv6 header and UDP checked as mrc_decode
 * checks them (UDP must follow; dport < 0 accepts any port). Returns the offset of the
 * MRC header (48) or a negative mrc_err. */
int mrc_decap(const char *buf, size_t len, int dport);

/* A destination for mrc_send_batch (converted to sockaddr_in6 in C). */
struct mrc_addr6 {
    uint8_t addr[16];
    uint16_t port;           /* host order; 0 for raw sockets */
    uint32_t flowinfo;
    uint32_t scope_id;
};

/* sendmmsg(2) of count packets buf[offsets[i]:offsets[i+1]], non-blocking. Packet i goes
 * to addrs[i] when n_addrs == count, to addrs[0] when n_addrs == 1, and to the socket's
 * connected or bound peer (UDP connect, AF_PACKET bind) when n_addrs == 0. Returns the
 * number sent (0 when the socket would block) or -errno. */
int mrc_send_batch(int fd, const char *buf, const uint32_t *offsets, uint32_t count,
                   const struct mrc_addr6 *addrs, uint32_t n_addrs, int flags);

/* recvmmsg(2) of up to count packets, non-blocking, slot i at buf[i * slot_size]. lens[i]
 * receives each length; truncated[i] is 1 when the packet was larger than its slot.
 * names (optional, count * name_size bytes) receives each source address, namelens their
 * lengths (sockaddr_in6 for UDP/raw, sockaddr_ll for AF_PACKET). Returns the number of
 * packets (0 when none is waiting) or -errno. */
int mrc_recv_batch(int fd, char *buf, size_t slot_size, uint32_t count, uint32_t *lens,
                   uint8_t *truncated, char *names, uint32_t name_size, uint32_t *namelens,
                   int flags);

/* ---- csrc/mrc_io.c: endpoint socket IO in bursts ---------------------------------- */

/* One received datagram and what the kernel told about its IPv6 header (44 bytes, no
 * padding: mrc_transport/wire/records.py reads an array of these with struct
 * "=IBBHI16s16s"). */
struct mrc_rx_meta {
    uint32_t len;            /* datagram length (bytes written to its slot) */
    uint8_t truncated;       /* 1 when the datagram was larger than its slot */
    uint8_t tclass;          /* IPV6_TCLASS: DSCP << 2 | ECN */
    uint16_t sport;          /* source port, host order */
    uint32_t flow_label;     /* IPV6_FLOWINFO: 20-bit flow label */
    uint8_t src[16];         /* source address */
    uint8_t dst[16];         /* IPV6_PKTINFO: destination as it arrived */
};

/* recvmmsg(2) of up to count datagrams, non-blocking, datagram i into buf[i * slot_size]
 * and its record into meta[i] (fields the cmsgs did not carry are 0). Returns the number
 * received (0 when none is waiting) or -errno. */
int mrc_recv_meta(int fd, char *buf, size_t slot_size, uint32_t count,
                  struct mrc_rx_meta *meta, int flags);

/* mrc_rx_meta.truncated: cut to its slot, or (mrc_decap_burst) a bad inner packet. */
#define MRC_RX_CUT 1
#define MRC_RX_BAD_INNER 2

/* Decapsulate the count datagrams of a burst mrc_recv_meta received from a raw
 * IPPROTO_IPV6 socket: each one whose inner packet mrc_decap accepts is moved to the
 * start of its slot as the UDP payload a UDP socket would have delivered, its meta's
 * source, destination and source port the inner packet's (the traffic class and flow
 * label stay the outer header's: the switches mark that one); any other is marked
 * MRC_RX_BAD_INNER. Returns count. */
int mrc_decap_burst(char *buf, size_t slot_size, struct mrc_rx_meta *meta, uint32_t count,
                    int dport);

/* One received datagram as the endpoint's receive loop reads it (112 bytes), the layout
 * mrc_transport/wire/records.py documents and reads with struct "=bxxxI16s11Q": kind,
 * dst_conn and source, then the body of its kind, its fields in the order the protocol
 * core takes them (Connection.receive_data, Connection.receive_sack). Every body field is
 * a uint64_t, so both bodies read as one Python struct. A data packet (MRC_RX_DATA) and a
 * SACK or ACK (MRC_RX_SACK) carry their fields; anything else (MRC_RX_OTHER: other
 * control packets, trimmed stubs, malformed or cut datagrams) only its kind, the rest zero, and the
 * endpoint decodes it one at a time, which names what is wrong. */
struct mrc_rx_data {
    uint64_t flags;
    uint64_t psn;
    uint64_t msn;
    uint64_t msg_offset;
    uint64_t msg_len;
    uint64_t ts;
    uint64_t payload_off;    /* the payload is buf[payload_off : payload_off + payload_len] */
    uint64_t payload_len;
    uint64_t ev;             /* source port << 16 | low 16 bits of the flow label */
    uint64_t ce;             /* 1 when the ECN field says Congestion Experienced */
    uint64_t unused;
};

struct mrc_rx_sack {
    uint64_t flags;
    uint64_t cum_psn;
    uint64_t sack_base;
    uint64_t bitmap;
    uint64_t ev;             /* the EV it reflects */
    uint64_t ts;
    uint64_t rwnd;
    uint64_t rcvd_bytes;
    uint64_t service_time;
    uint64_t ports_down;
    uint64_t penalty;
};

struct mrc_rx_rec {
    int8_t kind;
    uint8_t pad[3];
    uint32_t dst_conn;
    uint8_t src[16];
    union {
        struct mrc_rx_data data;
        struct mrc_rx_sack sack;
    } body;
};

#define MRC_RX_OTHER 0
#define MRC_RX_DATA 1
#define MRC_RX_SACK 2

/* The DSCPs of a data packet a switch trimmed to its headers (wire/frames.py
 * DSCP_TRIMMED, DSCP_TRIMMED_LASTHOP): its record is MRC_RX_OTHER, since the receiver
 * NACKs a stub rather than placing it. */
#define MRC_DSCP_TRIMMED 43
#define MRC_DSCP_TRIMMED_LASTHOP 47

/* Decode the count datagrams of one receive burst (datagram i at buf[i * slot_size], its
 * record meta[i], as mrc_recv_meta left them) into out[i], checked as mrc_decode_mrc
 * checks one. Returns count. */
int mrc_decode_rx_burst(const char *buf, size_t slot_size, const struct mrc_rx_meta *meta,
                        uint32_t count, struct mrc_rx_rec *out);

/* ------------------------------------------- the receiver's placement (csrc/mrc_rx.c) */

/* A message being reassembled: a slot of the receiver's table, by MSN mod its size. */
#define MRC_MSG_FREE 0
#define MRC_MSG_OPEN 1      /* segments missing */
#define MRC_MSG_DONE 2      /* complete, an earlier message is not */
#define MRC_MSG_DELIVERED 3 /* delivered in order: the core takes it out of the table */

#define MRC_RX_MAX_DELIVERED 64 /* messages one call may deliver, and open with spares */
#define MRC_RX_SPARES 8         /* recycled buffers the state keeps */

/* Why mrc_rx_place stopped (before the record it returns, but for MRC_RX_CE). */
#define MRC_RX_END 0          /* every record handled */
#define MRC_RX_OTHER_RECORD 1 /* not a data packet of this connection */
#define MRC_RX_NEW_MESSAGE 2  /* its message needs a buffer from the core */
#define MRC_RX_OUT_OF_WINDOW 3 /* its PSN is beyond the reorder window: the core NACKs */
#define MRC_RX_CE 4           /* the record before it came with CE: a SACK echoes it now */
#define MRC_RX_FULL 5         /* the list of delivered messages is full */

/* The receiving state of one connection, shared by the core and C, and the structs it
 * holds: declared once, in mrc_transport/protocol/rxstate.py, whose text this is. The
 * members from why to messages are what the calls did, which the core reads together
 * and zeroes (rxfast.py take); PSNs and MSNs are expanded to 64 bits, as the core keeps
 * them. */
/* BEGIN generated from mrc_transport/protocol/rxstate.py by `python csrc/build.py --header` */
struct mrc_rx_msg {
    int64_t msn; /* its MSN */
    char *buf; /* len bytes: the core's buffer for it */
    uint8_t *placed; /* one flag per segment */
    uint64_t len; /* its length, bytes */
    uint64_t missing; /* segments not placed yet */
    uint64_t state; /* MRC_MSG_FREE, _OPEN, _DONE or _DELIVERED */
};

struct mrc_rx_spare {
    char *buf; /* len bytes */
    uint8_t *placed; /* flags for its segments */
    uint64_t len; /* its length, bytes */
};

struct mrc_rx_state {
    uint64_t seg_size; /* the peer's segment size */
    uint64_t mss; /* the longest payload */
    uint64_t max_message; /* the longest message */
    uint64_t reorder_window; /* PSNs from cum on that are taken */
    uint64_t msn_window; /* MSNs from next_msn on that are taken */
    uint64_t sack_every_bytes; /* new bytes that make a SACK due */
    double ack_delay; /* longest a SACK waits otherwise, seconds */
    uint64_t ooo_mask; /* ooo has ooo_mask + 1 >= reorder_window entries */
    uint64_t msg_mask; /* msgs has msg_mask + 1 >= msn_window slots */
    uint8_t *ooo; /* 1: that PSN (mod the size) arrived above cum */
    struct mrc_rx_msg *msgs; /* the messages being placed, by MSN */
    int64_t cum; /* every PSN below it arrived */
    int64_t highest; /* the highest PSN that arrived */
    int64_t next_msn; /* the next message to deliver */
    uint64_t ooo_count; /* PSNs above cum that arrived */
    uint64_t since_sack; /* new bytes since the last SACK */
    uint64_t held; /* bytes delivered that the application holds */
    double ack_deadline; /* when a delayed SACK is due (inf: none) */
    uint64_t trig_ev; /* the EV of the latest data packet (SACK's trigger) */
    uint64_t trig_ts; /* its timestamp */
    uint64_t trig_has_ts; /* 1 if it carried one */
    double trig_at; /* when it arrived (the core's clock): the SACK's service time */
    uint64_t why; /* why the latest call stopped: MRC_RX_END ... */
    uint64_t sacks; /* data packets that made a SACK due (not those with CE) */
    uint64_t n_delivered; /* messages delivered, their slots in delivered */
    uint64_t n_opened; /* messages opened with spares, their slots in opened */
    uint64_t packets; /* data packets taken (placed, duplicate or dropped) */
    uint64_t data; /* data packets placed */
    uint64_t bytes; /* payload bytes placed */
    uint64_t ce; /* data packets placed that came with CE */
    uint64_t dup_packets; /* data packets whose PSN had arrived */
    uint64_t inconsistent_header; /* lengths that contradict a limit or the message */
    uint64_t bad_segment; /* payloads off the message's segment grid */
    uint64_t msn_out_of_window; /* messages outside the window or delivered */
    uint64_t dup_segment; /* a new PSN for a segment placed already */
    uint64_t messages; /* messages delivered */
    uint32_t delivered[MRC_RX_MAX_DELIVERED]; /* slots of the messages delivered */
    uint32_t opened[MRC_RX_MAX_DELIVERED]; /* slots of messages opened with spares */
    uint64_t n_spares; /* spares on the stack */
    struct mrc_rx_spare spares[MRC_RX_SPARES]; /* the stack, its top last */
};
/* END generated */

/* Put a recycled buffer (len bytes at buf, flags for its segments at placed) on top of
 * the spares; 0 when they are full. */
int mrc_rx_push_spare(struct mrc_rx_state *st, char *buf, uint8_t *placed, uint64_t len);

/* Put message msn (len bytes at buf, segs segments, their flags at placed, zeroed
 * here) in table slot `slot`. */
void mrc_rx_open(struct mrc_rx_state *st, uint64_t slot, int64_t msn, char *buf, uint64_t len,
                 uint8_t *placed, uint64_t segs);

/* Receiver.on_data of data records recs[from:to] of connection conn (as
 * mrc_decode_rx_burst made them; payloads in buf), in order, at time now, for the records
 * it can take whole: placement, duplicates, the cumulative PSN and out-of-order set,
 * messages delivered in MSN order (listed in delivered), counts, the trigger, the SACK
 * decision. Returns the index of the first record not handled, st->why saying why. */
int mrc_rx_place(struct mrc_rx_state *st, const char *buf, const struct mrc_rx_rec *recs,
                 uint32_t from, uint32_t to, uint32_t conn, double now);

/* sendmmsg(2) of count complete IPv6 packets buf[offsets[i]:offsets[i+1]] of buf[0:len]
 * through an IPPROTO_RAW socket, non-blocking, each to its own header's destination
 * address. Returns the number sent (0 when the socket would block) or -errno (-EINVAL,
 * before sending anything, when the offsets decrease, end beyond len or leave a packet
 * shorter than an IPv6 header). */
int mrc_send_raw6(int fd, const char *buf, size_t len, const uint32_t *offsets,
                  uint32_t count, int flags);
