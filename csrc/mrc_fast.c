/* MRC over SRv6 fast path: checksums, encode, untrusted decode, batched socket IO.
 *
 * The byte layout is docs/protocol.md; the pure-Python reference codec
 * (mrc_transport/wire/codec.py) is the specification this file must match byte for byte,
 * and tests/unit/test_fastpath.py checks both against each other with hypothesis.
 * The decoder reads untrusted bytes: every read goes through a cursor whose bounds are
 * checked first (the CHECK_READ_BOUNDS style of aioquic's _buffer.c), so no input can make
 * it read outside buf[0:len].
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "mrc_fast.h"

enum {
    IPV6_LEN = 40,
    UDP_LEN = 8,
    SRH_FIXED_LEN = 8,
    SEG_LEN = 16,
    MAX_SEGMENTS = 127,        /* hdr_ext_len is 8 bits of 8-octet units: 255 * 8 / 16 */
    NH_ROUTING = 43,
    NH_UDP = 17,
    NH_IPV6 = 41,              /* IPv6-in-IPv6 (RFC 2473) */
    SRH_TYPE = 4,              /* RFC 8754 section 2 */
    MRC_VERSION = 1,
    COMMON_LEN = 12,
    OP_WRITE_FIRST = 0x00,
    OP_WRITE_MIDDLE = 0x01,
    OP_WRITE_LAST = 0x02,
    OP_WRITE_ONLY = 0x03,
    OP_ACK = 0x04,
    OP_SACK = 0x05,
    OP_NACK = 0x06,
    OP_PROBE = 0x07,
    OP_PROBE_REPLY = 0x08,
    OP_SETUP = 0x09,
    OP_SETUP_ACK = 0x0A,
    OP_CLOSE = 0x0B,
    OP_CLOSE_ACK = 0x0C,
    NACK_REASON_MIN = 1,
    NACK_REASON_MAX = 6,
    KNOWN_FLAGS = 0x1F,        /* RTX | TS | ECN_ECHO | ACK_REQ | RESTORE_WINDOW */
    MAX_PENALTY = 127,         /* the SACK's window penalty: 7 bits (UEC) */
    BATCH_CHUNK = 64,          /* mmsghdr entries per sendmmsg/recvmmsg call */
};

/* ---------------------------------------------------------------- checksums (RFC 1071) */

/* One's complement sum of 32 bytes at a time as four 64-bit native words, counting each
 * word's carry out separately (2**64 = 1 mod 0xffff, so a lost carry is worth 1), and if
 * `copy`, a copy of them to d: a payload is read once for both (copy_sum). Returns a
 * value < 2**40 congruent to the sum mod 0xffff, non-zero iff any input was non-zero.
 * Always inlined with a constant `copy`, so neither caller tests it per block. */
static inline __attribute__((always_inline)) uint64_t
sum_blocks_into(uint8_t *d, const uint8_t *p, size_t blocks, uint64_t sum, int copy)
{
    /* Four independent accumulators, so the adds of one block do not wait on each other. */
    uint64_t s0 = sum, s1 = 0, s2 = 0, s3 = 0, carry = 0, w0, w1, w2, w3;
    for (size_t b = 0; b < blocks; b++, p += 32) {
        memcpy(&w0, p, 8);
        memcpy(&w1, p + 8, 8);
        memcpy(&w2, p + 16, 8);
        memcpy(&w3, p + 24, 8);
        if (copy) {
            memcpy(d, &w0, 8);
            memcpy(d + 8, &w1, 8);
            memcpy(d + 16, &w2, 8);
            memcpy(d + 24, &w3, 8);
            d += 32;
        }
        s0 += w0;
        carry += s0 < w0;
        s1 += w1;
        carry += s1 < w1;
        s2 += w2;
        carry += s2 < w2;
        s3 += w3;
        carry += s3 < w3;
    }
    return carry + (s0 & 0xffffffff) + (s0 >> 32) + (s1 & 0xffffffff) + (s1 >> 32) +
           (s2 & 0xffffffff) + (s2 >> 32) + (s3 & 0xffffffff) + (s3 >> 32);
}

static uint64_t sum_blocks(const uint8_t *p, size_t blocks, uint64_t sum)
{
    return sum_blocks_into(NULL, p, blocks, sum, 0);
}

/* Sum native-order words (RFC 1071 section 2(B): the folded result is independent of byte
 * order up to a swap): 64-bit words in blocks, then 32-bit words into the 64-bit total. */
static uint64_t sum_native(const uint8_t *p, size_t len, uint64_t sum)
{
    uint32_t a;
    if (len >= 32) {
        sum = sum_blocks(p, len / 32, sum);
        p += len & ~(size_t)31;
        len &= 31;
    }
    while (len >= 4) {
        memcpy(&a, p, 4);
        sum += a;
        p += 4;
        len -= 4;
    }
    if (len >= 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        sum += w;
        p += 2;
        len -= 2;
    }
    if (len) {
        /* RFC 1071: an odd last byte is the high byte of a word padded with zero */
        uint8_t tail[2] = {p[0], 0};
        uint16_t w;
        memcpy(&w, tail, 2);
        sum += w;
    }
    return sum;
}

/* Copy len bytes from p to d and return their sum as sum_native would: one pass over the
 * source instead of a copy and then a sum over the copy (a 9 KB payload from a large
 * message: 0.57 against 0.82 us here, the source's read being what costs). */
