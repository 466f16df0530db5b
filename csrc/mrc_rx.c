/* The receiver's placement of a burst's data packets (protocol/receiver.py, Receiver.place_run)
 * in one call: what a NIC's receive path does per packet, the decisions left to the core.
 * Its pure-Python twin is protocol/rxplace.py's place(); tests/unit/test_rx_place.py runs
 * both on the same inputs and compares every field of the state they leave. */

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "mrc_fast.h"

#define TS_FLAG 0x02      /* wire/frames.py Flags.TS */
#define ACK_REQ_FLAG 0x08 /* wire/frames.py Flags.ACK_REQ */

/* serial.py expand: the integer congruent to wire mod 2**32 nearest ref */
static int64_t expand32(uint64_t wire, int64_t ref)
{
    int64_t d = (int64_t)((wire - (uint64_t)ref) & 0xffffffffu);
    if (d >= (int64_t)1 << 31)
        d -= (int64_t)1 << 32;
    return ref + d;
}

static void note(struct mrc_rx_state *st, const struct mrc_rx_data *d)
{
    st->trig_ev = d->ev;
    st->trig_ts = d->ts;
    st->trig_has_ts = (d->flags & TS_FLAG) != 0;
}

/* rxplace.py segment_index: the segment the payload fills, or -1 (counted). */
static int64_t segment_index(struct mrc_rx_state *st, uint64_t off, uint64_t msg_len, uint64_t n)
{
    uint64_t end = off + n;
    if (n > st->mss || end > msg_len || msg_len > st->max_message) {
        st->counts.inconsistent_header++;
        return -1;
    }
    if (msg_len == 0)
        return 0;
    uint64_t seg = st->seg_size;
    int full = n == seg, last = 0 < n && n < seg && end == msg_len;
    if (off % seg || !(full || last)) {
        st->counts.bad_segment++;
        return -1;
    }
    return (int64_t)(off / seg);
}

/* rxplace.py _mark: record psn; 1 if it opened a gap. */
static int mark(struct mrc_rx_state *st, int64_t psn)
{
    int gap = psn > st->highest + 1;
    if (psn > st->highest)
        st->highest = psn;
    if (psn != st->cum) {
        st->ooo[psn & st->ooo_mask] = 1;
        st->ooo_count++;
        return gap;
    }
    st->cum++;
    while (st->ooo[st->cum & st->ooo_mask]) {
        st->ooo[st->cum & st->ooo_mask] = 0;
        st->cum++;
    }
    st->ooo_count = 0;
    return gap;
}

/* rxplace.py _deliver, delivery in MSN order: each message from next_msn on that is
 * complete leaves the table, its slot listed for the caller (events, buffers). */
static void deliver(struct mrc_rx_state *st)
{
    for (;;) {
        struct mrc_rx_msg *m = &st->msgs[st->next_msn & st->msg_mask];
        if (m->state != MRC_MSG_DONE || m->msn != st->next_msn || st->n_delivered >= MRC_RX_MAX_DELIVERED)
            return;
        m->state = MRC_MSG_DELIVERED;
        st->delivered[st->n_delivered++] = (uint32_t)(st->next_msn & st->msg_mask);
        st->held += m->len;
        st->counts.messages++;
        st->next_msn++;
    }
}

