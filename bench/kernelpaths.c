/* The sender's kernel paths side by side (bench/kernelpaths.py runs this in a lab host's
 * namespace): the same prebuilt IPv6 packets sent as fast as one core can through
 *
 *   raw            a raw IPv6 socket, sendmmsg of a burst, each packet to its own
 *                  destination (bench/perf.py's floor, mrc_send_raw6's path);
 *   packet         AF_PACKET SOCK_DGRAM, sendmmsg, each packet to its port and the
 *                  neighbour's MAC (no route lookup, no IPv6 output path);
 *   packet-bypass  the same with PACKET_QDISC_BYPASS (skips the port's qdisc);
 *   xdp            AF_XDP in copy mode, a socket and a UMEM per port, each packet copied
 *                  into UMEM frames (4 KB each, multi-buffer) as a C data path would
 *                  encode it there, one kick (sendto) per port per burst. Copy-mode
 *                  transmit skips the port's qdisc too.
 *
 * usage: kernelpaths MODE SECONDS PACKETS PORT...
 *   PACKETS: records of (u32 length, u32 port index, length bytes of IPv6 packet)
 *   PORT:    IFNAME,SRCMAC,DSTMAC (the port index is its position)
 * prints one JSON line: {"cpu", "user", "seconds", "sent", "errors"}. Bench only. */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif

#define MAX_PKTS 256
#define MAX_PORTS 8
#define PKT_ROOM 9216
#define IPV6_DST 24
#define ETH_LEN 14
#define FRAME 4096    /* an aligned UMEM chunk is at most a page: 9 KB packets take 3 */
#define FRAMES 4096
#define RING 2048

struct port {
    int ifindex;
    unsigned char src[6], dst[6];
    /* AF_XDP */
    int fd;
    char *umem;
    uint32_t *tx_prod, *tx_cons, *cq_prod, *cq_cons;
    struct xdp_desc *tx;
    uint32_t next_frame, in_flight, posted;
};

static char pkt[MAX_PKTS][PKT_ROOM];
static uint32_t pkt_len[MAX_PKTS], pkt_port[MAX_PKTS];
static struct port ports[MAX_PORTS];
static int npkts, nports;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void parse_mac(const char *s, unsigned char *mac)
{
    unsigned v[6];
    if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) {
        fprintf(stderr, "bad MAC %s\n", s);
        exit(2);
    }
    for (int i = 0; i < 6; i++)
        mac[i] = (unsigned char)v[i];
}

static void parse_port(char *spec, struct port *p)
{
    char *src = strchr(spec, ','), *dst = src ? strchr(src + 1, ',') : NULL;
    if (!dst) {
        fprintf(stderr, "bad port %s (IFNAME,SRCMAC,DSTMAC)\n", spec);
        exit(2);
    }
    *src++ = 0;
    *dst++ = 0;
    p->ifindex = (int)if_nametoindex(spec);
    if (!p->ifindex)
        die(spec);
    parse_mac(src, p->src);
    parse_mac(dst, p->dst);
}

static void load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path);
    uint32_t hdr[2];
    while (npkts < MAX_PKTS && fread(hdr, 4, 2, f) == 2) {
        if (hdr[0] > PKT_ROOM - ETH_LEN || hdr[1] >= (uint32_t)nports) {
            fprintf(stderr, "bad packet record %d\n", npkts);
            exit(2);
        }
        char *frame = pkt[npkts];
        struct port *p = &ports[hdr[1]];
        pkt_len[npkts] = hdr[0];
        pkt_port[npkts] = hdr[1];
        if (fread(frame + ETH_LEN, 1, hdr[0], f) != hdr[0])
            die("short packet file");
        /* the Ethernet header AF_XDP sends (the other paths start at the IPv6 header) */
        memcpy(frame, p->dst, 6);
        memcpy(frame + 6, p->src, 6);
        frame[12] = (char)0x86, frame[13] = (char)0xdd;
        npkts++;
    }
    fclose(f);
}