static uint64_t copy_sum(uint8_t *d, const uint8_t *p, size_t len)
{
    size_t head = len & ~(size_t)31;
    uint64_t sum = sum_blocks_into(d, p, head / 32, 0, 1);
    memcpy(d + head, p + head, len & 31);
    return sum_native(d + head, len & 31, sum);
}

/* End-around-carry fold to 16 bits, returned in network (big-endian value) terms.
 * A non-zero sum never folds to 0, so 0xffff stands for one's complement negative zero. */
static uint16_t fold(uint64_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return ntohs((uint16_t)sum);
}

/* `initial` is a big-endian-value partial sum; fold it and convert to native order. */
static uint64_t native_initial(uint32_t initial)
{
    uint64_t s = initial;
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return htons((uint16_t)s);
}

uint16_t mrc_internet_checksum(const char *data, size_t len, uint32_t initial)
{
    uint64_t sum = sum_native((const uint8_t *)data, len, native_initial(initial));
    return (uint16_t)(0xffff - fold(sum));
}

/* sum plus the one's complement sum of the pseudo-header (RFC 8200 section 8.1) of a UDP
 * datagram of len bytes from src to dst. */
static uint64_t pseudo_sum(const uint8_t *src, const uint8_t *dst, size_t len, uint64_t sum)
{
    uint8_t tail[8] = {0, 0, 0, 0, 0, 0, 0, NH_UDP};
    uint32_t len_be = htonl((uint32_t)len);
    memcpy(tail, &len_be, 4);
    sum = sum_native(src, 16, sum);
    sum = sum_native(dst, 16, sum);
    return sum_native(tail, 8, sum);
}

/* One's complement sum of the pseudo-header and the datagram, with the checksum field
 * counted as it is in udp. */
static uint16_t udp6_sum(const uint8_t *src, const uint8_t *dst, const uint8_t *udp, size_t len)
{
    return fold(sum_native(udp, len, pseudo_sum(src, dst, len, 0)));
}

/* The checksum field value of a datagram whose sum (the field counted as 0) is sum; a
 * computed 0 goes out as 0xffff (RFC 768, RFC 8200 8.1). */
static uint16_t udp6_field(uint64_t sum)
{
    uint16_t c = (uint16_t)(0xffff - fold(sum));
    return c ? c : 0xffff;
}

uint16_t mrc_udp6_checksum(const uint8_t *src, const uint8_t *dst, const char *udp, size_t len)
{
    const uint8_t *u = (const uint8_t *)udp;
    uint64_t sum = pseudo_sum(src, dst, len, 0);
    if (len < UDP_LEN)
        return udp6_field(sum_native(u, len, sum));
    /* Ignore the field already present: subtract it by summing a copy of the header. */
    uint8_t head[UDP_LEN];
    memcpy(head, u, UDP_LEN);
    head[6] = head[7] = 0;
    sum = sum_native(head, UDP_LEN, sum);
    return udp6_field(sum_native(u + UDP_LEN, len - UDP_LEN, sum));
}

/* ---------------------------------------------------------------- big-endian writers */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { uint32_t be = htonl(v); memcpy(p, &be, 4); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)(v >> 32)); put32(p + 4, (uint32_t)v); }

static uint16_t get16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static uint32_t get32(const uint8_t *p) { uint32_t be; memcpy(&be, p, 4); return ntohl(be); }
static uint64_t get64(const uint8_t *p) { return ((uint64_t)get32(p) << 32) | get32(p + 4); }

/* ---------------------------------------------------------------- encode */

int mrc_template_build(struct mrc_template *t, const struct mrc_path *path)
{
    uint32_t n = path->n_segments;
    if (n > MAX_SEGMENTS || path->dscp > 63 || path->ecn > 3)
        return MRC_E_ARG;
    uint8_t *b = t->bytes;
    uint8_t tc = (uint8_t)(path->dscp << 2 | path->ecn);
    uint32_t flow = path->ev & 0xfffff;
    /* version 6 | traffic class | flow label (RFC 8200 section 3) */
    put32(b, (uint32_t)6 << 28 | (uint32_t)tc << 20 | flow);
    put16(b + 4, 0);                      /* payload length: set per packet */
    b[6] = n ? NH_ROUTING : NH_UDP;
    b[7] = path->hop_limit;
    memcpy(b + 8, path->src, 16);
    memcpy(b + 24, path->dst, 16);
    size_t off = IPV6_LEN;
    if (path->encap) {
        if (n)
            return MRC_E_ARG;
        /* the inner header: the same first word, the NICs' own addresses (finish sets its
         * payload length) */
        memcpy(b + off, b, 8);
        b[6] = NH_IPV6;
        memcpy(b + off + 8, path->src, 16);
        memcpy(b + off + 24, path->final_dst, 16);
        off += IPV6_LEN;
    }
    if (n) {
        /* RFC 8754 section 2: segments stored reversed, Segment List[0] = last segment */
        b[off] = NH_UDP;
        b[off + 1] = (uint8_t)(2 * n);    /* hdr_ext_len in 8-octet units beyond the first */
        b[off + 2] = SRH_TYPE;
        b[off + 3] = (uint8_t)(n - 1);    /* segments_left */
        b[off + 4] = (uint8_t)(n - 1);    /* last_entry */
        b[off + 5] = 0;                   /* flags */
        put16(b + off + 6, 0);            /* tag */
        off += SRH_FIXED_LEN;
        for (uint32_t i = 0; i < n; i++)
            memcpy(b + off + SEG_LEN * i, path->segments + SEG_LEN * (n - 1 - i), SEG_LEN);
        off += SEG_LEN * n;
    }
    put16(b + off, (uint16_t)(path->ev >> 16));   /* source port: the EV's high 16 bits */
    put16(b + off + 2, path->dport);
    put32(b + off + 4, 0);                        /* length and checksum: set per packet */
    t->len = (uint32_t)(off + UDP_LEN);
    memcpy(t->final_dst, path->final_dst, 16);
    return (int)t->len;
}

