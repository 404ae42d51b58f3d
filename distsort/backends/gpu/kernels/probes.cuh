// Instrumentation hooks of the kernels: each is empty (or 0) in the library, and a
// benchmark or the CPU emulation (tests/emulator/emu.cpp) defines it before including
// sort.cu to record or change what a pass does.
#pragma once

// DISTSORT_IO_KIND(io): which way of addressing global memory a block used (IO_* in
// tile_map.cuh).
#ifndef DISTSORT_IO_KIND
#define DISTSORT_IO_KIND(io)
#endif

// DISTSORT_STATIC_PHASE(id): a compile-time phase ran (id: the MERGE phase's index, 31
// for the whole-window mirror; windows.cuh).  DISTSORT_DIRECT_PHASE(): the first MERGE
// phase loaded its registers from global memory (`merge_first_phase`).
#ifndef DISTSORT_STATIC_PHASE
#define DISTSORT_STATIC_PHASE(id)
#endif
#ifndef DISTSORT_DIRECT_PHASE
#define DISTSORT_DIRECT_PHASE()
#endif

// DISTSORT_ASYNC=0 (benchmarks/overlap_probe.py --define) loads every tile through registers.
#ifndef DISTSORT_ASYNC
#define DISTSORT_ASYNC 1
#endif

// DISTSORT_PROBE (benchmarks/overlap_probe.py): 1 runs a pass's global loads and stores
// without its phases, 2 its phases without global memory; 0 (the library) both.
#ifndef DISTSORT_PROBE
#define DISTSORT_PROBE 0
#endif
constexpr int PROBE = DISTSORT_PROBE;
