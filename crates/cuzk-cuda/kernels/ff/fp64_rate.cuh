// Which GPUs run FP64 at full rate: sm_80 and sm_90 (the compute_90 PTX also takes
// this path). There the field products run on the FP64 units (52-bit limbs); consumer
// parts (sm_86, sm_89, sm_120) run FP64 at 1/64 rate, so there they use 32-bit integer
// products. Fr (fr.cuh) and Fp (fp.cuh) choose by this one definition.
#pragma once
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 900)
#define CUZK_FULL_RATE_FP64 1
#endif