static size_t body_len(uint8_t opcode)
{
    switch (opcode) {
    case OP_WRITE_FIRST: case OP_WRITE_MIDDLE: case OP_WRITE_LAST: case OP_WRITE_ONLY:
        return 24;
    case OP_ACK: case OP_SACK:
        return 56;
    case OP_NACK: case OP_SETUP: case OP_SETUP_ACK:
        return 20;
    case OP_PROBE: case OP_PROBE_REPLY:
        return 16;
    case OP_CLOSE: case OP_CLOSE_ACK:
        return 4;
    default:
        return 0;
    }
}

static int is_data(uint8_t opcode) { return opcode <= OP_WRITE_ONLY; }

/* Write the MRC header for hdr at p (body_len(opcode) + 12 bytes). */
static void put_header(uint8_t *p, const struct mrc_header *h)
{
    p[0] = MRC_VERSION;
    p[1] = h->opcode;
    p[2] = h->flags;
    p[3] = 0;
    put32(p + 4, h->dst_conn);
    put32(p + 8, h->src_conn);
    uint8_t *q = p + COMMON_LEN;
    switch (h->opcode) {
    case OP_WRITE_FIRST: case OP_WRITE_MIDDLE: case OP_WRITE_LAST: case OP_WRITE_ONLY:
        put32(q, h->psn);
        put32(q + 4, h->msn);
        put32(q + 8, h->msg_offset);
        put32(q + 12, h->msg_len);
        put64(q + 16, h->ts);
        break;
    case OP_ACK: case OP_SACK:
        put32(q, h->cum_psn);
        put32(q + 4, h->sack_base);
        put64(q + 8, h->bitmap);
        put32(q + 16, h->ev);
        put64(q + 20, h->ts);
        put16(q + 28, h->ooo_count);
        q[30] = h->rwnd_penalty;
        q[31] = 0;
        put32(q + 32, h->rwnd);
        put64(q + 36, h->rcvd_bytes);
        put32(q + 44, h->service_time);
        put64(q + 48, h->ports_down);
        break;
    case OP_NACK:
        put32(q, h->psn);
        q[4] = h->reason;
        q[5] = q[6] = q[7] = 0;
        put32(q + 8, h->ev);
        put64(q + 12, h->ts);
        break;
    case OP_PROBE: case OP_PROBE_REPLY:
        put32(q, h->probe_id);
        put32(q + 4, h->ev);
        put64(q + 8, h->ts);
        break;
    case OP_SETUP: case OP_SETUP_ACK:
        put32(q, h->initial_psn);
        put32(q + 4, h->rwnd);
        put16(q + 8, h->mtu);
        put16(q + 10, h->ev_count);
        put64(q + 12, h->ts);
        break;
    default: /* OP_CLOSE, OP_CLOSE_ACK */
        put32(q, h->final_psn);
        break;
    }
}

/* Fill the IPv6 payload length, UDP length and UDP checksum of a packet of total bytes
 * whose last tail_len bytes sum to tail_sum (copy_sum) and are left out of the sum here;
 * the UDP header and what precedes the tail must be an even number of bytes. */
static void finish(uint8_t *pkt, size_t total, size_t l4_off, const uint8_t *final_dst,
                   size_t tail_len, uint64_t tail_sum)
{
    put16(pkt + 4, (uint16_t)(total - IPV6_LEN));
    if (pkt[6] == NH_IPV6)                /* encapsulated: the inner header's too */
        put16(pkt + IPV6_LEN + 4, (uint16_t)(total - 2 * IPV6_LEN));
    uint8_t *udp = pkt + l4_off;
    size_t len = total - l4_off;
    put16(udp + 4, (uint16_t)len);
    put16(udp + 6, 0);
    uint64_t sum = pseudo_sum(pkt + 8, final_dst, len, tail_sum);
    put16(udp + 6, udp6_field(sum_native(udp, len - tail_len, sum)));
}

