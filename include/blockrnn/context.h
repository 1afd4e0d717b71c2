// blockrnn/context.h — process-wide execution settings: thread count and the reference switch.
//
// Threads: every op uses get_num_threads() threads for its element-wise work and its GEMMs.
// The default is the machine's core count, or the environment variable BLOCKRNN_NUM_THREADS.
//
// Reference mode: set_force_reference(true), or BLOCKRNN_FORCE_REFERENCE=1 in the environment,
// routes every op through its plain-loop reference implementation (src/ref/), the executable
// form of SPEC.md. Tests run the conformance suites in both modes.
#pragma once

namespace blockrnn {

void set_num_threads(int n);  // n >= 1, otherwise Error(kInvalidArgument)
int get_num_threads();

void set_force_reference(bool on);
bool force_reference();

// Version of the library, "MAJOR.MINOR.PATCH".
const char* version();

}  // namespace blockrnn
