/* MRC endpoint socket IO in bursts: one recvmmsg with the path information the protocol
 * needs, one sendmmsg of raw IPv6 packets addressed by their own headers.
 *
 * The endpoint (mrc_transport/io/endpoint.py) is a Python loop; what it pays per packet
 * outside the protocol core is mostly interpreter work around the system calls: a
 * recvmsg per datagram, control messages parsed into Python objects, a sockaddr built per
 * destination. These two functions move that per-packet work into C and hand back one
 * fixed-size record per datagram. mrc_transport/io/batchio.py wraps them and holds their
 * pure-Python twins (same API, MRC_PUREPYTHON=1); tests/unit/test_batchio_burst.py checks
 * that both agree.
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

#ifndef IPV6_FLOWINFO
#define IPV6_FLOWINFO 11       /* <linux/in6.h>; glibc's netinet/in.h lacks it */
#endif

enum {
    IO_CHUNK = 64,             /* mmsghdr entries per recvmmsg/sendmmsg call */
    IO_IPV6_LEN = 40,
    IO_IPV6_DST = 24,          /* offset of the destination address (RFC 8200 section 3) */
    FLOW_LABEL_MASK = 0xFFFFF,
    /* CMSG_SPACE(sizeof(struct in6_pktinfo)) + 2 * CMSG_SPACE(sizeof(int)), rounded up */
    IO_CMSG_SPACE = 128,
};

/* The control messages open_rx (mrc_transport/io/sockets.py) asks for. */
static void parse_cmsgs(struct msghdr *mh, struct mrc_rx_meta *m)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != IPPROTO_IPV6)
            continue;
        size_t len = c->cmsg_len - CMSG_LEN(0);
        const unsigned char *data = CMSG_DATA(c);
        if (c->cmsg_type == IPV6_PKTINFO && len >= sizeof(struct in6_pktinfo)) {
            memcpy(m->dst, data, 16);  /* ipi6_addr comes first */
        } else if (c->cmsg_type == IPV6_TCLASS && len >= sizeof(int)) {
            int tclass;
            memcpy(&tclass, data, sizeof(tclass));
            m->tclass = (uint8_t)(tclass & 0xFF);
        } else if (c->cmsg_type == IPV6_FLOWINFO && len >= 4) {
            uint32_t flowinfo;  /* tclass << 20 | flow label, network order */
            memcpy(&flowinfo, data, 4);
            m->flow_label = ntohl(flowinfo) & FLOW_LABEL_MASK;
        }
    }
}

static int recv_meta_chunk(int fd, char *buf, size_t slot_size, uint32_t first, uint32_t k,
                           struct mrc_rx_meta *meta, int flags)
{
    struct mmsghdr msgs[IO_CHUNK];
    struct iovec iov[IO_CHUNK];
    struct sockaddr_in6 names[IO_CHUNK];
    /* aligned for struct cmsghdr, as CMSG_FIRSTHDR expects */
    union {
        struct cmsghdr align;
        char bytes[IO_CMSG_SPACE];
    } control[IO_CHUNK];
    memset(msgs, 0, sizeof(msgs[0]) * k);
    for (uint32_t i = 0; i < k; i++) {
        iov[i].iov_base = buf + slot_size * (first + i);
        iov[i].iov_len = slot_size;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &names[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(names[i]);
        msgs[i].msg_hdr.msg_control = control[i].bytes;
        msgs[i].msg_hdr.msg_controllen = sizeof(control[i].bytes);
    }
    int rc;
    do {
        rc = recvmmsg(fd, msgs, k, flags | MSG_DONTWAIT, NULL);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return -errno;
    for (int i = 0; i < rc; i++) {
        struct mrc_rx_meta *m = &meta[first + (uint32_t)i];
        memset(m, 0, sizeof(*m));
        m->len = msgs[i].msg_len;
        m->truncated = (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ? 1 : 0;
        if (msgs[i].msg_hdr.msg_namelen >= sizeof(struct sockaddr_in6)
            && names[i].sin6_family == AF_INET6) {
            memcpy(m->src, &names[i].sin6_addr, 16);
            m->sport = ntohs(names[i].sin6_port);
        }
        parse_cmsgs(&msgs[i].msg_hdr, m);
    }
    return rc;
}

int mrc_recv_meta(int fd, char *buf, size_t slot_size, uint32_t count,
                  struct mrc_rx_meta *meta, int flags)
{
    uint32_t done = 0;
    while (done < count) {
        uint32_t k = count - done < IO_CHUNK ? count - done : IO_CHUNK;
        int rc = recv_meta_chunk(fd, buf, slot_size, done, k, meta, flags);
        if (rc == -EAGAIN || rc == -EWOULDBLOCK)
            return (int)done;
        if (rc < 0)
            return done ? (int)done : rc;  /* report what arrived; the error recurs */
        done += (uint32_t)rc;
        if ((uint32_t)rc < k)
            break;
    }
    return (int)done;
}

static int send_raw6_chunk(int fd, const char *buf, const uint32_t *offsets, uint32_t first,
                           uint32_t k, int flags)
{
    struct mmsghdr msgs[IO_CHUNK];
    struct iovec iov[IO_CHUNK];
    struct sockaddr_in6 sa[IO_CHUNK];
    memset(msgs, 0, sizeof(msgs[0]) * k);
    memset(sa, 0, sizeof(sa[0]) * k);
    for (uint32_t i = 0; i < k; i++) {
        uint32_t j = first + i;
        const char *pkt = buf + offsets[j];
        iov[i].iov_base = (void *)pkt;
        iov[i].iov_len = offsets[j + 1] - offsets[j];
        /* IPPROTO_RAW sends the header as is; the kernel routes on msg_name, which must
         * be the packet's own (first-hop) destination */
        sa[i].sin6_family = AF_INET6;
        memcpy(&sa[i].sin6_addr, pkt + IO_IPV6_DST, 16);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &sa[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(sa[i]);
    }
    int rc;
    do {
        rc = sendmmsg(fd, msgs, k, flags | MSG_DONTWAIT);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : rc;
}

int mrc_send_raw6(int fd, const char *buf, size_t len, const uint32_t *offsets,
                  uint32_t count, int flags)
{
    if (count && offsets[count] > len)
        return -EINVAL;
    for (uint32_t j = 0; j < count; j++)
        if (offsets[j + 1] < offsets[j] || offsets[j + 1] - offsets[j] < IO_IPV6_LEN)
            return -EINVAL;
    uint32_t done = 0;
    while (done < count) {
        uint32_t k = count - done < IO_CHUNK ? count - done : IO_CHUNK;
        int rc = send_raw6_chunk(fd, buf, offsets, done, k, flags);
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