int mrc_encode_tmpl(char *out, size_t cap, const struct mrc_template *t,
                    const struct mrc_header *hdr, const char *payload, size_t payload_len)
{
    if (hdr->opcode > OP_CLOSE_ACK || (payload_len && !is_data(hdr->opcode)))
        return MRC_E_ARG;
    if ((hdr->opcode == OP_ACK || hdr->opcode == OP_SACK) && hdr->rwnd_penalty > MAX_PENALTY)
        return MRC_E_ARG;                 /* a 7-bit field */
    size_t hlen = COMMON_LEN + body_len(hdr->opcode);
    size_t total = t->len + hlen + payload_len;
    if (total - IPV6_LEN > 0xffff)
        return MRC_E_ARG;                 /* no jumbograms (RFC 2675) */
    if (total > cap)
        return MRC_E_NOSPACE;
    uint8_t *o = (uint8_t *)out;
    memcpy(o, t->bytes, t->len);
    put_header(o + t->len, hdr);
    /* every header length is even (body_len), so the payload's words are the datagram's */
    uint64_t payload_sum =
        payload_len ? copy_sum(o + t->len + hlen, (const uint8_t *)payload, payload_len) : 0;
    finish(o, total, t->len - UDP_LEN, t->final_dst, payload_len, payload_sum);
    return (int)total;
}

int mrc_encode_data(char *out, size_t cap, const struct mrc_template *t,
                    uint8_t opcode, uint8_t flags, uint32_t dst_conn, uint32_t src_conn,
                    uint32_t psn, uint32_t msn, uint32_t msg_offset, uint32_t msg_len,
                    uint64_t ts, const char *payload, size_t payload_len)
{
    if (!is_data(opcode))
        return MRC_E_ARG;
    struct mrc_header h = {
        .opcode = opcode, .flags = flags, .dst_conn = dst_conn, .src_conn = src_conn,
        .psn = psn, .msn = msn, .msg_offset = msg_offset, .msg_len = msg_len, .ts = ts,
    };
    return mrc_encode_tmpl(out, cap, t, &h, payload, payload_len);
}

int mrc_encode_sack(char *out, size_t cap, const struct mrc_template *t,
                    uint8_t opcode, uint8_t flags, uint32_t dst_conn, uint32_t src_conn,
                    uint32_t cum_psn, uint32_t sack_base, uint64_t bitmap, uint32_t ev,
                    uint64_t ts, uint16_t ooo_count, uint8_t rwnd_penalty, uint32_t rwnd,
                    uint64_t rcvd_bytes, uint32_t service_time, uint64_t ports_down)
{
    if (opcode != OP_ACK && opcode != OP_SACK)
        return MRC_E_ARG;
    struct mrc_header h = {
        .opcode = opcode, .flags = flags, .dst_conn = dst_conn, .src_conn = src_conn,
        .cum_psn = cum_psn, .sack_base = sack_base, .bitmap = bitmap, .ev = ev, .ts = ts,
        .ooo_count = ooo_count, .rwnd_penalty = rwnd_penalty, .rwnd = rwnd,
        .rcvd_bytes = rcvd_bytes, .service_time = service_time, .ports_down = ports_down,
    };
    return mrc_encode_tmpl(out, cap, t, &h, NULL, 0);
}

int mrc_encode(char *out, size_t cap, const struct mrc_path *path,
               const struct mrc_header *hdr, const char *payload, size_t payload_len)
{
    struct mrc_template t;
    int rc = mrc_template_build(&t, path);
    if (rc < 0)
        return rc;
    return mrc_encode_tmpl(out, cap, &t, hdr, payload, payload_len);
}

int mrc_encode_data_batch(char *out, size_t cap, const struct mrc_template *const *templates,
                          const struct mrc_header *hdrs,
                          const char *payloads, const uint32_t *poffs, uint32_t n,
                          uint32_t *offsets)
{
    size_t pos = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!is_data(hdrs[i].opcode) || poffs[i + 1] < poffs[i])
            return MRC_E_ARG;
        offsets[i] = (uint32_t)pos;
        int rc = mrc_encode_tmpl(out + pos, cap - pos, templates[i], &hdrs[i],
                                 payloads + poffs[i], poffs[i + 1] - poffs[i]);
        if (rc < 0)
            return rc;
        pos += (size_t)rc;
    }
    offsets[n] = (uint32_t)pos;
    return (int)pos;
}

int mrc_encode_data_run(char *out, size_t cap, size_t max_len,
                        const struct mrc_template *const *templates, uint32_t n,
                        uint8_t flags, uint8_t last_flags, uint32_t dst_conn,
                        uint32_t src_conn, uint32_t psn, uint32_t msn, uint32_t offset,
                        uint32_t seg, const char *data, uint32_t msg_len, uint64_t ts,
                        uint32_t base, uint32_t *ends)
{
    struct mrc_header h = {.dst_conn = dst_conn, .src_conn = src_conn, .msn = msn,
                           .msg_len = msg_len, .ts = ts};
    size_t pos = 0;
    uint32_t i = 0;
    for (; i < n; i++) {
        uint64_t off = (uint64_t)offset + (uint64_t)i * seg;
        if (off > msg_len || (off == msg_len && msg_len != 0))
            break;
        uint32_t len = msg_len - off < seg ? (uint32_t)(msg_len - off) : seg;
        int first = off == 0, last = off + len >= msg_len;
        h.opcode = first ? (last ? OP_WRITE_ONLY : OP_WRITE_FIRST)
                         : (last ? OP_WRITE_LAST : OP_WRITE_MIDDLE);
        h.flags = i == n - 1 ? (uint8_t)(flags | last_flags) : flags;
        h.psn = psn + i;  /* uint32_t: wraps as the 32-bit PSN does */
        h.msg_offset = (uint32_t)off;
        size_t room = cap - pos < max_len ? cap - pos : max_len;
        int rc = mrc_encode_tmpl(out + pos, room, templates[i], &h, data + off, len);
        if (rc < 0)
            break;
        pos += (size_t)rc;
        ends[i] = base + (uint32_t)pos;
    }
    return (int)i;
}

