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
    /// What is known of the pages: guaranteed by the creator, or found by a probe.
    pages: Pages,
}

/// What is known about the pages of a [`HostArg`]'s range, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pages {
    /// Nothing: a foreign object's word only. A dispatch probes before touching them.
    Unknown,
    /// Mapped and readable throughout.
    Readable,
    /// Mapped, readable and writable throughout.
    Writable,
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

/// Why memory a kernel reads cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotReadable {
    /// Part of the range is not mapped in this process at all.
    #[error(
        "part of its memory is not mapped in this process (was it freed, or does its \
         data_ptr() point somewhere else?)"
    )]
    Unmapped,
    /// Mapped, but reading it would fault (`PROT_NONE`, or a file mapping past the file's
    /// end).
    #[error(
        "its memory is mapped but cannot be read (no read permission, or past the end of a mapped file)"
    )]
    Inaccessible,
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
            pages: Pages::Writable,
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
            pages: Pages::Readable,
        })
    }

    /// Memory a foreign object describes by its address and length: a Python tensor's
    /// `data_ptr()` and `nbytes`, an array's `__array_interface__`. This is the driver's one
    /// trust boundary for user memory, as in upstream's launcher: the object's own description
    /// cannot be checked, so the caller must take it from the object itself and keep the object
    /// alive (and unused by anything else) until every dispatch given this argument has
    /// returned. `None` for a null address.
    ///
    /// What the object says about its address is not trusted as far as the pages go: a
    /// dispatch probes them ([`HostArg::probe`]) before reading or writing, unless the caller
    /// found them sound earlier ([`HostArg::vouched`]).
    pub fn from_foreign(address: usize, len: usize, writable: bool) -> Option<HostArg> {
        NonNull::new(address as *mut u8).map(|ptr| HostArg {
            ptr,
            len,
            writable,
            pages: Pages::Unknown,
        })
    }

    /// What is known about the pages.
    pub fn pages(&self) -> Pages {
        self.pages
    }

    /// The same range with its pages known to be `pages`, as a probe of the same address
    /// and length found them earlier. For callers that remember probes per object (whose
    /// memory stays mapped while the object lives) instead of probing at every dispatch.
    pub fn vouched(self, pages: Pages) -> HostArg {
        HostArg {
            pages: self.pages.max(pages),
            ..self
        }
    }

    /// Makes sure the pages are at least `need` (probing them unless that is known already):
    /// afterwards [`HostArg::pages`] says so. A read of memory that is not there would kill
    /// the process with SIGSEGV; this reports it instead.
    pub fn probe(&mut self, need: Pages) -> Result<(), PageFault> {
        if self.pages >= need {
            return Ok(());
        }
        match need {
            Pages::Unknown => {}
            Pages::Readable => self.check_readable().map_err(PageFault::Read)?,
            Pages::Writable => self.check_writable().map_err(PageFault::Write)?,
        }
        self.pages = self.pages.max(need);
        Ok(())
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
        if self.pages == Pages::Writable || self.len == 0 {
            return Ok(());
        }
        self.populate(Need::Write).map_err(|missing| match missing {
            Missing::Unmapped => NotWritable::Unmapped,
            Missing::Permission => NotWritable::MappedReadOnly,
        })
    }

    /// Whether the whole range can be read, the same way: `madvise(MADV_POPULATE_READ)`
    /// faults the pages in as a read would and fails with `ENOMEM` where nothing is mapped
    /// and `EFAULT` where a read would fault; `/proc/self/maps` decides where the kernel
    /// cannot say.
    pub fn check_readable(&self) -> Result<(), NotReadable> {
        if self.pages >= Pages::Readable || self.len == 0 {
            return Ok(());
        }
        self.populate(Need::Read).map_err(|missing| match missing {
            Missing::Unmapped => NotReadable::Unmapped,
            Missing::Permission => NotReadable::Inaccessible,
        })
    }

    /// Faults the range's pages in for `need` without changing a byte (`ENOMEM`: nothing
    /// mapped; `EFAULT`: the access would fault); `/proc/self/maps` decides where the kernel
    /// cannot say.
    fn populate(&self, need: Need) -> Result<(), Missing> {
        let page = rustix::param::page_size();
        let start = self.address() & !(page - 1);
        let end = self
            .address()
            .checked_add(self.len)
            .ok_or(Missing::Unmapped)?;
        let (advice, perm) = match need {
            Need::Read => (rustix::mm::Advice::LinuxPopulateRead, b'r'),
            Need::Write => (rustix::mm::Advice::LinuxPopulateWrite, b'w'),
        };
        // SAFETY: MADV_POPULATE_READ/WRITE neither change the contents nor the mapping of any
        // page: they only fault pages in as a read or write would (without writing), and
        // report an error instead of a signal. `start` is page-aligned as madvise requires.
        let populated =
            unsafe { rustix::mm::madvise(start as *mut std::ffi::c_void, end - start, advice) };
        match populated {
            Ok(()) => Ok(()),
            Err(e) if e == rustix::io::Errno::FAULT => Err(Missing::Permission),
            Err(e) if e == rustix::io::Errno::NOMEM => Err(Missing::Unmapped),
            Err(_) => maps_allow(start, end, perm),
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

/// Why a probe refused memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PageFault {
    #[error("{0}")]
    Read(NotReadable),
    #[error("{0}")]
    Write(NotWritable),
}

/// The access a probe checks.
#[derive(Debug, Clone, Copy)]
enum Need {
    Read,
    Write,
}

/// What a range lacks for an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missing {
    Unmapped,
    Permission,
}

