// A stand-in for the CUDA runtime API, for testing the cuda backend's host side without a GPU.
//
// Only the names kernels/cuda_backend.cpp, cuda_device.cpp and cuda_util.h use are here, with the
// real ones' signatures. tests/fake_cuda/fake_cuda.cpp implements them over host memory: "device"
// allocations are ordinary heap blocks, copies are memcpy done at call time (which keeps stream
// order), and the parity "kernel" is the host emulator running the real kernel bodies. Every copy
// and every pointer a launch would dereference is checked against the allocations and
// registrations the fake knows, so a layout bug in the backend (an arena offset past the end, a
// copy from unregistered memory treated as registered, a mapped pointer outside its region)
// fails the test instead of silently working on the CPU. Test knobs: fake_cuda.h.
//
// Built only into graid_kernels_fake (tests); the real header is used everywhere else.
#pragma once

#include <cstddef>

#define GRAID_FAKE_CUDA_RUNTIME 1
// The runtime version the fake stands for. GRAID_FAKE_CUDART_VERSION picks another, for
// compile checks of the code paths of older toolkits (tests/fake_cuda/CMakeLists.txt): 12080
// (12.8 and 12.9: cudaMemcpyBatchAsync takes a failIdx) or below 12080 (no batched copy at all).
#ifdef GRAID_FAKE_CUDART_VERSION
#define CUDART_VERSION GRAID_FAKE_CUDART_VERSION
#else
#define CUDART_VERSION 13000
#endif

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorSetOnActiveProcess = 36,
  cudaErrorHostMemoryAlreadyRegistered = 712,
  cudaErrorHostMemoryNotRegistered = 713,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorIllegalAddress = 700,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
  cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrGlobalMemoryBusWidth = 37,
  cudaDevAttrCanUseHostPointerForRegisteredMem = 91,
};

#if CUDART_VERSION >= 12080
enum cudaMemcpySrcAccessOrder {
  cudaMemcpySrcAccessOrderInvalid = 0,
  cudaMemcpySrcAccessOrderStream = 1,
  cudaMemcpySrcAccessOrderDuringApiCall = 2,
  cudaMemcpySrcAccessOrderAny = 3,
};

struct cudaMemLocation {
  int type;
  int id;
};

struct cudaMemcpyAttributes {
  cudaMemcpySrcAccessOrder srcAccessOrder;
  cudaMemLocation srcLocHint;
  cudaMemLocation dstLocHint;
  unsigned int flags;
};

#endif  // CUDART_VERSION >= 12080

struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  int multiProcessorCount;
  int major;
  int minor;
  int canMapHostMemory;
};

struct FakeCudaStream;
struct FakeCudaEvent;
using cudaStream_t = FakeCudaStream*;
using cudaEvent_t = FakeCudaEvent*;

inline constexpr unsigned cudaStreamNonBlocking = 0x01;
inline constexpr unsigned cudaDeviceScheduleBlockingSync = 0x04;
inline constexpr unsigned cudaDeviceMapHost = 0x08;
inline constexpr unsigned cudaHostRegisterPortable = 0x01;
inline constexpr unsigned cudaHostRegisterMapped = 0x02;

const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);
// Per thread, as in the real runtime: every failing call sets it; Get returns and clears it.
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int device);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaSetDeviceFlags(unsigned flags);
cudaError_t cudaFree(void* p);

cudaError_t cudaMalloc(void** p, std::size_t size);
cudaError_t cudaMallocHost(void** p, std::size_t size);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaHostRegister(void* p, std::size_t size, unsigned flags);
cudaError_t cudaHostUnregister(void* p);
cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned flags);

cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind);
cudaError_t cudaMemset(void* p, int value, std::size_t n);
cudaError_t cudaMemsetAsync(void* p, int value, std::size_t n, cudaStream_t s);
#if CUDART_VERSION >= 13000
cudaError_t cudaMemcpyBatchAsync(void* const* dsts, const void* const* srcs,
                                 const std::size_t* sizes, std::size_t count,
                                 cudaMemcpyAttributes* attrs, std::size_t* attrs_idxs,
                                 std::size_t num_attrs, cudaStream_t s);
#elif CUDART_VERSION >= 12080
cudaError_t cudaMemcpyBatchAsync(void** dsts, void** srcs, std::size_t* sizes, std::size_t count,
                                 cudaMemcpyAttributes* attrs, std::size_t* attrs_idxs,
                                 std::size_t num_attrs, std::size_t* fail_idx, cudaStream_t s);
#endif
