//! kplace's CUDA kernel library (`libkplace_gpu.so`).
//!
//! The GPU backend (cuFFT plus CUDA C compiled by NVRTC) is built in a later step. Until then
//! this library is a valid, loadable kernel library that offers no kernels, so a placement
//! that puts a stage on a GPU fails at plan time with a message naming the missing kernel,
//! rather than at run time.

kplace_abi::export_library!(c"kplace-gpu", []);
