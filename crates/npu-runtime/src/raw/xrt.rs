//! XRT's shared buffers as [`SharedBuffer`]s.

use crate::raw::host::SharedBuffer;
use crate::xrt::XrtSharedBuffer;

// SAFETY: the buffer object's mapping is readable and writable for its whole size while the
// object lives, and an XrtSharedBuffer holds the object (an `Arc<Bo>`) until it is dropped.
unsafe impl SharedBuffer for XrtSharedBuffer {
    fn as_ptr(&self) -> *mut u8 {
        self.bo().as_ptr()
    }

    fn len(&self) -> usize {
        self.bo().len()
    }
}
