//! (placeholder: being written; replaced before this lands)
fn main() {}
