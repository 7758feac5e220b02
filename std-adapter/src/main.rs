//! The `benchlink` command line.
fn main() {}