/* Fibonacci hashing: EV objects' ids are 16-byte aligned addresses, whose low bits are
 * all the same; the multiply spreads the high ones over the slot index. */
static uint32_t tmpl_slot(uint64_t key)
{
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 52) & (MRC_TMPL_SLOTS - 1);
}

uint32_t mrc_tmpl_lookup(const struct mrc_tmpl_cache *cache, const uint64_t *keys,
                         uint32_t from, uint32_t n, const struct mrc_template **templates)
{
    for (uint32_t i = from; i < n; i++) {
        uint32_t slot = tmpl_slot(keys[i]);
        if (cache->key[slot] != keys[i] || cache->tmpl[slot] == NULL)
            return i;
        templates[i] = cache->tmpl[slot];
    }
    return n;
}

void mrc_tmpl_put(struct mrc_tmpl_cache *cache, uint64_t key,
                  const struct mrc_template *tmpl)
{
    uint32_t slot = tmpl_slot(key);
    cache->key[slot] = key;
    cache->tmpl[slot] = tmpl;
}

/* ---------------------------------------------------------------- untrusted decode */

/* A read cursor over buf[0:end]; NEED() returns err unless n more bytes are there. */
struct cursor {
    const uint8_t *base;
    size_t pos;
    size_t end;
};

#define NEED(c, n, err)                                                    \
    do {                                                                   \
        if ((c)->end - (c)->pos < (size_t)(n))                             \
            return (err);                                                  \
    } while (0)

#define CHECK(cond, err)                                                   \
    do {                                                                   \
        if (!(cond))                                                       \
            return (err);                                                  \
    } while (0)

/* The IPv6 header at the cursor: version 6, its payload the rest of the packet. */
static int check_ipv6(const struct cursor *c)
{
    NEED(c, IPV6_LEN, MRC_E_IPV6_TRUNCATED);
    const uint8_t *p = c->base + c->pos;
    CHECK(get32(p) >> 28 == 6, MRC_E_IPV6_VERSION);
    size_t ip_len = get16(p + 4), left = c->end - c->pos - IPV6_LEN;
    CHECK(ip_len <= left, MRC_E_IPV6_TRUNCATED);   /* cut in transit */
    CHECK(ip_len == left, MRC_E_IPV6_LENGTH);      /* trailing bytes */
    return MRC_OK;
}

static int decode_ipv6(struct cursor *c, struct mrc_decoded *d, uint8_t *nh)
{
    int rc = check_ipv6(c);
    if (rc != MRC_OK)
        return rc;
    const uint8_t *p = c->base + c->pos;
    uint32_t word = get32(p);
    uint8_t tc = (uint8_t)(word >> 20);
    d->dscp = tc >> 2;
    d->ecn = tc & 3;
    d->ev = word & 0xffff;                /* flow label's low 16 bits; sport adds the rest */
    *nh = p[6];
    d->hop_limit = p[7];
    memcpy(d->src, p + 8, 16);
    memcpy(d->dst, p + 24, 16);
    c->pos += IPV6_LEN;
    return MRC_OK;
}

/* RFC 8754 section 2.1: the TLV area is whole TLVs (Pad1 is a lone zero byte). */
static int check_tlvs(const uint8_t *p, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (p[i] == 0) {
            i++;
            continue;
        }
        CHECK(len - i >= 2, MRC_E_SRH_TLV);
        CHECK(len - i - 2 >= p[i + 1], MRC_E_SRH_TLV);
        i += 2 + (size_t)p[i + 1];
    }
    return MRC_OK;
}

/* RFC 8754 section 2 and 4.3.1: type 4, the segment list fits hdr_ext_len, segments_left
 * at most last_entry, TLVs well formed. Only UDP may follow. */
static int decode_srh(struct cursor *c, struct mrc_decoded *d)
{
    NEED(c, SRH_FIXED_LEN, MRC_E_SRH_TRUNCATED);
    const uint8_t *p = c->base + c->pos;
    size_t srh_len = SRH_FIXED_LEN + 8 * (size_t)p[1];
    NEED(c, srh_len, MRC_E_SRH_TRUNCATED);
    CHECK(p[2] == SRH_TYPE, MRC_E_SRH_TYPE);
    size_t n = (size_t)p[4] + 1;
    CHECK(SEG_LEN * n <= srh_len - SRH_FIXED_LEN, MRC_E_SRH_LAST_ENTRY);
    CHECK(p[3] <= p[4], MRC_E_SRH_SEGMENTS_LEFT);
    size_t tlv_start = SRH_FIXED_LEN + SEG_LEN * n;
    int rc = check_tlvs(p + tlv_start, srh_len - tlv_start);
    if (rc != MRC_OK)
        return rc;
    CHECK(p[0] == NH_UDP, MRC_E_SRH_NEXT_HEADER);
    d->seg_off = (uint32_t)(c->pos + SRH_FIXED_LEN);
    d->n_segments = (uint32_t)n;
    c->pos += srh_len;
    return MRC_OK;
}

/* RFC 2473 3: an encapsulated packet's inner IPv6 header, which must carry UDP; the
 * UDP checksum covers its addresses. */
