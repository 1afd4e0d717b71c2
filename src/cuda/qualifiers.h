// CUDA's function qualifiers for the sources that the host compiler also compiles (no nvcc: the
// host emulation, docs/cuda.md, and the persistent bodies' host driver, persistent_host.cpp).
// They mean nothing on the host, so they are defined away here, the one place that does it;
// under nvcc this header does nothing. A toolkit header included later keeps these (its own
// definitions are guarded by !defined(__host__) etc. outside nvcc).
#pragma once

#if !defined(__CUDACC__)
#ifndef __host__
#define __host__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __global__
#define __global__
#endif
#endif
