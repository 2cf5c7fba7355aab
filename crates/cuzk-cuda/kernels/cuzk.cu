// The one translation unit of cuzk's kernels; build.rs compiles it into a fatbin.
#include "ntt/ntt.cuh"
#include "groth16/pointwise.cuh"
#include "ff/test_ops.cuh"
// Curve formulas: no kernel uses them yet (tests/host_arith.rs checks them on the
// host); included so nvcc checks them too.
#include "ec/g1.cuh"
