/*
 * roles.c — the table of stream roles (see plan.h): one row per pp_role_t, in enum order. The
 * executor creates one stream per row on every device it owns, at the row's priority, or, for a
 * per-peer row, one per peer device it talks with (send to q, receive from q), so a transfer waits
 * only for the transfers of its own directed pair and never for an unrelated one; traces draw one
 * track per row. Communication runs at the greater priority so that a transfer is never queued
 * behind compute. The host copies of run.offload (offload: device to host, load: host to
 * device) run on the copy engines at the least priority: whatever kernel is queued goes first, so
 * a copy never delays compute. overlap is a device's second compute stream, for the backward half
 * of an overlapped pair (DualPipeV), so the GPU can run it beside the forward half on compute.
 * reduce carries the gradient reductions across the data-parallel replicas (REDUCE, one collective
 * per stage and bucket), at the greater priority like the transfers. A new role is one row here,
 * one enum value, and the op kinds the lowering puts on it.
 */
#include "plan.h"

/* clang-format off */
const pp_role_row_t pp_role_rows[PP_ROLE_COUNT] = {
    /*                   name       prio  per_peer computes */
    [PP_ROLE_COMPUTE] = {"compute", 0,    0,       1},
    [PP_ROLE_SEND]    = {"send",    1,    1,       0},
    [PP_ROLE_RECV]    = {"recv",    1,    1,       0},
    [PP_ROLE_OFFLOAD] = {"offload", 0,    0,       0},
    [PP_ROLE_LOAD]    = {"load",    0,    0,       0},
    [PP_ROLE_OVERLAP] = {"overlap", 0,    0,       1},
    [PP_ROLE_REDUCE]  = {"reduce",  1,    0,       0},
};
/* clang-format on */

/* The stream each op kind runs on. */
static const pp_role_t kind_role[PP_ACT_COUNT] = {
    [PP_ACT_F] = PP_ROLE_COMPUTE,       [PP_ACT_B] = PP_ROLE_COMPUTE,
    [PP_ACT_I] = PP_ROLE_COMPUTE,       [PP_ACT_W] = PP_ROLE_COMPUTE,
    [PP_ACT_SEND_F] = PP_ROLE_SEND,     [PP_ACT_SEND_B] = PP_ROLE_SEND,
    [PP_ACT_RECV_F] = PP_ROLE_RECV,     [PP_ACT_RECV_B] = PP_ROLE_RECV,
    [PP_ACT_OFFLOAD] = PP_ROLE_OFFLOAD, [PP_ACT_RELOAD] = PP_ROLE_LOAD,
    [PP_ACT_REDUCE] = PP_ROLE_REDUCE,
};

pp_role_t pp_role_of_kind(pp_action_kind_t k)
{
    return (int)k >= 0 && k < PP_ACT_COUNT ? kind_role[k] : PP_ROLE_COMPUTE;
}
