// Fp products (issue 25): the integer CIOS (fp::mul_int), the FP64 product in use
// (fp::mul_fp64, biased columns) and the FP64 product before it (fp_per_product.cuh). Checks all three
// against each other on random inputs below p and edge values, then times chains of
// dependent products per thread (cycles per warp product at the measured clock).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fp_per_product.cuh"
#define CK(x)                                                                       \
    do {                                                                            \
        cudaError_t e = (x);                                                        \
        if (e != cudaSuccess) {                                                     \
            printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__);       \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

__global__ void check(fp::elem *o, const fp::elem *x, const fp::elem *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    o[3 * i] = fp::mul_int(x[i], y[i]);
    o[3 * i + 1] = fp::mul_fp64(x[i], y[i]);
    o[3 * i + 2] = fp_per_product::mul(x[i], y[i]);
}

template <int V>
__global__ void __launch_bounds__(256) chain(fp::elem *out, const fp::elem *x, const fp::elem *y, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    fp::elem a = x[i], b = y[i];
    for (int k = 0; k < iters; k++) a = V == 0 ? fp::mul_int(a, b) : V == 1 ? fp::mul_fp64(a, b) : fp_per_product::mul(a, b);
    out[i] = a;
}

int main() {
    const int n = 132 * 8 * 256 * 2;
    const uint32_t P[12] = {0xffffaaabu, 0xb9feffffu, 0xb153ffffu, 0x1eabfffeu, 0xf6b0f624u, 0x6730d2a0u,
                            0xf38512bfu, 0x64774b84u, 0x434bacd7u, 0x4b1ba7b6u, 0x397fe69au, 0x1a0111eau};
    std::vector<fp::elem> hx(n), hy(n);
    srand(1);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 12; k++) {
            hx[i].l[k] = ((uint32_t)rand() << 16) ^ (uint32_t)rand();
            hy[i].l[k] = ((uint32_t)rand() << 16) ^ (uint32_t)rand();
        }
    for (int i = 0; i < n; i++) hx[i].l[11] %= P[11], hy[i].l[11] %= P[11];  // below p
    // Edge values: 0, p − 1 (squared and times a random value), 1.
    memset(&hx[0], 0, 48);
    memset(&hy[0], 0, 48);
    memcpy(&hx[1], P, 48), hx[1].l[0] -= 1;
    hy[1] = hx[1];
    hx[2] = hx[1];
    memset(&hy[3], 0, 48), hy[3].l[0] = 1;
    fp::elem *dx, *dy, *o;
    CK(cudaMalloc(&dx, n * 48));
    CK(cudaMalloc(&dy, n * 48));
    CK(cudaMalloc(&o, 3 * n * 48));
    CK(cudaMemcpy(dx, hx.data(), n * 48, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, hy.data(), n * 48, cudaMemcpyHostToDevice));
    check<<<n / 256, 256>>>(o, dx, dy, n);
    CK(cudaDeviceSynchronize());
    std::vector<fp::elem> h(3 * n);
    CK(cudaMemcpy(h.data(), o, 3 * n * 48, cudaMemcpyDeviceToHost));
    int bad_fp64 = 0, bad_old = 0;
    for (int i = 0; i < n; i++) {
        bad_fp64 += memcmp(&h[3 * i], &h[3 * i + 1], 48) != 0;
        bad_old += memcmp(&h[3 * i], &h[3 * i + 2], 48) != 0;
    }
    printf("check against the integer CIOS on %d inputs: fp64 %d mismatches, per-product %d mismatches\n", n, bad_fp64, bad_old);
    int clock_khz = 0;
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int iters = 256;
    const char *names[3] = {"int CIOS", "fp64 biased (in use)", "fp64 per-product bias"};
    for (int v = 0; v < 3; v++) {
        float best = 1e9;
        for (int rep = 0; rep < 7; rep++) {
            CK(cudaEventRecord(e0));
            if (v == 0) chain<0><<<n / 256, 256>>>(o, dx, dy, iters);
            else if (v == 1) chain<1><<<n / 256, 256>>>(o, dx, dy, iters);
            else chain<2><<<n / 256, 256>>>(o, dx, dy, iters);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (rep >= 2 && ms < best) best = ms;  // two warm-ups
        }
        const double warp_muls = (double)n * iters / 32, sched = 4.0 * sms;
        printf("%-22s %8.3f ms  %.1f cycles per warp product per scheduler (at %d MHz)\n", names[v], best,
               best * 1e-3 * clock_khz * 1e3 * sched / warp_muls, clock_khz / 1000);
    }
    // The chains agree too (same inputs, same number of products).
    std::vector<fp::elem> c(3 * n);
    for (int v = 0; v < 3; v++) {
        if (v == 0) chain<0><<<n / 256, 256>>>(o + v * n, dx, dy, 8);
        else if (v == 1) chain<1><<<n / 256, 256>>>(o + v * n, dx, dy, 8);
        else chain<2><<<n / 256, 256>>>(o + v * n, dx, dy, 8);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(c.data(), o, 3 * n * 48, cudaMemcpyDeviceToHost));
    int diff = 0;
    for (int i = 0; i < n; i++) diff += memcmp(&c[i], &c[n + i], 48) != 0 || memcmp(&c[i], &c[2 * n + i], 48) != 0;
    printf("chains of 8 products: %d results differ\n", diff);
    return bad_fp64 || bad_old || diff;
}
