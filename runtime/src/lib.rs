pub use kplace_abi as abi;
