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
 * with stream memory operations, so no kernel spins and no SM is taken.
 */
#include "transport.h"

#include <string.h>

/* clang-format off */
static const pp_transport_row_t rows[PP_TRANSPORT_COUNT] = {
    /*                     name     sel cross moves pair graph procs */
    [PP_TRANSPORT_NONE]  = {"none",  0,  0,    0,    0,   1,    0},
    [PP_TRANSPORT_LOCAL] = {"local", 0,  0,    1,    0,   1,    0},
    [PP_TRANSPORT_PEER]  = {"peer",  1,  1,    1,    0,   1,    0},
    [PP_TRANSPORT_NCCL]  = {"nccl",  1,  1,    0,    1,   1,    1},
    [PP_TRANSPORT_SHARED]= {"shared",0,  1,    1,    0,   1,    0},
    [PP_TRANSPORT_IPC]   = {"ipc",   1,  1,    0,    0,   1,    1},
};
/* clang-format on */

const pp_transport_row_t *transport_row(pp_transport_t t)
{
    return (int)t >= 0 && t < PP_TRANSPORT_COUNT ? &rows[t] : &rows[PP_TRANSPORT_NONE];
}

pp_transport_t transport_for_boundary(int a, int b, int cuda_a, int cuda_b, pp_transport_t selected)
{
    if (a == b) return PP_TRANSPORT_LOCAL;
    return cuda_a == cuda_b ? PP_TRANSPORT_SHARED : selected;
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

void transport_list(char *buf, size_t size)
{
    buf[0] = '\0';
    for (int t = 0; t < PP_TRANSPORT_COUNT; t++) {
        if (!rows[t].selectable) continue;
        if (buf[0]) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, rows[t].name, size - strlen(buf) - 1);
    }
}