/// Whether `/proc/self/maps` shows `[start, end)` mapped with permission `perm` (`b'r'` or
/// `b'w'`) throughout.
fn maps_allow(start: usize, end: usize, perm: u8) -> Result<(), Missing> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        // Nothing more to learn: the owner's word stands.
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
        // perms reads like "rw-p": r at 0, w at 1.
        let at = if perm == b'w' { 1 } else { 0 };
        let allowed = perms.as_bytes().get(at) == Some(&perm);
        // Writable memory must be readable too (the staging copy reads it first).
        if !allowed || !perms.starts_with('r') {
            return Err(Missing::Permission);
        }
        covered = hi;
        if covered >= end {
            return Ok(());
        }
    }
    Err(Missing::Unmapped)
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
            pages: Pages::Writable,
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
            pages: Pages::Readable,
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
            pages: Pages::Writable,
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
        assert_eq!(maps_allow(0x0, 0x1000, b'w'), Err(Missing::Unmapped));
        let ro = READ_ONLY.as_ptr() as usize;
        assert_eq!(
            maps_allow(ro, ro + READ_ONLY.len(), b'w'),
            Err(Missing::Permission)
        );
        assert_eq!(maps_allow(ro, ro + READ_ONLY.len(), b'r'), Ok(()));
        let rw = data.as_ptr() as usize;
        assert_eq!(maps_allow(rw, rw + data.len(), b'w'), Ok(()));
    }

    #[test]
    fn reads_of_unmapped_or_inaccessible_memory_are_refused_and_a_probe_is_remembered() {
        let nowhere = HostArg::from_foreign(0x10, 64, false).unwrap();
        assert_eq!(nowhere.check_readable(), Err(NotReadable::Unmapped));
        let page = rustix::param::page_size();
        // SAFETY: a fresh anonymous mapping nothing else knows about, never read here.
        let none = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                page,
                rustix::mm::ProtFlags::empty(),
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap();
        let mut guarded = HostArg::from_foreign(none as usize, page, true).unwrap();
        assert_eq!(guarded.check_readable(), Err(NotReadable::Inaccessible));
        assert_eq!(
            guarded.probe(Pages::Readable),
            Err(PageFault::Read(NotReadable::Inaccessible))
        );
        assert_eq!(guarded.pages(), Pages::Unknown);
        // SAFETY: unmapping the mapping made above; nothing points into it any more.
        unsafe { rustix::mm::munmap(none, page) }.unwrap();

        let mut data = vec![1u8; 100];
        let mut arg = HostArg::from_foreign(data.as_mut_ptr() as usize, data.len(), true).unwrap();
        assert_eq!(
            arg.pages(),
            Pages::Unknown,
            "a foreign object's word is not trusted"
        );
        arg.probe(Pages::Readable).unwrap();
        assert_eq!(arg.pages(), Pages::Readable);
        arg.probe(Pages::Writable).unwrap();
        assert_eq!(arg.pages(), Pages::Writable);
        // A caller that remembers a probe passes its verdict on; it never lowers what is known.
        let again = HostArg::from_foreign(data.as_mut_ptr() as usize, data.len(), true).unwrap();
        assert_eq!(again.vouched(Pages::Readable).pages(), Pages::Readable);
        assert_eq!(arg.vouched(Pages::Unknown).pages(), Pages::Writable);
    }
}
