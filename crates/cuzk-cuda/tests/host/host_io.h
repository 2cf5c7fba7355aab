// Reading and writing field elements as hex for the host test programs: 12 words of
// 8 hex digits, most significant first.
#pragma once
#include <cstdio>

#include "cuda_shim.h"
#include "ff/fp.cuh"

static bool read(fp::elem &e) {
    for (int i = 11; i >= 0; i--)
        if (std::scanf("%8x", &e.l[i]) != 1) return false;
    return true;
}

static void write(const fp::elem &e) {
    for (int i = 11; i >= 0; i--) std::printf("%08x", e.l[i]);
}
