/*
 * transport.h — the one table of transports: how the bytes of a SEND/RECV pair move.
 *
 * Plain C (no CUDA header), so the scheduler core (config, lower, validate, simulate, report) asks
 * the same rows the executor does. Each row gives the name, whether it may be chosen for stage
 * boundaries across devices (`pipeline.transport`), and how its two halves behave: the send half
 * is posted on the sender's stream and the receive half on the receiver's, separately, so a
 * process can post just the end it owns (p2p.h posts them). A new transport is one enum value,
 * one row here and one row of functions in p2p.c.
 *
 * `auto` is a row too, but never the link of an op: it asks transport_for_boundary to pick each
 * boundary's transport by where its two ends are (pp_reach_t), from the rows' `pick` column.
 */
#ifndef PP_TRANSPORT_H
#define PP_TRANSPORT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pp_transport {
    PP_TRANSPORT_NONE = 0, /* not a transfer (a compute op) */
    PP_TRANSPORT_LOCAL,    /* both stages on one device */
    PP_TRANSPORT_PEER,     /* cudaMemcpy between devices (peer access, or staged by the driver) */
    PP_TRANSPORT_NCCL,     /* ncclSend / ncclRecv */
    PP_TRANSPORT_SHARED,   /* two pipeline devices on one CUDA device: a device-local copy */
    PP_TRANSPORT_IPC,      /* a copy-engine copy into the receiver's slot, opened through CUDA IPC
                              across processes of one host, met through flags in shared memory */
    PP_TRANSPORT_AUTO,     /* `pipeline.transport: auto`: each boundary the row its reach picks */
    PP_TRANSPORT_COUNT
} pp_transport_t;

/* Where the two ends of a stage boundary are, nearest first. */
typedef enum pp_reach {
    PP_REACH_DEVICE = 0, /* one pipeline device */
    PP_REACH_GPU,        /* two pipeline devices on one CUDA device of one host */
    PP_REACH_PROCESS,    /* two CUDA devices of one process */
    PP_REACH_HOST,       /* two processes of one host */
    PP_REACH_NETWORK,    /* two hosts */
    PP_REACH_COUNT
} pp_reach_t;

typedef struct pp_transport_row {
    const char *name;      /* as written in `pipeline.transport` and printed */
    int selectable;        /* 1: a value of `pipeline.transport` (boundaries across devices) */
    int crosses_devices;   /* 1: the ends are on two devices (costs transfer time, counts bytes) */
    int send_moves_bytes;  /* 1: the send half moves the bytes into the receiver's buffer and the
                              receive half posts nothing: the RECV completes with the SEND */
    int needs_pairing;     /* 1: one thread posting both halves must post them together (one
                              NCCL group), in the same order on both sides */
    int graph_capturable;  /* 1: a CUDA graph can capture both halves */
    int crosses_processes; /* 1: the two ends may belong to two processes */
    const char *link;      /* the row of model/gpu.h's link table that prices a transfer (NULL:
                              none, the ends are on one device) */
    int pick[PP_REACH_COUNT]; /* how much `auto` prefers this row at each reach: the highest
                                 wins; 0: never picked there */
} pp_transport_row_t;

/* The row of transport t (NONE's row for a value out of range). */
const pp_transport_row_t *transport_row(pp_transport_t t);

/* The transport of a stage boundary whose ends are `reach` apart, under `selected`
 * (pipeline.transport): within one pipeline device or one GPU, the row the table picks there
 * (local, shared), whatever was selected; farther, `selected`, or under auto the row the table
 * picks at that reach (within a process peer, between processes and hosts nccl). The one place
 * this choice is made (job_boundary_transport gives it the job's layout). */
pp_transport_t transport_for_boundary(pp_reach_t reach, pp_transport_t selected);

/* "device", "GPU", "process", "host", "network": a reach for messages. */
const char *transport_reach_name(pp_reach_t reach);

/* transport_row(t)->name. */
const char *transport_name(pp_transport_t t);

/* The selectable transport called `name`; -1 when none. */
int transport_find(const char *name);

/* "peer, nccl, auto": the selectable names, for messages. */
void transport_list(char *buf, size_t size);

/* "nccl, auto": the selectable names that can carry a boundary between two processes (crosses
 * processes, or picks a row that does), for messages. */
void transport_list_crossing(char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* PP_TRANSPORT_H */
