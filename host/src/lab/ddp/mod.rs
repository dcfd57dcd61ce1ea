//! One process per GPU, as DDP jobs run: each rank's place and its rendezvous (a file, TCP,
//! or torchrun's, Slurm's and MPI's variables) in [`ranks`], the TCP rendezvous in
//! [`rendezvous`] and what the ranks say there in [`handshake`]; and `streamlab launch`, which
//! starts the ranks and watches them, in [`launcher`]: each rank's process and its stderr in
//! [`rank_process`], and how the ranks ended, said in a line each, in [`rank_endings`].
pub mod handshake;
pub mod launcher;
pub mod rank_endings;
pub mod rank_process;
pub mod ranks;
pub mod rendezvous;