static int decode_inner(struct cursor *c, struct mrc_decoded *d)
{
    int rc = check_ipv6(c);
    if (rc != MRC_OK)
        return rc;
    CHECK(c->base[c->pos + 6] == NH_UDP, MRC_E_INNER_NEXT_HEADER);
    d->encap = 1;
    d->inner_off = (uint32_t)c->pos;
    c->pos += IPV6_LEN;
    return MRC_OK;
}

static int decode_udp(struct cursor *c, struct mrc_decoded *d, int dport)
{
    NEED(c, UDP_LEN, MRC_E_UDP_TRUNCATED);
    const uint8_t *p = c->base + c->pos;
    size_t udp_len = c->end - c->pos;
    CHECK(get16(p + 4) == udp_len, MRC_E_UDP_LENGTH);
    d->sport = get16(p);
    d->dport = get16(p + 2);
    CHECK(dport < 0 || d->dport == dport, MRC_E_UDP_PORT);
    CHECK(get16(p + 6) != 0, MRC_E_UDP_CHECKSUM_ZERO);
    /* RFC 8200 8.1: the checksum covers the final destination, segments[0] with an SRH,
     * the inner header's addresses when encapsulated */
    const uint8_t *src = d->encap ? c->base + d->inner_off + 8 : d->src;
    const uint8_t *final_dst = d->encap      ? c->base + d->inner_off + 24
                               : d->n_segments ? c->base + d->seg_off
                                               : d->dst;
    CHECK(udp6_sum(src, final_dst, p, udp_len) == 0xffff, MRC_E_UDP_CHECKSUM);
    d->ev |= (uint32_t)d->sport << 16;
    d->l4_off = (uint32_t)c->pos;
    c->pos += UDP_LEN;
    return MRC_OK;
}

static int is_trimmed_dscp(uint8_t dscp)
{
    return dscp == MRC_DSCP_TRIMMED || dscp == MRC_DSCP_TRIMMED_LASTHOP;
}

/* docs/protocol.md, "Data": the payload must lie inside the message, a first segment starts
 * it and a last segment ends it, unless a switch trimmed the packet (its DSCP says so): a
 * stub of a last segment ends short of msg_len, and is NACKed, not placed. */
static int check_data(const struct mrc_header *h, uint64_t payload_len, uint8_t dscp)
{
    uint64_t end = (uint64_t)h->msg_offset + payload_len;
    CHECK(end <= h->msg_len, MRC_E_MSG_BOUNDS);
    if (h->opcode == OP_WRITE_FIRST || h->opcode == OP_WRITE_ONLY)
        CHECK(h->msg_offset == 0, MRC_E_FIRST_OFFSET);
    if ((h->opcode == OP_WRITE_LAST || h->opcode == OP_WRITE_ONLY) && !is_trimmed_dscp(dscp))
        CHECK(end == h->msg_len, MRC_E_LAST_END);
    return MRC_OK;
}

static void get_body(const uint8_t *q, struct mrc_header *h)
{
    switch (h->opcode) {
    case OP_WRITE_FIRST: case OP_WRITE_MIDDLE: case OP_WRITE_LAST: case OP_WRITE_ONLY:
        h->psn = get32(q);
        h->msn = get32(q + 4);
        h->msg_offset = get32(q + 8);
        h->msg_len = get32(q + 12);
        h->ts = get64(q + 16);
        break;
    case OP_ACK: case OP_SACK:
        h->cum_psn = get32(q);
        h->sack_base = get32(q + 4);
        h->bitmap = get64(q + 8);
        h->ev = get32(q + 16);
        h->ts = get64(q + 20);
        h->ooo_count = get16(q + 28);
        h->rwnd_penalty = q[30];
        h->rwnd = get32(q + 32);
        h->rcvd_bytes = get64(q + 36);
        h->service_time = get32(q + 44);
        h->ports_down = get64(q + 48);
        break;
    case OP_NACK:
        h->psn = get32(q);
        h->reason = q[4];
        h->ev = get32(q + 8);
        h->ts = get64(q + 12);
        break;
    case OP_PROBE: case OP_PROBE_REPLY:
        h->probe_id = get32(q);
        h->ev = get32(q + 4);
        h->ts = get64(q + 8);
        break;
    case OP_SETUP: case OP_SETUP_ACK:
        h->initial_psn = get32(q);
        h->rwnd = get32(q + 4);
        h->mtu = get16(q + 8);
        h->ev_count = get16(q + 10);
        h->ts = get64(q + 12);
        break;
    default:
        h->final_psn = get32(q);
        break;
    }
}

