//! One process per GPU, as DDP jobs run: each rank's place and its rendezvous (a file, TCP,
//! or torchrun's, Slurm's and MPI's variables) in [`ranks`], and `streamlab launch`, which
//! starts the ranks and watches them, in [`launcher`].
pub mod launcher;
pub mod ranks;
