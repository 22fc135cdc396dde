//! Tests of the binary as a whole, beside its sources.

mod library_flags;
