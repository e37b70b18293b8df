/*
 * roles.c — the table of stream roles (see plan.h): one row per pp_role_t, in enum order. The
 * executor creates one stream per row on every device it owns, at the row's priority; traces
 * draw one track per row. Communication runs at the greater priority so that a transfer is never
 * queued behind compute. A new role (an offload or load stream for host copies) is one row here,
 * one enum value, and the op kinds the lowering puts on it.
 */
#include "plan.h"

static const pp_role_row_t rows[PP_ROLE_COUNT] = {
    [PP_ROLE_COMPUTE] = {"compute", 0},
    [PP_ROLE_SEND] = {"send", 1},
    [PP_ROLE_RECV] = {"recv", 1},
};

const pp_role_row_t *pp_role_row(pp_role_t r)
{
    return (int)r >= 0 && r < PP_ROLE_COUNT ? &rows[r] : &rows[PP_ROLE_COMPUTE];
}
