//! CUDA graphs (placeholder: being written; replaced before this lands).