/* The MRC header and payload at the cursor, of a packet of DSCP d->dscp. */
static int decode_mrc(struct cursor *c, struct mrc_decoded *d)
{
    struct mrc_header *h = &d->hdr;
    NEED(c, COMMON_LEN, MRC_E_MRC_TRUNCATED);
    const uint8_t *p = c->base + c->pos;
    CHECK(p[0] == MRC_VERSION, MRC_E_MRC_VERSION);
    CHECK(p[1] <= OP_CLOSE_ACK, MRC_E_OPCODE);
    CHECK((p[2] & ~KNOWN_FLAGS) == 0, MRC_E_FLAGS);
    h->opcode = p[1];
    h->flags = p[2];
    h->dst_conn = get32(p + 4);
    h->src_conn = get32(p + 8);
    c->pos += COMMON_LEN;
    size_t blen = body_len(h->opcode);
    NEED(c, blen, MRC_E_BODY_TRUNCATED);
    get_body(c->base + c->pos, h);
    c->pos += blen;
    d->payload_off = (uint32_t)c->pos;
    d->payload_len = (uint32_t)(c->end - c->pos);
    if (is_data(h->opcode))
        return check_data(h, d->payload_len, d->dscp);
    CHECK(d->payload_len == 0, MRC_E_TRAILING);
    if (h->opcode == OP_NACK)
        CHECK(h->reason >= NACK_REASON_MIN && h->reason <= NACK_REASON_MAX, MRC_E_NACK_REASON);
    if (h->opcode == OP_ACK)
        CHECK(h->bitmap == 0, MRC_E_ACK_BITMAP);   /* an ACK is a SACK with nothing to add */
    if (h->opcode == OP_ACK || h->opcode == OP_SACK)
        CHECK(h->rwnd_penalty <= MAX_PENALTY, MRC_E_PENALTY);
    return MRC_OK;
}

int mrc_decode(const char *buf, size_t len, int dport, struct mrc_decoded *out)
{
    struct cursor c = {(const uint8_t *)buf, 0, len};
    uint8_t nh = 0;
    memset(out, 0, sizeof(*out));
    int rc = decode_ipv6(&c, out, &nh);
    if (rc == MRC_OK && nh == NH_ROUTING)
        rc = decode_srh(&c, out);
    else if (rc == MRC_OK && nh == NH_IPV6)
        rc = decode_inner(&c, out);
    else if (rc == MRC_OK && nh != NH_UDP)
        rc = MRC_E_NEXT_HEADER;
    if (rc == MRC_OK)
        rc = decode_udp(&c, out, dport);
    if (rc == MRC_OK)
        rc = decode_mrc(&c, out);
    return rc;
}

int mrc_decode_l4(const char *buf, size_t len, int dport)
{
    struct mrc_decoded d;
    int rc = mrc_decode(buf, len, dport, &d);
    return rc < 0 ? rc : (int)d.l4_off;
}

int mrc_decode_mrc(const char *buf, size_t len, uint8_t tclass)
{
    struct cursor c = {(const uint8_t *)buf, 0, len};
    struct mrc_decoded d;
    memset(&d, 0, sizeof(d));
    d.dscp = tclass >> 2;
    int rc = decode_mrc(&c, &d);
    return rc < 0 ? rc : (int)d.payload_off;
}

int mrc_decap(const char *buf, size_t len, int dport)
{
    struct cursor c = {(const uint8_t *)buf, 0, len};
    struct mrc_decoded d;
    memset(&d, 0, sizeof(d));
    int rc = decode_inner(&c, &d);
    if (rc == MRC_OK)
        rc = decode_udp(&c, &d, dport);
    return rc < 0 ? rc : (int)c.pos;
}

int mrc_decap_burst(char *buf, size_t slot_size, struct mrc_rx_meta *meta, uint32_t count,
                    int dport)
{
    for (uint32_t i = 0; i < count; i++) {
        struct mrc_rx_meta *m = &meta[i];
        if (m->truncated || m->len > slot_size)
            continue;
        char *slot = buf + i * slot_size;
        int off = mrc_decap(slot, m->len, dport);
        if (off < 0) {
            m->truncated = MRC_RX_BAD_INNER;
            continue;
        }
        memcpy(m->src, slot + 8, 16);
        memcpy(m->dst, slot + 24, 16);
        m->sport = get16((const uint8_t *)slot + IPV6_LEN);
        m->len -= (uint32_t)off;
        memmove(slot, slot + off, m->len);
    }
    return (int)count;
}

int mrc_decode_rx_burst(const char *buf, size_t slot_size, const struct mrc_rx_meta *meta,
                        uint32_t count, struct mrc_rx_rec *out)
{
    for (uint32_t i = 0; i < count; i++) {
        const struct mrc_rx_meta *m = &meta[i];
        struct mrc_rx_rec *r = &out[i];
        memset(r, 0, sizeof(*r));
        r->kind = MRC_RX_OTHER;
        if (m->truncated || m->len > slot_size)
            continue;
        struct cursor c = {(const uint8_t *)buf + i * slot_size, 0, m->len};
        struct mrc_decoded d;
        memset(&d, 0, sizeof(d));
        d.dscp = m->tclass >> 2;
        if (decode_mrc(&c, &d) < 0)
            continue;
        const struct mrc_header *h = &d.hdr;
        int sack = h->opcode == OP_SACK || h->opcode == OP_ACK;
        if (!sack && (!is_data(h->opcode) || is_trimmed_dscp(d.dscp)))
            continue;
        r->dst_conn = h->dst_conn;
        memcpy(r->src, m->src, 16);
        if (sack) {
            struct mrc_rx_sack *k = &r->body.sack;
            r->kind = MRC_RX_SACK;
            k->flags = h->flags;
            k->cum_psn = h->cum_psn;
            k->sack_base = h->sack_base;
            k->bitmap = h->bitmap;
            k->ev = h->ev;
            k->ts = h->ts;
            k->rwnd = h->rwnd;
            k->rcvd_bytes = h->rcvd_bytes;
            k->service_time = h->service_time;
            k->ports_down = h->ports_down;
            k->penalty = h->rwnd_penalty;
            continue;
        }
        struct mrc_rx_data *a = &r->body.data;
        r->kind = MRC_RX_DATA;
        a->flags = h->flags;
        a->psn = h->psn;
        a->msn = h->msn;
        a->msg_offset = h->msg_offset;
        a->msg_len = h->msg_len;
        a->ts = h->ts;
        a->payload_off = i * slot_size + d.payload_off;
        a->payload_len = d.payload_len;
        a->ev = (uint32_t)m->sport << 16 | (m->flow_label & 0xffff);
        a->ce = (m->tclass & 3) == 3;  /* RFC 3168 section 5: CE is 0b11 */
    }
    return (int)count;
}

