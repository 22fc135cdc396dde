//! A real CUDA device through cudarc's driver API (being written).
