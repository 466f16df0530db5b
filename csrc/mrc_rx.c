/* The receiver's placement of a burst's data packets (protocol/receiver.py, Receiver.receive)
 * in one call: what a NIC's receive path does per packet, the decisions left to the core.
 * Its pure-Python twin is protocol/rxplace.py's place(), function for function; its state
 * is declared in protocol/rxstate.py; tests/unit/test_rx_place.py runs both twins on the
 * same inputs and compares every member of the state they leave. */

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

/* rxplace.py _note: d is the SACK's trigger. */
static void note(struct mrc_rx_state *st, const struct mrc_rx_data *d, double now)
{
    st->trig_at = now;
    st->trig_ev = d->ev;
    st->trig_ts = d->ts;
    st->trig_has_ts = (d->flags & TS_FLAG) != 0;
}

/* rxplace.py segment_index: the segment the payload fills, or -1 (counted). */
static int64_t segment_index(struct mrc_rx_state *st, uint64_t off, uint64_t msg_len, uint64_t n)
{
    uint64_t end = off + n;
    if (n > st->mss || end > msg_len || msg_len > st->max_message) {
        st->inconsistent_header++;
        return -1;
    }
    if (msg_len == 0)
        return 0;
    uint64_t seg = st->seg_size;
    int full = n == seg, last = 0 < n && n < seg && end == msg_len;
    if (off % seg || !(full || last)) {
        st->bad_segment++;
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
        st->messages++;
        st->next_msn++;
    }
}

#define TAKE_NEXT (-1) /* place_one: the record is taken; go on */

/* rxplace.py _spare_fits: a new message of msg_len bytes can take the top spare into m. */
static int spare_fits(const struct mrc_rx_state *st, const struct mrc_rx_msg *m, uint64_t msg_len)
{
    return st->n_spares && st->spares[st->n_spares - 1].len == msg_len &&
           st->n_opened < MRC_RX_MAX_DELIVERED && m->state == MRC_MSG_FREE;
}

/* rxplace.py _open_with_spare: open message msn in its slot with the top spare. */
static void open_with_spare(struct mrc_rx_state *st, int64_t msn, uint64_t msg_len)
{
    struct mrc_rx_spare *sp = &st->spares[--st->n_spares];
    uint64_t segs = msg_len ? (msg_len + st->seg_size - 1) / st->seg_size : 1;
    st->opened[st->n_opened++] = (uint32_t)(msn & st->msg_mask);
    mrc_rx_open(st, msn & st->msg_mask, msn, sp->buf, sp->len, sp->placed, segs);
}

/* rxplace.py _duplicate: counted, and a SACK due now (with CE: echoing it). */
static int duplicate(struct mrc_rx_state *st, const struct mrc_rx_data *d, double now)
{
    st->dup_packets++;
    note(st, d, now);
    if (d->ce)
        return MRC_RX_CE;
    st->sacks++;
    st->ack_deadline = HUGE_VAL;
    return TAKE_NEXT;
}

/* rxplace.py _placed: after n bytes of d (PSN psn) went into m, the counts, the cumulative
 * PSN, delivery, the trigger, and whether a SACK is due now, later or (CE) echoing it. */
static int placed(struct mrc_rx_state *st, struct mrc_rx_msg *m, const struct mrc_rx_data *d,
                  int64_t psn, uint64_t n, double now)
{
    st->data++;
    st->bytes += n;
    if (d->ce)
        st->ce++;
    int gap = mark(st, psn);
    if (!m->missing) {
        m->state = MRC_MSG_DONE;
        deliver(st);
    }
    st->since_sack += n;
    note(st, d, now);
    if (d->ce)
        return MRC_RX_CE; /* the core sends a SACK echoing it now */
    if (gap || (d->flags & ACK_REQ_FLAG) || st->since_sack >= st->sack_every_bytes) {
        st->sacks++;
        st->ack_deadline = HUGE_VAL;
    } else if (isinf(st->ack_deadline)) {
        st->ack_deadline = now + st->ack_delay;
    }
    return TAKE_NEXT;
}

/* rxplace.py _place_one: TAKE_NEXT when r is taken, else why to stop (before it, or after
 * it for CE). A message not yet in the table needs its buffer from the core: that is
 * decided before any state changes, so the core can open it and call again. */
static int place_one(struct mrc_rx_state *st, const char *buf, const struct mrc_rx_rec *r,
                     uint32_t conn, double now)
{
    if (r->kind != MRC_RX_DATA || r->dst_conn != conn)
        return MRC_RX_OTHER_RECORD;
    if (st->n_delivered >= MRC_RX_MAX_DELIVERED)
        return MRC_RX_FULL;
    const struct mrc_rx_data *d = &r->body.data;
    int64_t psn = expand32(d->psn, st->cum);
    if (psn >= st->cum + (int64_t)st->reorder_window)
        return MRC_RX_OUT_OF_WINDOW; /* the core NACKs it: a control packet */
    int64_t msn = expand32(d->msn, st->next_msn);
    struct mrc_rx_msg *m = &st->msgs[msn & st->msg_mask];
    int known = m->state != MRC_MSG_FREE && m->msn == msn;
    int in_window = st->next_msn <= msn && msn < st->next_msn + (int64_t)st->msn_window;
    int dup = psn < st->cum || st->ooo[psn & st->ooo_mask];
    if (!dup && in_window && !known && !spare_fits(st, m, d->msg_len))
        return MRC_RX_NEW_MESSAGE;
    st->packets++;
    if (dup)
        return duplicate(st, d, now);
    uint64_t n = d->payload_len;
    int64_t index = segment_index(st, d->msg_offset, d->msg_len, n);
    if (index < 0)
        return TAKE_NEXT;
    if (!in_window || m->state == MRC_MSG_DONE) {
        st->msn_out_of_window++;
        return TAKE_NEXT;
    }
    if (!known) /* a new message: the top spare is its buffer */
        open_with_spare(st, msn, d->msg_len);
    if (m->len != d->msg_len) {
        st->inconsistent_header++;
        return TAKE_NEXT;
    }
    if (m->placed[index]) {
        st->dup_segment++;
        return TAKE_NEXT;
    }
    memcpy(m->buf + d->msg_offset, buf + d->payload_off, n);
    m->placed[index] = 1;
    m->missing--;
    return placed(st, m, d, psn, n, now);
}

int mrc_rx_place(struct mrc_rx_state *st, const char *buf, const struct mrc_rx_rec *recs,
                 uint32_t from, uint32_t to, uint32_t conn, double now)
{
    st->why = MRC_RX_END;
    deliver(st); /* what a full list left complete */
    for (uint32_t i = from; i < to; i++) {
        int why = place_one(st, buf, &recs[i], conn, now);
        if (why != TAKE_NEXT) {
            st->why = (uint64_t)why;
            return why == MRC_RX_CE ? (int)i + 1 : (int)i;
        }
    }
    return (int)to;
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
