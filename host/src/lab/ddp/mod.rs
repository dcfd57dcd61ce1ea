//! One process per GPU, as DDP jobs run: which rank a process is (from torchrun's, Slurm's
//! or MPI's variables) in [`ranks`]; how the ranks meet (a file, or TCP) in [`rendezvous`],
//! with what they say to each other over TCP in [`handshake`]; and `streamlab launch`, which
//! starts the ranks and watches them, in [`launcher`]: each rank's process and its stderr in
//! [`rank_process`], and how the ranks ended, said in a line each, in [`rank_endings`].
pub mod handshake;
pub mod launcher;
pub mod rank_endings;
pub mod rank_process;
pub mod ranks;
pub mod rendezvous;
