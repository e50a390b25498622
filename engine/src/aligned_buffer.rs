//! Write buffers for direct I/O.
//!
//! O_DIRECT needs the buffer address, the file position and the length all aligned to the
//! device's logical block size. This is the only type that knows about that alignment: the
//! rest of the engine appends bytes to an [`AlignedBuf`] and hands it to a
//! [`LogFile`](crate::storage::LogFile) to write at an aligned position.

use glommio::io::DmaBuffer;

/// The alignment every direct write uses (file position, length, buffer address).
pub const ALIGNMENT: usize = 4096;

/// Rounds `value` up to the next multiple of [`ALIGNMENT`].
pub fn align_up(value: u64) -> u64 {
    value.div_ceil(ALIGNMENT as u64) * ALIGNMENT as u64
}

/// Rounds `value` down to a multiple of [`ALIGNMENT`].
pub fn align_down(value: u64) -> u64 {
    value / ALIGNMENT as u64 * ALIGNMENT as u64
}

/// A fixed-capacity byte buffer whose memory is suitable for a direct write.
///
/// `len` counts the bytes filled so far; [`AlignedBuf::write_len`] is what a write covers
/// (the filled length rounded up to a whole page, zero padded).
pub struct AlignedBuf {
    memory: Memory,
    len: usize,
}

enum Memory {
    /// Memory from glommio's DMA allocator (possibly registered with io_uring).
    Dma(DmaBuffer),
    /// Plain heap memory for the in-memory storage.
    Heap(Box<[u8]>),
}

impl AlignedBuf {
    pub(crate) fn dma(buffer: DmaBuffer) -> Self {
        AlignedBuf {
            memory: Memory::Dma(buffer),
            len: 0,
        }
    }

    pub(crate) fn heap(capacity: usize) -> Self {
        AlignedBuf {
            memory: Memory::Heap(vec![0u8; capacity].into_boxed_slice()),
            len: 0,
        }
    }

    /// Total bytes the buffer can hold.
    pub fn capacity(&self) -> usize {
        self.storage().len()
    }

    /// Bytes filled so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing has been filled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Free space left.
    pub fn remaining(&self) -> usize {
        self.capacity() - self.len
    }

    /// Appends as much of `bytes` as fits; returns how many bytes were taken.
    pub fn fill_from(&mut self, bytes: &[u8]) -> usize {
        let take = bytes.len().min(self.remaining());
        let start = self.len;
        self.storage_mut()[start..start + take].copy_from_slice(&bytes[..take]);
        self.len += take;
        take
    }

    /// The filled bytes.
    pub fn filled(&self) -> &[u8] {
        &self.storage()[..self.len]
    }

    /// The filled bytes, mutable (used to stamp offsets into a batch after copying it in).
    pub fn filled_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.storage_mut()[..len]
    }

    /// The length a direct write of this buffer covers: whole pages, zero padded.
    pub fn write_len(&self) -> usize {
        align_up(self.len as u64) as usize
    }

    /// Zeroes the padding up to [`AlignedBuf::write_len`] and trims the buffer to it, ready to
    /// be written. Stale bytes past `len` would otherwise reach the disk and confuse recovery.
    pub(crate) fn prepare_for_write(&mut self) {
        let write_len = self.write_len();
        let len = self.len;
        self.storage_mut()[len..write_len].fill(0);
        if let Memory::Dma(buffer) = &mut self.memory {
            buffer.trim_to_size(write_len);
        }
    }

    pub(crate) fn into_memory(self) -> MemoryParts {
        match self.memory {
            Memory::Dma(buffer) => MemoryParts::Dma(buffer),
            Memory::Heap(bytes) => MemoryParts::Heap(bytes),
        }
    }

    fn storage(&self) -> &[u8] {
        match &self.memory {
            Memory::Dma(buffer) => buffer.as_bytes(),
            Memory::Heap(bytes) => bytes,
        }
    }

    fn storage_mut(&mut self) -> &mut [u8] {
        match &mut self.memory {
            Memory::Dma(buffer) => buffer.as_bytes_mut(),
            Memory::Heap(bytes) => bytes,
        }
    }
}

/// The memory of a buffer handed to the storage layer for writing.
pub(crate) enum MemoryParts {
    Dma(DmaBuffer),
    Heap(Box<[u8]>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_rounding() {
        assert_eq!(align_up(0), 0);
        assert_eq!(align_up(1), 4096);
        assert_eq!(align_up(4096), 4096);
        assert_eq!(align_up(4097), 8192);
        assert_eq!(align_down(4097), 4096);
        assert_eq!(align_down(4095), 0);
    }

    #[test]
    fn fill_and_pad() {
        let mut buf = AlignedBuf::heap(8192);
        buf.storage_mut().fill(0xAA);
        assert_eq!(buf.fill_from(&[1, 2, 3]), 3);
        assert_eq!(buf.write_len(), 4096);
        buf.prepare_for_write();
        assert_eq!(&buf.storage()[..4], &[1, 2, 3, 0]);
        assert!(buf.storage()[3..4096].iter().all(|b| *b == 0));
        let big = vec![7u8; 9000];
        assert_eq!(buf.fill_from(&big), 8192 - 3);
        assert_eq!(buf.remaining(), 0);
    }
}
