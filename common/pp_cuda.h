/*
 * pp_cuda.h — checks for CUDA runtime, cuBLAS and NCCL return codes.
 *
 * Each macro evaluates the call once; on failure it prints `file:line: <call> failed: <library
 * message>` to stderr and returns the matching pp_status_t from the enclosing function. The _GOTO
 * forms store the status and jump to a cleanup label instead. Include this only from code that
 * links the CUDA libraries (kernels/, stages/, exec/); the core folders never include it. Define
 * PP_WITH_NCCL before including to get PP_NCCL_CHECK.
 */
#ifndef PP_CUDA_H
#define PP_CUDA_H

#include "pp_status.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#ifdef PP_WITH_NCCL
#include <nccl.h>
#endif

static inline const char *pp_cublas_str(cublasStatus_t s)
{
#if defined(CUBLAS_VER_MAJOR) && (CUBLAS_VER_MAJOR >= 12)
    return cublasGetStatusString(s);
#else
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
    }
#endif
}

/* PP_OK, or PP_ERR_CUDA after printing `file:line: <call> failed: <message> (<name>)`: what
 * PP_CUDA_CHECK and its _GOTO form print and return. */
static inline pp_status_t pp_cuda_status(cudaError_t e, const char *file, int line,
                                         const char *call)
{
    if (e == cudaSuccess) return PP_OK;
    fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, call, cudaGetErrorString(e),
            cudaGetErrorName(e));
    return PP_ERR_CUDA;
}

/* PP_OK, or PP_ERR_CUBLAS after printing `file:line: <call> failed: <message>`. */
static inline pp_status_t pp_cublas_status(cublasStatus_t s, const char *file, int line,
                                           const char *call)
{
    if (s == CUBLAS_STATUS_SUCCESS) return PP_OK;
    fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, call, pp_cublas_str(s));
    return PP_ERR_CUBLAS;
}

#define PP_CUDA_CHECK(call) PP_CHECK(pp_cuda_status((call), __FILE__, __LINE__, #call))

#define PP_CUDA_CHECK_GOTO(call, st, label)                                                        \
    do {                                                                                           \
        if (pp_cuda_status((call), __FILE__, __LINE__, #call) != PP_OK) {                          \
            (st) = PP_ERR_CUDA;                                                                    \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* After a kernel launch: catches bad launch configurations without synchronizing. */
#define PP_CUDA_LAUNCH_CHECK() PP_CUDA_CHECK(cudaGetLastError())

#define PP_CUBLAS_CHECK(call) PP_CHECK(pp_cublas_status((call), __FILE__, __LINE__, #call))

#define PP_CUBLAS_CHECK_GOTO(call, st, label)                                                      \
    do {                                                                                           \
        if (pp_cublas_status((call), __FILE__, __LINE__, #call) != PP_OK) {                        \
            (st) = PP_ERR_CUBLAS;                                                                  \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#ifdef PP_WITH_NCCL
#define PP_NCCL_CHECK(call)                                                                        \
    do {                                                                                           \
        ncclResult_t pp_nccl_r_ = (call);                                                          \
        if (pp_nccl_r_ != ncclSuccess && pp_nccl_r_ != ncclInProgress) {                           \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                   \
                    ncclGetErrorString(pp_nccl_r_));                                               \
            return PP_ERR_NCCL;                                                                    \
        }                                                                                          \
    } while (0)
#endif

#endif /* PP_CUDA_H */
