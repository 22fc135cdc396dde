kplace_abi::export_library!(c"kplace-cpu", []);
