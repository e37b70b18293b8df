/*
 * transport.c — the rows of the transport table (see transport.h), in enum order. Plain C: it is
 * built into the scheduler core as well as used by p2p.c.
 *
 * local: both halves on one device; a device-local copy on the sender's send stream (the
 * consumer reads its input from its own slot, see docs/architecture.md). peer: one copy on the
 * sender's send stream, into the receiver's slot; capturable where peer access makes it a plain
 * cudaMemcpyAsync (the staged cudaMemcpyPeerAsync is not, and the executor then falls back to
 * eager steps). nccl: ncclSend and ncclRecv, one group when one thread posts both. shared: two
 * pipeline devices mapped onto one CUDA device (`pipeline.devices: [0, 0]`), each with its own
 * streams and memory: a device-local copy on the sender's send stream, as local, but between two
 * pipeline devices (it costs a transfer in the simulator and counts as bytes sent). ipc: the
 * sender's copy engine writes into the receiver's slot, which the sender opened through CUDA IPC
 * when the receiver is another process of the host (in one process, the slot itself); the
 * receive half moves nothing but meets the send half through two flags in host memory the two
 * processes share (the receiver's slot is free; the bytes have landed), waited on and written
 * with stream memory operations, so no kernel spins and no SM is taken. auto: no transfer of its
 * own; each boundary gets the row whose `pick` is highest at its reach: local on one device,
 * shared on one GPU, peer within a process, ipc between the processes of one host (bench/NOTES.md:
 * as fast as peer copies, where nccl's kernels cost 2-3 %), nccl between hosts. `link` names the
 * row of the link table (model/gpu.c) that prices the transfer when cost.link is not set.
 */
#include "transport.h"

#include <string.h>

/* clang-format off */
static const pp_transport_row_t rows[PP_TRANSPORT_COUNT] = {
    /*                     name     sel cross moves pair graph procs link
                                    pick at: device gpu process host network */
    [PP_TRANSPORT_NONE]  = {"none",  0,  0,    0,    0,   1,    0,   NULL,
                                    {0, 0, 0, 0, 0}},
    [PP_TRANSPORT_LOCAL] = {"local", 0,  0,    1,    0,   1,    0,   NULL,
                                    {1, 0, 0, 0, 0}},
    [PP_TRANSPORT_PEER]  = {"peer",  1,  1,    1,    0,   1,    0,   "nvlink-peer",
                                    {0, 0, 2, 0, 0}},
    [PP_TRANSPORT_NCCL]  = {"nccl",  1,  1,    0,    1,   1,    1,   "nvlink-nccl",
                                    {0, 0, 1, 1, 1}},
    [PP_TRANSPORT_SHARED]= {"shared",0,  1,    1,    0,   1,    0,   "nvlink-peer",
                                    {0, 1, 0, 0, 0}},
    [PP_TRANSPORT_IPC]   = {"ipc",   1,  1,    0,    0,   1,    1,   "nvlink-peer",
                                    {0, 0, 0, 2, 0}},
    [PP_TRANSPORT_AUTO]  = {"auto",  1,  0,    0,    0,   1,    0,   NULL,
                                    {0, 0, 0, 0, 0}},
};
/* clang-format on */

static const char *const reach_names[PP_REACH_COUNT] = {"device", "GPU", "process", "host",
                                                        "network"};

const pp_transport_row_t *transport_row(pp_transport_t t)
{
    return (int)t >= 0 && t < PP_TRANSPORT_COUNT ? &rows[t] : &rows[PP_TRANSPORT_NONE];
}

/* The row that prefers `reach` most (NONE when no row picks it). */
static pp_transport_t picked_at(pp_reach_t reach)
{
    pp_transport_t best = PP_TRANSPORT_NONE;
    for (int t = 0, most = 0; t < PP_TRANSPORT_COUNT; t++)
        if (rows[t].pick[reach] > most) best = (pp_transport_t)t, most = rows[t].pick[reach];
    return best;
}

pp_transport_t transport_for_boundary(pp_reach_t reach, pp_transport_t selected)
{
    if ((int)reach < 0 || reach >= PP_REACH_COUNT) return PP_TRANSPORT_NONE;
    /* within a pipeline device or a GPU the ends are one device's memory: no selection applies */
    if (reach <= PP_REACH_GPU || selected == PP_TRANSPORT_AUTO) return picked_at(reach);
    return selected;
}

const char *transport_reach_name(pp_reach_t reach)
{
    return (int)reach >= 0 && reach < PP_REACH_COUNT ? reach_names[reach] : "?";
}

const char *transport_name(pp_transport_t t)
{
    return transport_row(t)->name;
}

int transport_find(const char *name)
{
    for (int t = 0; t < PP_TRANSPORT_COUNT; t++)
        if (rows[t].selectable && !strcmp(rows[t].name, name)) return t;
    return -1;
}

/* 1 when selecting t carries a boundary between two processes, of one host or of two. */
static int carries_across(pp_transport_t t)
{
    return transport_row(transport_for_boundary(PP_REACH_HOST, t))->crosses_processes &&
           transport_row(transport_for_boundary(PP_REACH_NETWORK, t))->crosses_processes;
}

/* The selectable names (only those that carry a boundary between processes, with `crossing`). */
static void list_rows(char *buf, size_t size, int crossing)
{
    buf[0] = '\0';
    for (int t = 0; t < PP_TRANSPORT_COUNT; t++) {
        if (!rows[t].selectable || (crossing && !carries_across((pp_transport_t)t))) continue;
        if (buf[0]) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, rows[t].name, size - strlen(buf) - 1);
    }
}

void transport_list(char *buf, size_t size)
{
    list_rows(buf, size, 0);
}

void transport_list_crossing(char *buf, size_t size)
{
    list_rows(buf, size, 1);
}