int mrc_rx_place(struct mrc_rx_state *st, const char *buf, const struct mrc_rx_rec *recs,
                 uint32_t from, uint32_t to, uint32_t conn, double now)
{
    st->why = MRC_RX_END;
    deliver(st); /* what a full list left complete */
    uint32_t i = from;
    for (; i < to; i++) {
        const struct mrc_rx_rec *r = &recs[i];
        if (r->kind != MRC_RX_DATA || r->dst_conn != conn) {
            st->why = MRC_RX_OTHER_RECORD;
            return (int)i;
        }
        if (st->n_delivered >= MRC_RX_MAX_DELIVERED) {
            st->why = MRC_RX_FULL;
            return (int)i;
        }
        const struct mrc_rx_data *d = &r->body.data;
        int64_t psn = expand32(d->psn, st->cum);
        if (psn >= st->cum + (int64_t)st->reorder_window) {
            st->why = MRC_RX_OUT_OF_WINDOW; /* the core NACKs it: a control packet */
            return (int)i;
        }
        /* a message not yet in the table needs its buffer from the core: looked up before
         * any state changes, so the core can place this packet itself or call again */
        int64_t msn = expand32(d->msn, st->next_msn);
        struct mrc_rx_msg *m = &st->msgs[msn & st->msg_mask];
        int known = m->state != MRC_MSG_FREE && m->msn == msn;
        int in_window = st->next_msn <= msn && msn < st->next_msn + (int64_t)st->msn_window;
        int dup = psn < st->cum || st->ooo[psn & st->ooo_mask];
        int spare = st->n_spares && st->spares[st->n_spares - 1].len == d->msg_len &&
                    st->n_opened < MRC_RX_MAX_DELIVERED && m->state == MRC_MSG_FREE;
        if (!dup && in_window && !known && !spare) {
            st->why = MRC_RX_NEW_MESSAGE;
            return (int)i;
        }
        st->counts.packets++;
        if (dup) {
            st->counts.dup_packets++;
            note(st, d);
            if (d->ce) {
                st->why = MRC_RX_CE;
                return (int)i + 1;
            }
            st->sacks++;
            st->ack_deadline = HUGE_VAL;
            continue;
        }
        uint64_t n = d->payload_len;
        int64_t index = segment_index(st, d->msg_offset, d->msg_len, n);
        if (index < 0)
            continue;
        if (!in_window || m->state == MRC_MSG_DONE) {
            st->counts.msn_out_of_window++;
            continue;
        }
        if (!known) { /* a new message: the top spare is its buffer */
            struct mrc_rx_spare *sp = &st->spares[--st->n_spares];
            uint64_t segs = d->msg_len ? (d->msg_len + st->seg_size - 1) / st->seg_size : 1;
            st->opened[st->n_opened++] = (uint32_t)(msn & st->msg_mask);
            mrc_rx_open(st, msn & st->msg_mask, msn, sp->buf, sp->len, sp->placed, segs);
        }
        if (m->len != d->msg_len) {
            st->counts.inconsistent_header++;
            continue;
        }
        if (m->placed[index]) {
            st->counts.dup_segment++;
            continue;
        }
        memcpy(m->buf + d->msg_offset, buf + d->payload_off, n);
        m->placed[index] = 1;
        m->missing--;
        st->counts.data++;
        st->counts.bytes += n;
        if (d->ce)
            st->counts.ce++;
        int gap = mark(st, psn);
        if (!m->missing) {
            m->state = MRC_MSG_DONE;
            deliver(st);
        }
        st->since_sack += n;
        note(st, d);
        if (d->ce) {
            st->why = MRC_RX_CE; /* the core sends a SACK echoing it now */
            return (int)i + 1;
        }
        if (gap || (d->flags & ACK_REQ_FLAG) || st->since_sack >= st->sack_every_bytes) {
            st->sacks++;
            st->ack_deadline = HUGE_VAL;
        } else if (isinf(st->ack_deadline)) {
            st->ack_deadline = now + st->ack_delay;
        }
    }
    return (int)i;
}

void mrc_rx_open(struct mrc_rx_state *st, uint64_t slot, int64_t msn, char *buf, uint64_t len,
                 uint8_t *placed, uint64_t segs)
{
    struct mrc_rx_msg *m = &st->msgs[slot];
    memset(placed, 0, segs);
    m->msn = msn;
    m->buf = buf;
    m->placed = placed;
    m->len = len;
    m->missing = segs;
    m->state = MRC_MSG_OPEN;
}

int mrc_rx_push_spare(struct mrc_rx_state *st, char *buf, uint8_t *placed, uint64_t len)
{
    if (st->n_spares >= MRC_RX_SPARES)
        return 0;
    struct mrc_rx_spare *sp = &st->spares[st->n_spares++];
    sp->buf = buf;
    sp->placed = placed;
    sp->len = len;
    return 1;
}
