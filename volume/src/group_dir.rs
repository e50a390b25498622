//! The directory name of a group under `<data>/groups/`.
//!
//! Group ids are any UTF-8 string (empty, `.`, `..`, containing `/`, longer than a file
//! name may be), so the name is an encoding of the id:
//!
//! - every byte outside `[A-Za-z0-9_-]` becomes `%XX` (two upper-case hex digits), so the
//!   encoding is injective and never `.`, `..` or a path with a separator;
//! - the empty id is `%` (which no other id encodes to);
//! - an encoding longer than [`MAX_PLAIN_LEN`] bytes keeps its first [`PREFIX_LEN`] bytes
//!   (never cutting an escape) and appends `~` and a 96-bit hash of the id in hex (FNV-1a 64
//!   then CRC-32). `~` never occurs in a plain encoding, so a long name cannot equal a short
//!   one.
//!
//! Two long ids can share a name only if their hashes collide. The header of the group's
//! file names the full id, so such a collision is detected when the second group is opened
//! (it fails rather than reading the other group's offsets).
//!
//! A plain name decodes back to its id ([`group_id_of`]); a long one does not (only the
//! file's header holds the whole id).

/// Longest plain encoding; 255 is the usual file-name limit.
pub const MAX_PLAIN_LEN: usize = 200;
/// Bytes of the encoding kept in front of the hash of a long id.
const PREFIX_LEN: usize = 160;

/// The directory name for `group_id`.
pub fn dir_name(group_id: &str) -> String {
    if group_id.is_empty() {
        return "%".to_owned();
    }
    let mut encoded = String::with_capacity(group_id.len());
    for byte in group_id.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    if encoded.len() <= MAX_PLAIN_LEN {
        return encoded;
    }
    let mut cut = PREFIX_LEN;
    // An escape is three bytes starting with '%': never keep a part of one.
    if let Some(percent) = encoded[cut.saturating_sub(2)..cut].rfind('%') {
        cut = cut - 2 + percent;
    }
    encoded.truncate(cut);
    let fnv = group_id
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    let crc = crc32fast::hash(group_id.as_bytes());
    format!("{encoded}~{fnv:016x}{crc:08x}")
}

/// The group id a plain directory name encodes; `None` for a long id's name (ending in `~`
/// and a hash) or a name no id encodes to.
pub fn group_id_of(name: &str) -> Option<String> {
    if name == "%" {
        return Some(String::new());
    }
    let mut bytes = Vec::with_capacity(name.len());
    let mut rest = name.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        match byte {
            b'%' => {
                let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
                if hex.bytes().any(|b| b.is_ascii_lowercase()) {
                    return None;
                }
                bytes.push(u8::from_str_radix(hex, 16).ok()?);
                rest = &tail[2..];
            }
            b if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' => {
                bytes.push(b);
                rest = tail;
            }
            _ => return None,
        }
    }
    let id = String::from_utf8(bytes).ok()?;
    (dir_name(&id) == name).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn is_safe(name: &str) -> bool {
        !name.is_empty()
            && name != "."
            && name != ".."
            && name.len() <= 255
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-%~".contains(&b))
    }

    #[test]
    fn odd_ids_get_safe_distinct_names() {
        let long_a = "a".repeat(300);
        let long_b = format!("{}b", "a".repeat(299));
        let ids = [
            "", ".", "..", "/", "a/b", "%", "%25", "~", "g", "G", "é", "\0", &long_a, &long_b,
        ];
        let names: Vec<String> = ids.iter().map(|id| dir_name(id)).collect();
        for (id, name) in ids.iter().zip(&names) {
            assert!(is_safe(name), "{id:?} -> {name:?}");
        }
        let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        assert_eq!(dir_name("my-group_1"), "my-group_1");
        assert_eq!(dir_name("a.b"), "a%2Eb");
        assert_eq!(
            group_id_of(&dir_name(&long_a)),
            None,
            "a long id's name keeps only a prefix"
        );
        for name in ["a%2eb", "a%2", "a.b", "%2E%", "~"] {
            assert_eq!(group_id_of(name), None, "{name}");
        }
    }

    proptest! {
        #[test]
        fn names_are_safe(id in ".{0,400}") {
            prop_assert!(is_safe(&dir_name(&id)), "{:?}", dir_name(&id));
        }

        #[test]
        fn plain_names_decode_to_their_ids(id in ".{0,16}") {
            prop_assert_eq!(group_id_of(&dir_name(&id)), Some(id));
        }

        #[test]
        fn short_ids_are_injective(a in ".{0,40}", b in ".{0,40}") {
            prop_assume!(a != b);
            prop_assert_ne!(dir_name(&a), dir_name(&b));
        }

        #[test]
        fn long_ids_differ_in_their_hash(prefix in "[a-z%]{200,260}", a in ".{1,5}", b in ".{1,5}") {
            prop_assume!(a != b);
            prop_assert_ne!(dir_name(&format!("{prefix}{a}")), dir_name(&format!("{prefix}{b}")));
        }

        #[test]
        fn an_escape_is_never_cut(id in "[a.]{100,200}") {
            let name = dir_name(&id);
            if let Some((prefix, _)) = name.split_once('~') {
                let bytes = prefix.as_bytes();
                let n = bytes.len();
                prop_assert!(n < 1 || bytes[n - 1] != b'%');
                prop_assert!(n < 2 || bytes[n - 2] != b'%');
            }
        }
    }
}
