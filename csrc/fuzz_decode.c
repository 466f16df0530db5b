#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "mrc_fast.h"

/* Sanitizer fuzz loop for mrc_decode: mutations of a valid SRH data packet and random
 * bytes, each in an exact-size heap block so AddressSanitizer flags any read past len.
 * Built and run by tests/unit/test_fastpath.py:
 *   cc -fsanitize=address,undefined csrc/fuzz_decode.c csrc/mrc_fast.c -Icsrc; ./a.out N */
static uint64_t x = 88172645463325252ULL;
static uint64_t rnd(void){ x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x; }
int main(int argc, char **argv){
  long iterations = argc > 1 ? atol(argv[1]) : 1000000;
  /* a valid SRH data packet as the seed */
  struct mrc_path p; memset(&p, 0, sizeof p); memset(p.src, 1, 16); memset(p.dst, 2, 16); memset(p.final_dst, 3, 16);
  char segs[48]; memset(segs, 2, 16); memset(segs+16, 4, 16); memset(segs+32, 3, 16);
  p.segments = segs; p.n_segments = 3; p.ev = 0x80012345; p.dscp = 26; p.ecn = 2; p.hop_limit = 64; p.dport = 4791;
  struct mrc_header h; memset(&h, 0, sizeof h); h.opcode = 3; h.msg_len = 100;
  char payload[100]; memset(payload, 7, 100);
  char seed[1024]; int n = mrc_encode(seed, sizeof seed, &p, &h, payload, 100);
  struct mrc_decoded d; int ok = 0;
  if (mrc_decode(seed, n, -1, &d) != 0) { printf("seed does not decode\n"); return 1; }
  for (long it = 0; it < iterations; it++) {
    size_t len = rnd() % (n + 40);
    char *buf = malloc(len ? len : 1);   /* exact-size heap block: ASan flags any overread */
    memcpy(buf, seed, len < (size_t)n ? len : (size_t)n);
    for (size_t i = n; i < len; i++) buf[i] = rnd();
    int edits = rnd() % 4;
    for (int e = 0; e < edits && len; e++) buf[rnd() % len] = rnd();
    if (rnd() % 8 == 0) for (size_t i = 0; i < len; i++) buf[i] = rnd();
    if (mrc_decode(buf, len, (rnd() & 1) ? -1 : 4791, &d) == 0) ok++;
    free(buf);
  }
  printf("fuzz done, %d accepted\n", ok);
  return 0;
}
