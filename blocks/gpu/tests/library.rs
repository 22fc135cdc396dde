//! The library's exported table, as the runtime reads it (this test does not link the CPU
//! block library, whose entry symbol has the same name).

use kplace_abi::{ABI_VERSION, DeviceKind, MemorySpace};
use kplace_testkit::abi::{Loaded, text};

#[test]
fn the_table_lists_twelve_cuda_blocks_under_the_cpu_library_s_names() {
    // SAFETY: the entry returns a pointer to a static table.
    let lib = Loaded::linked(unsafe { &*kplace_blocks_gpu::kplace_library_entry() });
    assert_eq!(lib.table.abi_version, ABI_VERSION);
    assert_eq!(text(lib.table.name), "kplace-blocks-gpu");
    let names: Vec<&str> = lib.kernels().iter().map(|k| text(k.name)).collect();
    assert_eq!(
        names,
        [
            "blocks.convert",
            "blocks.window",
            "blocks.fft",
            "blocks.power",
            "blocks.magnitude",
            "blocks.mean",
            "blocks.beamform",
            "blocks.fir",
            "blocks.combine",
            "blocks.transpose",
            "blocks.add",
            "blocks.multiply"
        ]
    );
    for k in lib.kernels() {
        assert_eq!(k.device, DeviceKind::CUDA, "{}", text(k.name));
        assert_eq!(k.memory, MemorySpace::DEVICE, "{}", text(k.name));
    }
}
