// Reads pairs of Fp elements (12 hex words each, most significant first) from stdin
// and writes a·b (Montgomery), a + b and a − b as computed by kernels/ff/fp.cuh.
#include <cstdio>

#include "cuda_shim.h"
#include "fp.cuh"

static bool read(fp::elem &e) {
    for (int i = 11; i >= 0; i--)
        if (std::scanf("%8x", &e.l[i]) != 1) return false;
    return true;
}
static void write(const fp::elem &e) {
    for (int i = 11; i >= 0; i--) std::printf("%08x", e.l[i]);
}

int main() {
    fp::elem a, b;
    while (read(a) && read(b)) {
        write(fp::mul(a, b));
        std::printf(" ");
        write(fp::add(a, b));
        std::printf(" ");
        write(fp::sub(a, b));
        std::printf("\n");
    }
    return 0;
}
