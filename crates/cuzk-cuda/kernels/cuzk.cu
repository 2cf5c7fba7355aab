// The one translation unit of cuzk's kernels; build.rs compiles it into a fatbin.
#include "ntt/ntt.cuh"
#include "groth16/pointwise.cuh"
#include "groth16/products.cuh"
#include "ff/test_ops.cuh"
#include "msm/pippenger.cuh"
#include "msm/split.cuh"
#include "ec/fixed_base.cuh"
#include "ec/decode.cuh"
