//! Running another program under the recorder: the injected library and its environment.
pub mod injection;
