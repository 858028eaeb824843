//! Host memory a dispatch reads and writes: [`HostArg`] ranges (the caller's memory) and
//! [`SharedBuffer`]s (memory the device uses in place). Every access to such memory goes
//! through the copies here, so runtimes and the driver stay safe code.

use std::marker::PhantomData;
use std::ptr::NonNull;

/// A host memory range handed to a dispatch.
#[derive(Debug, Clone, Copy)]
pub struct HostArg {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
}

// SAFETY: a HostArg is only a description of memory whose validity the creator guaranteed in
// `from_raw`; moving the description between threads does not touch the memory.
unsafe impl Send for HostArg {}
// SAFETY: as above.
unsafe impl Sync for HostArg {}

/// A write to an argument that was made read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the argument's memory is read-only")]
pub struct ReadOnly;

impl HostArg {
    /// A readable and writable range.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes, and must stay valid and not be
    /// accessed by anything else until every dispatch given this argument has returned.
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> Option<HostArg> {
        NonNull::new(ptr).map(|ptr| HostArg {
            ptr,
            len,
            writable: true,
        })
    }

    /// A range the kernel may only read: a dispatch refuses it for an argument the kernel
    /// writes, and never writes it back.
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `len` bytes, and must stay valid and not be written by
    /// anything else until every dispatch given this argument has returned.
    pub unsafe fn from_raw_read_only(ptr: *const u8, len: usize) -> Option<HostArg> {
        NonNull::new(ptr.cast_mut()).map(|ptr| HostArg {
            ptr,
            len,
            writable: false,
        })
    }

    /// Memory a foreign object describes by its address and length: a Python tensor's
    /// `data_ptr()` and `nbytes`, an array's `__array_interface__`. This is the driver's one
    /// trust boundary for user memory, as in upstream's launcher: the object's own description
    /// cannot be checked, so the caller must take it from the object itself and keep the object
    /// alive (and unused by anything else) until every dispatch given this argument has
    /// returned. `None` for a null address.
    pub fn from_foreign(address: usize, len: usize, writable: bool) -> Option<HostArg> {
        let ptr = address as *mut u8;
        if writable {
            // SAFETY: the caller's contract above.
            unsafe { HostArg::from_raw(ptr, len) }
        } else {
            // SAFETY: the caller's contract above.
            unsafe { HostArg::from_raw_read_only(ptr, len) }
        }
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The start address, for placement checks.
    pub fn address(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Copies the argument's bytes into the start of `dst`; returns how many (the shorter of
    /// the two lengths).
    pub fn read_into(&self, dst: &mut [u8]) -> usize {
        let n = self.len.min(dst.len());
        // SAFETY: `from_raw*` guarantees `len` readable bytes; `dst` is a distinct exclusive
        // borrow, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), dst.as_mut_ptr(), n) };
        n
    }

    /// The argument's bytes, copied.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len];
        self.read_into(&mut out);
        out
    }

    /// Whether the argument holds exactly `bytes`.
    pub fn holds(&self, bytes: &[u8]) -> bool {
        // SAFETY: `from_raw*` guarantees `len` readable bytes, not written by anything else
        // while the dispatch runs.
        bytes.len() == self.len
            && unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) } == bytes
    }

    /// Copies `src` into the start of the argument; returns how many bytes (the shorter of the
    /// two lengths).
    pub fn write_from(&self, src: &[u8]) -> Result<usize, ReadOnly> {
        if !self.writable {
            return Err(ReadOnly);
        }
        let n = self.len.min(src.len());
        // SAFETY: `from_raw` guarantees `len` writable bytes that nothing else accesses while
        // the dispatch runs; `src` is a shared borrow of other memory (`copy` tolerates an
        // overlap all the same).
        unsafe { std::ptr::copy(src.as_ptr(), self.ptr.as_ptr(), n) };
        Ok(n)
    }

    /// Copies `src`'s bytes into the start of this argument; returns how many.
    pub fn copy_from(&self, src: &HostArg) -> Result<usize, ReadOnly> {
        if !self.writable {
            return Err(ReadOnly);
        }
        let n = self.len.min(src.len);
        // SAFETY: both ranges are valid for `n` bytes by their `from_raw*` contracts; `copy`
        // allows them to overlap.
        unsafe { std::ptr::copy(src.ptr.as_ptr(), self.ptr.as_ptr(), n) };
        Ok(n)
    }

    /// Sets every byte to `value`.
    pub fn fill(&self, value: u8) -> Result<(), ReadOnly> {
        if !self.writable {
            return Err(ReadOnly);
        }
        // SAFETY: `from_raw` guarantees `len` writable bytes.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr(), value, self.len) };
        Ok(())
    }
}

/// Memory the device reads and writes in place (an HSA pool allocation, an XRT buffer
/// object), mapped into this process. Dropping it frees it.
///
/// # Safety
/// `as_ptr()` must be valid for reads and writes of `len()` bytes for as long as the value
/// lives, and both must return the same values every time.
pub unsafe trait SharedBuffer: Send + Sync {
    fn as_ptr(&self) -> *mut u8;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole buffer as a dispatch argument (passed in place by the runtime that made it).
    /// The memory is shared with the device and with whoever holds its address: callers
    /// serialise their use of it (a chain locks its buffer set for a whole run).
    fn host_arg(&self) -> HostArg {
        HostArg {
            // A mapping is never at address 0; a dangling pointer stands in only for an empty
            // buffer, which no runtime hands out.
            ptr: NonNull::new(self.as_ptr()).unwrap_or(NonNull::dangling()),
            len: if self.as_ptr().is_null() {
                0
            } else {
                self.len()
            },
            writable: true,
        }
    }
}

/// Host buffers borrowed for one dispatch, in signature order: the safe way to dispatch
/// memory the caller owns. The borrows last as long as this value, and the arguments made
/// from them never leave it.
#[derive(Debug, Default)]
pub struct HostBuffers<'a> {
    args: Vec<HostArg>,
    _borrows: PhantomData<&'a mut [u8]>,
}

impl<'a> HostBuffers<'a> {
    pub fn new() -> HostBuffers<'a> {
        HostBuffers::default()
    }

    /// The next argument, which the kernel may only read.
    pub fn read_only(mut self, bytes: &'a [u8]) -> HostBuffers<'a> {
        self.args.push(HostArg {
            ptr: NonNull::from(bytes).cast(),
            len: bytes.len(),
            writable: false,
        });
        self
    }

    /// The next argument, which the kernel may read and write.
    pub fn writable(mut self, bytes: &'a mut [u8]) -> HostBuffers<'a> {
        let len = bytes.len();
        self.args.push(HostArg {
            ptr: NonNull::from(bytes).cast(),
            len,
            writable: true,
        });
        self
    }

    pub fn len(&self) -> usize {
        self.args.len()
    }

    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// Runs `program` over the buffers and waits for it.
    pub fn dispatch(
        &self,
        runtime: &(impl crate::Runtime + ?Sized),
        program: &crate::Program,
        options: &crate::DispatchOptions<'_>,
    ) -> Result<crate::DispatchReport, crate::RuntimeError> {
        // Every buffer is borrowed (exclusively where writable) until this value is dropped,
        // which cannot happen before the dispatch returns: what a HostArg requires.
        runtime.dispatch(program, &self.args, options)
    }
}
