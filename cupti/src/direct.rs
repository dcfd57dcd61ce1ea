//! CUPTI for a recorder that owns the process's activity buffers itself: the recorder
//! `streamlab trace` injects (`inject/`). It registers its own buffer callbacks, enables the
//! kinds it wants, flushes on its own clock and turns each completed buffer into trace-file
//! lines ([`decode`](crate::decode)). The lessons' recorder goes through
//! [`Cupti::enable`](crate::Cupti::enable) and its sessions instead; the two are not meant to
//! run in one process (CUPTI has one set of buffer callbacks per process).
use std::ffi::{c_char, c_void, CStr};

use crate::decode::{decode, Decoded, Lookup};
use crate::find::{CompleteFn, RequestFn, CUPTI_SUCCESS};
use crate::layout;
use crate::trace_file::ApiDomain;
use crate::Cupti;

/// `CUpti_CallbackDomain` of each API.
fn domain_number(domain: ApiDomain) -> u32 {
    match domain {
        ApiDomain::Driver => 1,
        ApiDomain::Runtime => 2,
    }
}

/// Callback ids are looked up below this bound: CUDA 13.0 has 811 driver and 527 runtime
/// ids, each domain an append-only enum.
const CALLBACK_ID_BOUND: u32 = 4096;

/// The strings of records in a buffer CUPTI handed over, read in place.
struct InBuffer<'a> {
    calls: &'a mut dyn FnMut(ApiDomain, u32) -> Option<String>,
}

impl Lookup for InBuffer<'_> {
    fn string(&mut self, pointer: u64) -> String {
        // SAFETY: an `InBuffer` exists only inside `decode_buffer`, whose records are CUPTI's;
        // their string fields point at NUL-terminated text CUPTI keeps alive at least while
        // the buffer is being read, and the decoder passes only those fields (never 0).
        unsafe { CStr::from_ptr(pointer as usize as *const c_char) }.to_string_lossy().into_owned()
    }
    fn call(&mut self, domain: ApiDomain, cbid: u32) -> Option<String> {
        (self.calls)(domain, cbid)
    }
}

impl Cupti {
    /// Hands CUPTI the functions that give it empty buffers and take full ones back. CUPTI
    /// keeps one pair per process: this replaces any pair registered before.
    pub fn register_buffers(
        &self,
        requested: RequestFn,
        completed: CompleteFn,
    ) -> Result<(), String> {
        // SAFETY: two functions of the C signatures CUPTI expects, valid for the life of the
        // process (they are `fn` items of a library that is never unloaded).
        let status = unsafe { (self.api.activity_register_callbacks)(requested, completed) };
        self.check(status, "cuptiActivityRegisterCallbacks")
    }

    /// Turns recording of activity `kind` (`layout::KIND_*`) on.
    pub fn enable_kind(&self, kind: u32) -> Result<(), String> {
        // SAFETY: a plain enum argument.
        let status = unsafe { (self.api.activity_enable)(kind) };
        self.check(status, "cuptiActivityEnable")
    }

    /// Whether this CUPTI can record single driver and runtime calls
    /// ([`enable_call`](Self::enable_call)) rather than all of a domain or none.
    pub fn can_enable_calls(&self) -> bool {
        self.api.activity_enable_driver_api.is_some()
            && self.api.activity_enable_runtime_api.is_some()
    }

    /// Turns on the activity records of one call (`cuptiActivityEnableDriverApi` or
    /// `…RuntimeApi`), without enabling `KIND_DRIVER`/`KIND_RUNTIME` (which would record
    /// every call of the domain and override this).
    pub fn enable_call(&self, domain: ApiDomain, cbid: u32) -> Result<(), String> {
        let (function, name) = match domain {
            ApiDomain::Driver => {
                (self.api.activity_enable_driver_api, "cuptiActivityEnableDriverApi")
            }
            ApiDomain::Runtime => {
                (self.api.activity_enable_runtime_api, "cuptiActivityEnableRuntimeApi")
            }
        };
        let Some(function) = function else {
            return Err(format!("{name}: not in this CUPTI ({})", self.version()));
        };
        // SAFETY: plain integer arguments.
        let status = unsafe { function(cbid, 1) };
        self.check(status, name)
    }

