//! Reading the consumer protocol's subscription (the metadata a classic consumer sends in
//! JoinGroup): `version: i16`, then `topics: [string]` with an `i32` count and `i16`-length
//! strings, then fields the coordinator does not need. Versions 0 to 3 share this prefix.

/// The topics a `ConsumerProtocolSubscription` names; `None` if the bytes are not one.
pub fn subscribed_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut rest = metadata;
    let version = i16::from_be_bytes(take::<2>(&mut rest)?);
    if version < 0 {
        return None;
    }
    let count = i32::from_be_bytes(take::<4>(&mut rest)?);
    if count < 0 || count as usize > rest.len() / 2 {
        return None;
    }
    let mut topics = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let len = i16::from_be_bytes(take::<2>(&mut rest)?);
        let len = usize::try_from(len).ok()?;
        if len > rest.len() {
            return None;
        }
        let (name, tail) = rest.split_at(len);
        topics.push(String::from_utf8(name.to_vec()).ok()?);
        rest = tail;
    }
    Some(topics)
}

fn take<const N: usize>(rest: &mut &[u8]) -> Option<[u8; N]> {
    if rest.len() < N {
        return None;
    }
    let (head, tail) = rest.split_at(N);
    *rest = tail;
    head.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_topics_of_a_v1_subscription() {
        let mut bytes = vec![0, 1, 0, 0, 0, 2];
        for topic in ["orders", "payments"] {
            bytes.extend((topic.len() as i16).to_be_bytes());
            bytes.extend(topic.as_bytes());
        }
        bytes.extend([0xff, 0xff, 0xff, 0xff]); // null user data
        assert_eq!(
            subscribed_topics(&bytes),
            Some(vec!["orders".to_string(), "payments".to_string()])
        );
    }

    #[test]
    fn rejects_truncated_and_hostile_counts() {
        assert_eq!(subscribed_topics(&[0, 1, 0, 0]), None);
        assert_eq!(subscribed_topics(&[0, 1, 0x7f, 0xff, 0xff, 0xff]), None);
        assert_eq!(subscribed_topics(&[0, 1, 0, 0, 0, 1, 0, 9, b'a']), None);
    }
}
