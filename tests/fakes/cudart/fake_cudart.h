/* The CUDA runtime test double's internals (device.c has the overview). */
#ifndef FAKE_CUDART_H
#define FAKE_CUDART_H

#include <cuda.h>
#include <cuda_runtime_api.h>

cudaError_t fake_cudart_err(cudaError_t e); /* records e as the last error */
cudaError_t fake_cudart_init(void);
cudaError_t fake_cudart_bind(void);

#endif
