//! The harness of the host-simulator tests: a stage's CPU reference, run through the CPU block
//! library's kernels called directly (their table entries, not the library's entry symbol,
//! which this library shares), and the addresses the CUDA plans are given, which on the host
//! simulator are host addresses.

#![allow(dead_code)]

use kplace_abi::export::Config;
use kplace_abi::{Kernel, MemorySpace, Tile};
use kplace_testkit::abi::{Buffer, Stage, create};

/// Runs the CPU kernel `kernel` over `stage` as the executor does: one launch per tile in
/// order, or one over the whole of axis 0.
pub fn cpu(kernel: &'static Kernel, stage: &Stage<'_>, inputs: &[&Buffer], output: &mut Buffer) {
    let stage = stage.clone().in_memory(MemorySpace::HOST);
    let state = create(kernel, &stage).unwrap_or_else(|e| panic!("CPU create: {e:?}"));
    let inputs: Vec<_> = inputs.iter().map(|b| b.input(MemorySpace::HOST)).collect();
    for tile in tiles(&stage) {
        state
            .launch_ports(
                &inputs,
                &[output.output(MemorySpace::HOST)],
                tile,
                std::ptr::null_mut(),
            )
            .unwrap_or_else(|e| panic!("CPU launch: {e:?}"));
    }
}

/// The tiles the executor launches for `stage`.
pub fn tiles(stage: &Stage<'_>) -> Vec<Tile> {
    let rows = stage.inputs[0].shape[0];
    let tile = stage.split.map_or(rows, |(_, t)| t);
    (0..rows / tile)
        .map(|i| Tile {
            begin: i * tile,
            count: tile,
        })
        .collect()
}

/// A CUDA block's plan for `stage`, its ports in device memory.
pub fn plan<P>(stage: &Stage<'_>, from_config: impl FnOnce(&Config<'_>) -> P) -> P {
    stage
        .clone()
        .in_memory(MemorySpace::DEVICE)
        .with_config(from_config)
}

/// The (host) address a plan is given for a buffer.
pub fn at(buffer: &Buffer) -> u64 {
    buffer.input(MemorySpace::DEVICE).data as u64
}

/// A 64-byte aligned scratch buffer of at least `bytes` bytes, zeroed.
pub fn scratch(bytes: u64) -> Buffer {
    let words = bytes.div_ceil(4).max(1);
    Buffer::from_f32(&[words], kplace_abi::Dtype::F32, &vec![0.0; words as usize])
}
