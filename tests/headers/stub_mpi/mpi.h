/* A stand-in for mpi.h that includes nothing, for scripts/check-headers-alone: Open MPI's mpi.h
 * includes <stddef.h> (and so gives NULL and size_t to whatever includes it), MPICH's does not, so a
 * tandem header that leans on it builds with one MPI and not the other. Against this one such a
 * header fails on any host. Only what tandem's public headers name; syntax checks only, never linked. */
#ifndef TANDEM_STUB_MPI_H
#define TANDEM_STUB_MPI_H
typedef struct tandem_stub_mpi_comm* MPI_Comm;
typedef int MPI_Fint;
#define MPI_COMM_WORLD ((MPI_Comm)0)
#endif
