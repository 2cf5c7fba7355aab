// a = A·z, b = B·z, c = C·z on the device, from a circuit's compiled matrices
// (cuzk-groth16's ConstraintMatrices) and its assignment z = (inputs, aux).
//
// The aux part of z stays compact (msm/compact.cuh) and is read in place: a zero
// costs no load at all, a one no product, and the bitmaps (32 MB for a 32 GiB PoRep
// partition) sit in L2 beside the other values.
//
// The products are compressed sparse rows over z's unified index (inputs first),
// each coefficient an index into the circuit's dictionary of distinct coefficients;
// index 0 is one and index 1 minus one, the commonest, which need no product. One
// thread per row. Every value stays fully reduced, so a, b, c are bit-identical to
// the host's products whatever the order of the additions.
#pragma once
#include <stdint.h>
#include "../ff/fr.cuh"
#include "../msm/compact.cuh"

__device__ __forceinline__ bool fr_is_zero(const fr::elem &v) {
    uint32_t any = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) any |= v.l[i];
    return any == 0;
}

// out[r] = Σ_k dictionary[coefficients[k]] · z[columns[k]] over row r's non-zeros
// k ∈ [row_starts[r], row_starts[r + 1]), for r < rows; z = (inputs, aux), the aux
// values compact. `base` is subtracted from every row start: a block of rows sent on
// its own (groth16/row_blocks.rs) keeps the whole matrix's offsets, with its columns
// and coefficients from offset `base` on; the whole matrix has base 0.
extern "C" __global__ void csr_products(const uint64_t *__restrict__ row_starts, uint64_t base,
                                        const uint32_t *__restrict__ columns, const uint16_t *__restrict__ coefficients,
                                        const fr::elem *__restrict__ dictionary, const fr::elem *__restrict__ inputs,
                                        uint64_t num_inputs, const uint64_t *__restrict__ one,
                                        const uint64_t *__restrict__ zero, const uint32_t *__restrict__ offsets,
                                        const fr::elem *__restrict__ others, uint64_t num_aux, fr::elem one_mont,
                                        uint64_t rows, fr::elem *__restrict__ out) {
    const compact_scalars aux{one, zero, offsets, others, num_aux};
    for (uint64_t r = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; r < rows;
         r += (uint64_t)gridDim.x * blockDim.x) {
        fr::elem acc{{0, 0, 0, 0, 0, 0, 0, 0}};
        const uint64_t end = row_starts[r + 1] - base;
        for (uint64_t k = row_starts[r] - base; k < end; k++) {
            const uint64_t col = columns[k];
            const uint16_t id = coefficients[k];
            fr::elem v;
            if (col < num_inputs) {
                v = inputs[col];
            } else {
                uint64_t at = 0;
                const uint32_t c = aux.classify(col - num_inputs, at);
                if (c == 0) continue;
                if (c == 1) {
                    // coefficient · 1: the coefficient itself.
                    acc = id == 0   ? fr::add(acc, one_mont)
                          : id == 1 ? fr::sub(acc, one_mont)
                                    : fr::add(acc, dictionary[id]);
                    continue;
                }
                v = others[at];
            }
            if (id == 0) {
                acc = fr::add(acc, v);
            } else if (id == 1) {
                acc = fr::sub(acc, v);
            } else if (!fr_is_zero(v)) {
                acc = fr::add(acc, fr::mul(dictionary[id], v));
            }
        }
        out[r] = acc;
    }
}
