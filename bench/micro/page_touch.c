// What a fresh 4.17 GB buffer costs the host (a 32 GiB PoRep partition's aux vector,
// allocated per partition: glibc maps allocations this large afresh each time and unmaps
// them on free) against zeroing the same buffer again: first touch (page faults and the
// kernel's zeroing) on two threads, then a second memset of the same pages, then munmap.
// Build and run: gcc -O2 -pthread -o page_touch page_touch.c && ./page_touch
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <pthread.h>
#include <sys/resource.h>
static size_t N = 130169893UL * 32;
static char *buf;
static void *fill(void *arg) { long k = (long)arg; size_t h = N / 2; memset(buf + k * h, 0, h); return 0; }
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static double cpu() { struct rusage r; getrusage(RUSAGE_SELF, &r); return r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec * 1e-6; }
static void touch(const char *what) {
  double t = now(), c = cpu();
  pthread_t th[2];
  for (long k = 0; k < 2; k++) pthread_create(&th[k], 0, fill, (void *)k);
  for (int k = 0; k < 2; k++) pthread_join(th[k], 0);
  printf("%s: %.3f s wall %.2f core-s\n", what, now() - t, cpu() - c);
}
int main() {
  for (int rep = 0; rep < 4; rep++) {
    buf = mmap(0, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    touch("fresh mapping, first touch");
    touch("same mapping, zeroed again");
    double t = now(); munmap(buf, N); printf("unmap %.3f s\n", now() - t);
  }
}
