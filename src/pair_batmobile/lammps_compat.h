/* -*- c++ -*- ----------------------------------------------------------
   The LAMMPS API calls of the Batmobile styles that differ between the supported LAMMPS versions
   (29 Sep 2021 and 4 Feb 2025), in one place. BATMOBILE_LAMMPS_VERSION (YYYYMMDD of the LAMMPS tree the
   styles are compiled against) comes from cmake/lammps_hook.cmake. Included by the styles' .cpp files only:
   LAMMPS's own sources see our style headers but not this one. The switch sits at the stable release of
   23 Jun 2022, the first after both changes; LAMMPS 4 Jul 2026 compiles unchanged (the >= 20220623 branches).
   No style macro here: not a style header.
------------------------------------------------------------------------- */
#ifndef LMP_BATMOBILE_LAMMPS_COMPAT_H
#define LMP_BATMOBILE_LAMMPS_COMPAT_H

#include "comm.h"
#include "neigh_request.h"
#include "neighbor.h"
#include "pair.h"

#ifndef BATMOBILE_LAMMPS_VERSION
#error "BATMOBILE_LAMMPS_VERSION is not set: build the Batmobile styles through cmake/lammps_hook.cmake"
#endif

namespace LAMMPS_NS {
namespace batmobile_compat {

// Pair-style ghost communication: forward_comm_pair / reverse_comm_pair became overloads of forward_comm /
// reverse_comm.
inline void forward_comm(Comm *comm, Pair *pair)
{
#if BATMOBILE_LAMMPS_VERSION >= 20220623
  comm->forward_comm(pair);
#else
  comm->forward_comm_pair(pair);
#endif
}

inline void reverse_comm(Comm *comm, Pair *pair)
{
#if BATMOBILE_LAMMPS_VERSION >= 20220623
  comm->reverse_comm(pair);
#else
  comm->reverse_comm_pair(pair);
#endif
}

// A full neighbour list for a pair style; returns the request for accelerator-specific settings (the 2021
// KOKKOS style sets its kokkos_host/kokkos_device flags on it). In newer versions the request's fields are
// private and the list kind is a flag of Neighbor::add_request.
inline NeighRequest *request_full_list(Neighbor *neighbor, Pair *pair, int instance)
{
#if BATMOBILE_LAMMPS_VERSION >= 20220623
  NeighRequest *request = neighbor->add_request(pair, NeighConst::REQ_FULL);
  request->set_id(instance);
  return request;
#else
  const int index = neighbor->request(pair, instance);    // (may grow `requests`: read it after the call)
  NeighRequest *request = neighbor->requests[index];
  request->half = 0;
  request->full = 1;
  return request;
#endif
}

}    // namespace batmobile_compat
}    // namespace LAMMPS_NS

#endif
