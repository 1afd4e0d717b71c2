// Host emulation of the CUDA backend (docs/cuda.md, "Host emulation"): the stand-in for cuBLAS,
// with the toolkit's names and status codes. src/cuda/emu/cublas.cpp implements it with plain
// loops and checks cuBLAS's documented argument rules on every call (a live handle, a valid
// stream, m, n, k >= 0, lda >= max(1, rows of A as stored), the same for ldb and ldc, a supported
// type / compute-type combination, alpha and beta given, every matrix inside one device
// allocation, C not overlapping A or B), and one rule of blockrnn's own: a workspace set by
// cublasSetWorkspace after the last cublasSetStream, belonging to that stream. A broken rule is
// reported on stderr and returns the status cuBLAS documents for it (or
// CUBLAS_STATUS_EXECUTION_FAILED for memory that a GPU would fault on).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};

typedef struct cublasContext* cublasHandle_t;

enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };

enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 };

enum cublasComputeType_t {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_64F_PEDANTIC = 71,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};

enum cublasMath_t {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
};

enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 };

extern "C" {
cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream);
// A device workspace for the handle's GEMMs: 256-byte aligned, inside one device allocation, and
// not a stream-ordered allocation of another stream than the handle's. cublasSetStream resets it.
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, std::size_t bytes);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

// C = alpha·op(A)·op(B) + beta·C, column-major; C is not read when beta == 0.
cublasStatus_t cublasGemmEx_64(cublasHandle_t handle, cublasOperation_t transa,
                               cublasOperation_t transb, std::int64_t m, std::int64_t n,
                               std::int64_t k, const void* alpha, const void* A,
                               cudaDataType_t Atype, std::int64_t lda, const void* B,
                               cudaDataType_t Btype, std::int64_t ldb, const void* beta, void* C,
                               cudaDataType_t Ctype, std::int64_t ldc,
                               cublasComputeType_t computeType, cublasGemmAlgo_t algo);
}