    /// The name CUPTI gives call `cbid` of `domain` (`cuMemAlloc_v2`, `cudaMalloc_v3020`).
    pub fn call_name(&self, domain: ApiDomain, cbid: u32) -> Option<String> {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: a valid out-pointer; the call fails for ids the domain does not have.
        let status =
            unsafe { (self.api.get_callback_name)(domain_number(domain), cbid, &mut name) };
        if status != CUPTI_SUCCESS || name.is_null() {
            return None;
        }
        // SAFETY: checked non-null; CUPTI returns a static NUL-terminated string.
        Some(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned())
    }

    /// Every call of `domain` this CUPTI names, by callback id.
    pub fn call_names(&self, domain: ApiDomain) -> Vec<(u32, String)> {
        (1..CALLBACK_ID_BOUND).filter_map(|id| Some((id, self.call_name(domain, id)?))).collect()
    }

    /// Asks CUPTI to hand over its buffers: with `forced`, those holding records of work
    /// still running too (their records incomplete: for the end of a process); otherwise the
    /// buffers whose records are all complete, full or not.
    pub fn flush_all(&self, forced: bool) -> Result<(), String> {
        // SAFETY: a plain flag argument; buffers go to the registered completion callback.
        let status = unsafe { (self.api.activity_flush_all)(u32::from(forced)) };
        self.check(status, "cuptiActivityFlushAll")
    }

    /// How many records CUPTI dropped for want of buffer space in the buffer it just handed
    /// back for `context` and `stream`.
    ///
    /// # Safety
    /// `context` and `stream` are the ones CUPTI passed to the completion callback this is
    /// called from.
    pub unsafe fn dropped_in(&self, context: *mut c_void, stream: u32) -> Result<usize, String> {
        let mut dropped = 0;
        // SAFETY: a valid out-pointer, and a context CUPTI itself named (caller's promise).
        let status = unsafe { (self.api.activity_dropped)(context, stream, &mut dropped) };
        self.check(status, "cuptiActivityGetNumDroppedRecords")?;
        Ok(dropped)
    }

    /// Decodes every record of a buffer CUPTI handed back, in order. `calls` names a driver
    /// or runtime call by (domain, callback id), or leaves it out with `None`.
    ///
    /// # Safety
    /// `buffer` is a buffer CUPTI handed to the completion callback this is called from, with
    /// `valid` bytes of records.
    pub unsafe fn decode_buffer(
        &self,
        buffer: *mut u8,
        valid: usize,
        calls: &mut dyn FnMut(ApiDomain, u32) -> Option<String>,
        each: &mut dyn FnMut(Decoded),
    ) {
        let mut lookup = InBuffer { calls };
        let mut record: *mut c_void = std::ptr::null_mut();
        loop {
            // SAFETY: `buffer` holds `valid` bytes of records (caller's promise); CUPTI
            // advances `record` through them.
            let status = unsafe { (self.api.activity_get_next_record)(buffer, valid, &mut record) };
            if status != CUPTI_SUCCESS || record.is_null() {
                break; // CUPTI_ERROR_MAX_LIMIT_REACHED: no more records
            }
            // SAFETY: every record starts with its 4-byte kind.
            let kind = unsafe { (record as *const u32).read_unaligned() };
            // A record of a kind read is at least its prefix long (layout's structs are the
            // leading fields of every version CUPTI writes); of the others only the kind.
            let len = layout::trace_prefix_len(kind).unwrap_or(4);
            // SAFETY: `len` bytes of this record, inside the buffer's valid bytes.
            let bytes = unsafe { std::slice::from_raw_parts(record as *const u8, len) };
            each(decode(bytes, &mut lookup));
        }
    }
}
