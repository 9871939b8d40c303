#ifndef OCTET_RUNTIME_CORE_CUDADRIVER_H
#define OCTET_RUNTIME_CORE_CUDADRIVER_H

// The CUDA driver (libcuda.so.1) is opened with dlopen on first use rather
// than linked, so that octet-run starts, parses its command line, prints
// --help and --version and checks the files it names on a host with no
// NVIDIA driver at all; only setting up the GPU needs the driver.
// CudaDriver.cpp defines every cu* entry point the runtime calls, each
// forwarding to the driver's own; a call made when the driver could not be
// loaded returns CUDA_ERROR_NOT_INITIALIZED.

#include "support/Status.h"

namespace octet {

// Loads the driver (once; later calls return the first outcome). The error
// names the library, the loader's reason and the fix.
Status loadCudaDriver();

} // namespace octet

#endif