/* raw and packet: one mmsghdr per packet, built once; a call sends them all */
static struct mmsghdr msgs[MAX_PKTS];
static struct iovec iov[MAX_PKTS];
static struct sockaddr_in6 sa6[MAX_PKTS];
static struct sockaddr_ll sall[MAX_PKTS];

static int open_mmsg(const char *mode)
{
    int raw = !strcmp(mode, "raw");
    int fd = raw ? socket(AF_INET6, SOCK_RAW, IPPROTO_RAW)
                 : socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IPV6));
    if (fd < 0)
        die("socket");
    if (!strcmp(mode, "packet-bypass")) {
        int one = 1;
        if (setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one))
            die("PACKET_QDISC_BYPASS");
    }
    for (int i = 0; i < npkts; i++) {
        iov[i].iov_base = pkt[i] + ETH_LEN;
        iov[i].iov_len = pkt_len[i];
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        if (raw) {
            sa6[i].sin6_family = AF_INET6;
            memcpy(&sa6[i].sin6_addr, pkt[i] + ETH_LEN + IPV6_DST, 16);
            msgs[i].msg_hdr.msg_name = &sa6[i];
            msgs[i].msg_hdr.msg_namelen = sizeof sa6[i];
        } else {
            struct port *p = &ports[pkt_port[i]];
            sall[i].sll_family = AF_PACKET;
            sall[i].sll_protocol = htons(ETH_P_IPV6);
            sall[i].sll_ifindex = p->ifindex;
            sall[i].sll_halen = 6;
            memcpy(sall[i].sll_addr, p->dst, 6);
            msgs[i].msg_hdr.msg_name = &sall[i];
            msgs[i].msg_hdr.msg_namelen = sizeof sall[i];
        }
    }
    return fd;
}

static long send_mmsg(int fd, long *errors)
{
    int rc = sendmmsg(fd, msgs, (unsigned)npkts, MSG_DONTWAIT);
    if (rc < 0) {
        if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
            die("sendmmsg");
        ++*errors;
        return 0;
    }
    return rc;
}

static void *map_ring(int fd, const struct xdp_ring_offset *o, size_t entry, off_t pgoff,
                      uint32_t **prod, uint32_t **cons)
{
    char *m = mmap(NULL, o->desc + RING * entry, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, fd, pgoff);
    if (m == MAP_FAILED)
        die("mmap ring");
    *prod = (uint32_t *)(m + o->producer);
    *cons = (uint32_t *)(m + o->consumer);
    return m + o->desc;
}

static void open_xdp(struct port *p)
{
    p->fd = socket(AF_XDP, SOCK_RAW, 0);
    if (p->fd < 0)
        die("AF_XDP socket");
    p->umem = mmap(NULL, (size_t)FRAMES * FRAME, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p->umem == MAP_FAILED)
        die("mmap umem");
    struct xdp_umem_reg reg = {.addr = (uint64_t)(uintptr_t)p->umem,
                               .len = (uint64_t)FRAMES * FRAME, .chunk_size = FRAME};
    if (setsockopt(p->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg))
        die("XDP_UMEM_REG");
    int size = RING;
    /* a UMEM needs a fill ring even when nothing is received */
    if (setsockopt(p->fd, SOL_XDP, XDP_UMEM_FILL_RING, &size, sizeof size) ||
        setsockopt(p->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &size, sizeof size) ||
        setsockopt(p->fd, SOL_XDP, XDP_TX_RING, &size, sizeof size))
        die("XDP rings");
    struct xdp_mmap_offsets off;
    socklen_t len = sizeof off;
    if (getsockopt(p->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len))
        die("XDP_MMAP_OFFSETS");
    p->tx = map_ring(p->fd, &off.tx, sizeof(struct xdp_desc), XDP_PGOFF_TX_RING, &p->tx_prod,
                     &p->tx_cons);
    map_ring(p->fd, &off.cr, sizeof(uint64_t), XDP_UMEM_PGOFF_COMPLETION_RING, &p->cq_prod,
             &p->cq_cons);
    uint32_t *fq_prod, *fq_cons;
    map_ring(p->fd, &off.fr, sizeof(uint64_t), XDP_UMEM_PGOFF_FILL_RING, &fq_prod, &fq_cons);
    struct sockaddr_xdp sx = {.sxdp_family = AF_XDP, .sxdp_ifindex = (uint32_t)p->ifindex,
                              .sxdp_queue_id = 0, .sxdp_flags = XDP_COPY | XDP_USE_SG};
    if (bind(p->fd, (struct sockaddr *)&sx, sizeof sx))
        die("bind AF_XDP");
}

