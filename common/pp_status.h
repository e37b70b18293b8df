/*
 * pp_status.h — the error values every ppsched module returns, and the small types shared by the
 * scheduler core, the stages, the kernels and the transports.
 *
 * Rules: a function that can fail returns pp_status_t. The place that detects a failure prints one
 * message to stderr (file:line for internal and library errors, file:line:col for YAML input, the
 * device/position/action for a bad schedule) and returns the status; callers pass it up with
 * PP_CHECK without printing again. Only main() and test drivers turn a status into an exit code:
 * input and usage errors exit 2, everything else exits 1 (pp_status_exit_code).
 *
 * Plain C11: no CUDA header here (the CUDA checks live in pp_cuda.h).
 */
#ifndef PP_STATUS_H
#define PP_STATUS_H

#include <stdio.h>

typedef enum pp_status {
    PP_OK = 0,
    PP_ERR_USAGE,   /* bad command line */
    PP_ERR_INPUT,   /* bad YAML, CSV or schedule */
    PP_ERR_NOMEM,   /* host allocation failed */
    PP_ERR_IO,      /* a file could not be read or written */
    PP_ERR_CUDA,    /* CUDA runtime error */
    PP_ERR_CUBLAS,  /* cuBLAS error */
    PP_ERR_NCCL,    /* NCCL error */
    PP_ERR_DEVICE,  /* no device, or not enough devices / device memory */
    PP_ERR_TIMEOUT, /* a wait ran past its timeout */
    PP_ERR_INTERNAL /* a broken invariant: a bug in ppsched */
} pp_status_t;

/* A short name for a status ("input error", "CUDA error", ...). */
static inline const char *pp_status_str(pp_status_t s)
{
    switch (s) {
    case PP_OK: return "ok";
    case PP_ERR_USAGE: return "usage error";
    case PP_ERR_INPUT: return "input error";
    case PP_ERR_NOMEM: return "out of host memory";
    case PP_ERR_IO: return "I/O error";
    case PP_ERR_CUDA: return "CUDA error";
    case PP_ERR_CUBLAS: return "cuBLAS error";
    case PP_ERR_NCCL: return "NCCL error";
    case PP_ERR_DEVICE: return "device error";
    case PP_ERR_TIMEOUT: return "timeout";
    case PP_ERR_INTERNAL: return "internal error";
    }
    return "unknown error";
}

/* The process exit code for a status: 0 ok, 2 usage/input, 1 anything else. */
static inline int pp_status_exit_code(pp_status_t s)
{
    if (s == PP_OK) return 0;
    if (s == PP_ERR_USAGE || s == PP_ERR_INPUT) return 2;
    return 1;
}

/* Pass a failure up. The failing callee has already printed its message. */
#define PP_CHECK(call)                                                                             \
    do {                                                                                           \
        pp_status_t pp_check_s_ = (call);                                                          \
        if (pp_check_s_ != PP_OK) return pp_check_s_;                                              \
    } while (0)

/* Same, for functions with a single cleanup path: stores the status in `st` and jumps to `label`.
 */
#define PP_CHECK_GOTO(call, st, label)                                                             \
    do {                                                                                           \
        (st) = (call);                                                                             \
        if ((st) != PP_OK) goto label;                                                             \
    } while (0)

/* Report a broken invariant or a failed host allocation at file:line and return `status`. */
#define PP_FAIL(status, ...)                                                                       \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        return (status);                                                                           \
    } while (0)

/* A problem the user can act on (no device, a bad environment variable, a file that cannot be
 * written): the message alone after "ppsched: ", no source location, which is for PP_FAIL's
 * broken invariants and failed library calls. */
#define PP_REFUSE(status, ...)                                                                     \
    do {                                                                                           \
        fputs("ppsched: ", stderr);                                                                \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        return (status);                                                                           \
    } while (0)

/* Check a host allocation; on NULL print file:line and return PP_ERR_NOMEM. */
#define PP_ALLOC_CHECK(ptr)                                                                        \
    do {                                                                                           \
        if ((ptr) == NULL) PP_FAIL(PP_ERR_NOMEM, "out of host memory allocating %s", #ptr);        \
    } while (0)

/* Room for one more element in the growing array `a` (of `cap` elements, `n` of them used): doubles
 * cap, from `first`, when the array is full; on a failed realloc prints file:line and returns
 * PP_ERR_NOMEM, leaving `a` and `cap` as they were. Plain C (the new pointer is assigned from
 * void *). */
#define PP_GROW(a, n, cap, first)                                                                  \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            int pp_grow_cap_ = (cap) ? 2 * (cap) : (first);                                        \
            void *pp_grow_p_ = realloc((a), sizeof *(a) * (size_t)pp_grow_cap_);                   \
            if (!pp_grow_p_) PP_FAIL(PP_ERR_NOMEM, "out of host memory growing %s", #a);           \
            (a) = pp_grow_p_;                                                                      \
            (cap) = pp_grow_cap_;                                                                  \
        }                                                                                          \
    } while (0)

/* "device" or "devices" after a count n: one place for the plural of every message and report. */
static inline const char *pp_plural(long n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* Storage type of activations and parameters. Accumulators and optimizer state are always fp32. */
typedef enum pp_dtype { PP_DTYPE_FP32 = 0, PP_DTYPE_BF16 = 1 } pp_dtype_t;

static inline size_t pp_dtype_size(pp_dtype_t t)
{
    return t == PP_DTYPE_BF16 ? 2 : 4;
}
static inline const char *pp_dtype_name(pp_dtype_t t)
{
    return t == PP_DTYPE_BF16 ? "bf16" : "fp32";
}

/* Most GPUs one process drives, and the most stages, micro-batches a schedule may have. */
#define PP_MAX_DEVICES       64
#define PP_MAX_STAGES        1024
#define PP_MAX_MICRO_BATCHES 65536

#endif /* PP_STATUS_H */
