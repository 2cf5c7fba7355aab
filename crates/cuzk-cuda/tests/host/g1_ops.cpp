// Reads pairs of affine G1 points A, B (x, y as 12 hex words each, most significant
// first; (0, 0) is infinity) and writes, as XYZZ points, A + B, 2A, 3A + B, A + A (by
// mixed addition), 2A + 2A (by general addition), A + (−A) and ∞ + (3A + B), as
// computed by kernels/ec/xyzz.cuh.
#include "host_io.h"
#include "ec/xyzz.cuh"

static void write(const g1::xyzz &p) {
    write(p.x);
    std::printf(" ");
    write(p.y);
    std::printf(" ");
    write(p.zz);
    std::printf(" ");
    write(p.zzz);
    std::printf(" ");
}

int main() {
    g1::affine a, b;
    while (read(a.x) && read(a.y) && read(b.x) && read(b.y)) {
        const g1::xyzz pa = g1::from_affine(a);
        const g1::xyzz sum = g1::add_affine(g1::add_affine(g1::infinity(), a), b);
        const g1::xyzz two = g1::dbl(pa);
        const g1::xyzz three_plus = g1::add(sum, two);
        write(sum);
        write(two);
        write(three_plus);
        write(g1::add_affine(pa, a));
        write(g1::add(two, two));
        write(g1::add_affine(pa, g1::neg(a)));
        write(g1::add(g1::infinity(), three_plus));
        std::printf("\n");
    }
    return 0;
}
