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

/// Why memory a kernel writes cannot take the kernel's results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotWritable {
    /// The object that owns the memory says it is read-only.
    #[error(
        "the object is read-only (e.g. a NumPy array with flags.writeable = False, or a \
         SharedBuffer over one)"
    )]
    Declared,
    /// The object claims to be writable, but the pages are mapped read-only.
    #[error(
        "its memory is mapped read-only although the object claims to be writable (e.g. a \
         tensor from torch.frombuffer over a read-only mmap)"
    )]
    MappedReadOnly,
    /// Part of the range is not mapped in this process at all.
    #[error("part of its memory is not mapped in this process (was it freed?)")]
    Unmapped,
}

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

    /// Whether the kernel may write this argument's memory: the owner's word
    /// ([`HostArg::is_writable`]) and then the pages themselves, so that a write into memory
    /// mapped read-only (which the owner cannot know about, e.g. a NumPy array over `bytes`)
    /// is refused instead of killing the process with SIGSEGV.
    ///
    /// The pages are probed with `madvise(MADV_POPULATE_WRITE)` (Linux 5.14): it faults them
    /// in for writing without changing a byte, and fails with `EFAULT` where a write would
    /// raise SIGSEGV or SIGBUS and with `ENOMEM` where nothing is mapped. Where the kernel
    /// cannot say (older kernels, device mappings: `EINVAL`), `/proc/self/maps` decides.
    pub fn check_writable(&self) -> Result<(), NotWritable> {
        if !self.writable {
            return Err(NotWritable::Declared);
        }
        if self.len == 0 {
            return Ok(());
        }
        let page = rustix::param::page_size();
        let start = self.address() & !(page - 1);
        let Some(end) = self.address().checked_add(self.len) else {
            return Err(NotWritable::Unmapped);
        };
        // SAFETY: MADV_POPULATE_WRITE neither changes the contents nor the mapping of any
        // page: it only faults pages in as a write would (without writing), and reports an
        // error instead of a signal. The range is page-aligned as madvise requires.
        let probed = unsafe {
            rustix::mm::madvise(
                start as *mut std::ffi::c_void,
                end - start,
                rustix::mm::Advice::LinuxPopulateWrite,
            )
        };
        match probed {
            Ok(()) => Ok(()),
            Err(e) if e == rustix::io::Errno::FAULT => Err(NotWritable::MappedReadOnly),
            Err(e) if e == rustix::io::Errno::NOMEM => Err(NotWritable::Unmapped),
            Err(_) => maps_writable(start, end),
        }
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

/// Whether `/proc/self/maps` shows `[start, end)` mapped writable throughout.
fn maps_writable(start: usize, end: usize) -> Result<(), NotWritable> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        // Nothing more to learn: the owner said writable.
        return Ok(());
    };
    let mut covered = start;
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        else {
            continue;
        };
        if hi <= covered || lo > covered {
            continue;
        }
        if !perms.starts_with("rw") {
            return Err(NotWritable::MappedReadOnly);
        }
        covered = hi;
        if covered >= end {
            return Ok(());
        }
    }
    Err(NotWritable::Unmapped)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Lies in the program's read-only data: mapped, readable, never writable.
    static READ_ONLY: [u8; 256] = [7; 256];

    #[test]
    fn memory_mapped_read_only_is_found_although_the_owner_says_writable() {
        let claimed =
            HostArg::from_foreign(READ_ONLY.as_ptr() as usize, READ_ONLY.len(), true).unwrap();
        assert_eq!(claimed.check_writable(), Err(NotWritable::MappedReadOnly));
        assert_eq!(READ_ONLY[0], 7);
        let declared =
            HostArg::from_foreign(READ_ONLY.as_ptr() as usize, READ_ONLY.len(), false).unwrap();
        assert_eq!(declared.check_writable(), Err(NotWritable::Declared));
    }

    #[test]
    fn writable_memory_passes_unchanged_and_unmapped_memory_is_refused() {
        let mut data: Vec<u8> = (0..=255).cycle().take(3 * 4096 + 5).collect();
        let expect = data.clone();
        let arg = HostArg::from_foreign(data.as_mut_ptr() as usize, data.len(), true).unwrap();
        assert_eq!(arg.check_writable(), Ok(()));
        assert_eq!(data, expect, "probing must not change a byte");
        // The first page of the address space is never mapped (vm.mmap_min_addr).
        let nowhere = HostArg::from_foreign(0x10, 64, true).unwrap();
        assert_eq!(nowhere.check_writable(), Err(NotWritable::Unmapped));
        assert_eq!(maps_writable(0x0, 0x1000), Err(NotWritable::Unmapped));
        let ro = READ_ONLY.as_ptr() as usize;
        assert_eq!(
            maps_writable(ro, ro + READ_ONLY.len()),
            Err(NotWritable::MappedReadOnly)
        );
        let rw = data.as_ptr() as usize;
        assert_eq!(maps_writable(rw, rw + data.len()), Ok(()));
    }
}
