//! Property tests on the line decoder: it never panics, never accepts garbage, and every
//! line it accepts is exactly a line the encoder could have written.

use lazarus_ledger::frame::{Envelope, decode_line, encode_line};
use proptest::prelude::*;
use serde_json::Value;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic_and_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        // Random bytes essentially never carry a valid CRC-32C of themselves.
        prop_assert!(decode_line::<Value>(&bytes).is_err());
    }

    #[test]
    fn round_trip(seq in any::<u64>(), kind in "[a-z_]{1,12}", text in any::<String>(), n in any::<i64>()) {
        let data = serde_json::to_vec(&serde_json::json!({"text": text, "n": n})).unwrap();
        let mut buf = Vec::new();
        encode_line(&mut buf, seq, "2026-12-02T10:00:00.000Z", &kind, &data);
        prop_assert_eq!(buf.iter().filter(|&&b| b == b'\n').count(), 1);
        let env: Envelope<Value> = decode_line(&buf[..buf.len() - 1]).unwrap();
        prop_assert_eq!(env.seq, seq);
        prop_assert_eq!(env.kind, kind.as_str());
        prop_assert_eq!(&env.data["text"], &Value::String(text));
    }

    #[test]
    fn any_single_byte_change_is_refused(seq in 0u64..1000, pos in any::<prop::sample::Index>(), new in any::<u8>()) {
        let mut buf = Vec::new();
        encode_line(&mut buf, seq, "2026-12-02T10:00:00.000Z", "note", br#"{"text":"hello","n":5}"#);
        buf.pop();
        let i = pos.index(buf.len());
        prop_assume!(buf[i] != new);
        buf[i] = new;
        prop_assert!(decode_line::<Value>(&buf).is_err());
    }
}