/* completions free frames in the order they were posted (copy mode sends in ring order) */
static void reap(struct port *p)
{
    uint32_t prod = __atomic_load_n(p->cq_prod, __ATOMIC_ACQUIRE), cons = *p->cq_cons;
    p->in_flight -= prod - cons;
    __atomic_store_n(p->cq_cons, prod, __ATOMIC_RELEASE);
}

static int post_xdp(int i)
{
    struct port *p = &ports[pkt_port[i]];
    uint32_t len = pkt_len[i] + ETH_LEN, frames = (len + FRAME - 1) / FRAME;
    if (p->in_flight + frames > RING)
        return 0;
    const char *frame = pkt[i];
    uint32_t prod = *p->tx_prod;
    for (uint32_t d = 0; d < frames; d++) {
        uint64_t addr = (uint64_t)(p->next_frame++ % FRAMES) * FRAME;
        uint32_t n = len - d * FRAME < FRAME ? len - d * FRAME : FRAME;
        memcpy(p->umem + addr, frame + d * FRAME, n);
        struct xdp_desc *desc = &p->tx[(prod + d) & (RING - 1)];
        desc->addr = addr;
        desc->len = n;
        desc->options = d + 1 < frames ? XDP_PKT_CONTD : 0;
    }
    __atomic_store_n(p->tx_prod, prod + frames, __ATOMIC_RELEASE);
    p->in_flight += frames;
    p->posted++;
    return 1;
}

static long send_xdp(long *errors)
{
    static int at;
    long sent = 0;
    for (int q = 0; q < nports; q++)
        reap(&ports[q]);
    for (int k = 0; k < npkts && post_xdp(at); k++, at = (at + 1) % npkts)
        sent++;
    for (int q = 0; q < nports; q++) {
        if (!ports[q].posted)
            continue;
        ports[q].posted = 0;
        if (sendto(ports[q].fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0) {
            if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS && errno != EINTR)
                die("sendto AF_XDP");
            ++*errors;
        }
    }
    return sent;
}

static double tv(struct timeval t) { return t.tv_sec + t.tv_usec * 1e-6; }

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: kernelpaths raw|packet|packet-bypass|xdp SECONDS PACKETS PORT...\n");
        return 2;
    }
    const char *mode = argv[1];
    double seconds = atof(argv[2]);
    for (int i = 4; i < argc && nports < MAX_PORTS; i++)
        parse_port(argv[i], &ports[nports++]);
    load(argv[3]);
    int xdp = !strcmp(mode, "xdp"), fd = -1;
    if (xdp)
        for (int q = 0; q < nports; q++)
            open_xdp(&ports[q]);
    else
        fd = open_mmsg(mode);
    long sent = 0, errors = 0;
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = now();
    while (now() - t0 < seconds) {
        long n = xdp ? send_xdp(&errors) : send_mmsg(fd, &errors);
        sent += n;
        if (n < npkts)
            sched_yield(); /* the socket or the ring is full: let the kernel drain it */
    }
    double elapsed = now() - t0;
    getrusage(RUSAGE_SELF, &r1);
    double user = tv(r1.ru_utime) - tv(r0.ru_utime), sys = tv(r1.ru_stime) - tv(r0.ru_stime);
    printf("{\"cpu\": %.6f, \"user\": %.6f, \"seconds\": %.6f, \"sent\": %ld, \"errors\": %ld}\n",
           user + sys, user, elapsed, sent, errors);
    return 0;
}
