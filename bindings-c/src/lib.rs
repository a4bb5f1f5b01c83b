//! C ABI for FrogNano (filled in by the bindings work).
