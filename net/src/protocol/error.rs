//! Errors of the wire codec.

/// Why a message body or a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A field needed more bytes than the frame had left.
    #[error("{field}: needs {needed} bytes, {left} left")]
    Truncated {
        /// What was being read.
        field: &'static str,
        /// Bytes that field needs at least.
        needed: usize,
        /// Bytes left in the frame.
        left: usize,
    },
    /// A length or count prefix was negative (other than the null marker) or larger than the
    /// bytes left could possibly hold.
    #[error("{field}: length {length} does not fit in the {left} bytes left")]
    BadLength {
        /// What was being read.
        field: &'static str,
        /// The length or count read from the wire.
        length: i64,
        /// Bytes left in the frame.
        left: usize,
    },
    /// An unsigned varint ran past 5 bytes or overflowed 32 bits.
    #[error("unsigned varint longer than 5 bytes or above 2^32-1")]
    BadVarint,
    /// A string was not valid UTF-8.
    #[error("string is not valid UTF-8")]
    BadUtf8,
    /// A null arrived in a version where the field is not nullable.
    #[error("null in a version where the field is not nullable")]
    UnexpectedNull,
    /// A nullable struct's presence marker was neither -1 nor 1.
    #[error("struct presence marker {0} is neither -1 nor 1")]
    BadPresenceMarker(i8),
    /// A known tagged field's value did not fill its declared size exactly.
    #[error("tagged field {tag}: value size {declared} but {used} bytes used")]
    TaggedFieldSize {
        /// The tag.
        tag: u32,
        /// Size prefix read from the wire.
        declared: usize,
        /// Bytes the value actually took.
        used: usize,
    },
    /// Bytes were left after the message body ended.
    #[error("{0} trailing bytes after the message body")]
    TrailingBytes(usize),
    /// The message does not exist at the requested version.
    #[error("api {api_key} has no version {version}")]
    UnsupportedVersion {
        /// API key of the message.
        api_key: i16,
        /// Requested version.
        version: i16,
    },
}

/// Identity of a request, readable from the first 8 bytes of any frame: enough for the broker
/// to answer with an error code under the right correlation id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestIds {
    /// API key from the header.
    pub api_key: i16,
    /// API version from the header.
    pub api_version: i16,
    /// Correlation id the client will match the response with.
    pub correlation_id: i32,
}

/// Why a request frame could not be turned into a header and a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The frame is shorter than api key + version + correlation id: nothing to answer to, the
    /// connection should be closed.
    #[error("frame of {0} bytes is too short for a request header")]
    TooShort(usize),
    /// The API key is not one this codec serves.
    #[error("unknown api key {}", .0.api_key)]
    UnknownApi(RequestIds),
    /// The API is served but not at this version (answer UNSUPPORTED_VERSION; for ApiVersions
    /// see `api_versions_fallback_response`).
    #[error("api {} version {} is not supported", .0.api_key, .0.api_version)]
    UnsupportedVersion(RequestIds),
    /// The header after the correlation id (client id, tagged fields) is malformed.
    #[error("request header: {source}")]
    Header {
        /// Identity of the request.
        ids: RequestIds,
        /// The decoding failure.
        source: DecodeError,
    },
    /// The header decoded but the body did not.
    #[error("request body: {source}")]
    Body {
        /// The decoded header.
        header: Box<super::frame::RequestHeader>,
        /// The decoding failure.
        source: DecodeError,
    },
}

impl FrameError {
    /// Identity of the request when the frame was long enough to carry one; `None` means the
    /// connection should be closed.
    pub fn ids(&self) -> Option<RequestIds> {
        match self {
            FrameError::TooShort(_) => None,
            FrameError::UnknownApi(ids)
            | FrameError::UnsupportedVersion(ids)
            | FrameError::Header { ids, .. } => Some(*ids),
            FrameError::Body { header, .. } => Some(header.ids()),
        }
    }
}
