/*
 * mpi_none.c — the build without MPI (no mpicc found, or MPI=off): there is no MPI row of the
 * group table, so every run is the single process (pp_group.h).
 */
#include "pp_group.h"

const pp_group_ops_t *group_mpi_ops(void)
{
    return 0;
}
