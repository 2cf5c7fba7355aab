// Reads pairs of Fp elements (12 hex words each, most significant first) from stdin
// and writes a·b (Montgomery, the FP64 product), a + b, a − b and a·b by the integer
// product as computed by kernels/ff/fp.cuh.
#include "host_io.h"

int main() {
    fp::elem a, b;
    while (read(a) && read(b)) {
        write(fp::mul_fp64(a, b));
        std::printf(" ");
        write(fp::add(a, b));
        std::printf(" ");
        write(fp::sub(a, b));
        std::printf(" ");
        write(fp::mul_int(a, b));
        std::printf("\n");
    }
    return 0;
}