/* ---------------------------------------------------------------- batched socket IO */

static void to_sockaddr(struct sockaddr_in6 *sa, const struct mrc_addr6 *a)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(a->port);
    sa->sin6_flowinfo = htonl(a->flowinfo);
    memcpy(&sa->sin6_addr, a->addr, 16);
    sa->sin6_scope_id = a->scope_id;
}

/* One sendmmsg of up to BATCH_CHUNK packets starting at packet `first`. */
static int send_chunk(int fd, const char *buf, const uint32_t *offsets, uint32_t first,
                      uint32_t k, const struct mrc_addr6 *addrs, uint32_t n_addrs, int flags)
{
    struct mmsghdr msgs[BATCH_CHUNK];
    struct iovec iov[BATCH_CHUNK];
    struct sockaddr_in6 sa[BATCH_CHUNK];
    memset(msgs, 0, sizeof(msgs[0]) * k);
    for (uint32_t i = 0; i < k; i++) {
        uint32_t j = first + i;
        iov[i].iov_base = (void *)(buf + offsets[j]);
        iov[i].iov_len = offsets[j + 1] - offsets[j];
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        if (n_addrs) {
            to_sockaddr(&sa[i], &addrs[n_addrs == 1 ? 0 : j]);
            msgs[i].msg_hdr.msg_name = &sa[i];
            msgs[i].msg_hdr.msg_namelen = sizeof(sa[i]);
        }
    }
    int rc;
    do {
        rc = sendmmsg(fd, msgs, k, flags | MSG_DONTWAIT);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : rc;
}

int mrc_send_batch(int fd, const char *buf, const uint32_t *offsets, uint32_t count,
                   const struct mrc_addr6 *addrs, uint32_t n_addrs, int flags)
{
    if (n_addrs != 0 && n_addrs != 1 && n_addrs != count)
        return -EINVAL;
    uint32_t done = 0;
    while (done < count) {
        uint32_t k = count - done < BATCH_CHUNK ? count - done : BATCH_CHUNK;
        int rc = send_chunk(fd, buf, offsets, done, k, addrs, n_addrs, flags);
        if (rc == -EAGAIN || rc == -EWOULDBLOCK)
            return (int)done;
        if (rc < 0)
            return done ? (int)done : rc;  /* report what went out; the error recurs next call */
        done += (uint32_t)rc;
        if ((uint32_t)rc < k)
            break;
    }
    return (int)done;
}

static int recv_chunk(int fd, char *buf, size_t slot_size, uint32_t first, uint32_t k,
                      uint32_t *lens, uint8_t *truncated, char *names, uint32_t name_size,
                      uint32_t *namelens, int flags)
{
    struct mmsghdr msgs[BATCH_CHUNK];
    struct iovec iov[BATCH_CHUNK];
    memset(msgs, 0, sizeof(msgs[0]) * k);
    for (uint32_t i = 0; i < k; i++) {
        uint32_t j = first + i;
        iov[i].iov_base = buf + slot_size * j;
        iov[i].iov_len = slot_size;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        if (names) {
            msgs[i].msg_hdr.msg_name = names + (size_t)name_size * j;
            msgs[i].msg_hdr.msg_namelen = name_size;
        }
    }
    int rc;
    do {
        rc = recvmmsg(fd, msgs, k, flags | MSG_DONTWAIT, NULL);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return -errno;
    for (int i = 0; i < rc; i++) {
        uint32_t j = first + (uint32_t)i;
        lens[j] = msgs[i].msg_len;
        if (truncated)
            truncated[j] = (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ? 1 : 0;
        if (names && namelens)
            namelens[j] = msgs[i].msg_hdr.msg_namelen;
    }
    return rc;
}

int mrc_recv_batch(int fd, char *buf, size_t slot_size, uint32_t count, uint32_t *lens,
                   uint8_t *truncated, char *names, uint32_t name_size, uint32_t *namelens,
                   int flags)
{
    uint32_t done = 0;
    while (done < count) {
        uint32_t k = count - done < BATCH_CHUNK ? count - done : BATCH_CHUNK;
        int rc = recv_chunk(fd, buf, slot_size, done, k, lens, truncated, names, name_size,
                            namelens, flags);
        if (rc == -EAGAIN || rc == -EWOULDBLOCK)
            return (int)done;
        if (rc < 0)
            return done ? (int)done : rc;
        done += (uint32_t)rc;
        if ((uint32_t)rc < k)
            break;
    }
    return (int)done;
}
