//! Property tests on the reader of a host program's values (`host_blob`), which reads bytes
//! anyone may have written: it never panics, a constructor outside the allowlist is refused by
//! `check` wherever it sits, and `view` shows it labelled while decoding the rest.

use base64::Engine;
use lazarus_session::host_blob::{Allowlist, BlobError, NOT_DECODED, check, view};
use proptest::prelude::*;
use rmpv::Value as Mp;

fn bytes_of(v: &Mp) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, v).expect("encoding to a Vec");
    out
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// LangGraph's constructor extension (code 0): module, name, argument.
fn construct(module: &str, name: &str, arg: Mp) -> Mp {
    Mp::Ext(
        0,
        bytes_of(&Mp::Array(vec![module.into(), name.into(), arg])),
    )
}

/// Plain msgpack data, nested: what a channel's value is made of.
fn plain() -> impl Strategy<Value = Mp> {
    let leaf = prop_oneof![
        Just(Mp::Nil),
        any::<bool>().prop_map(Mp::from),
        any::<i64>().prop_map(Mp::from),
        any::<f64>().prop_map(Mp::from),
        "[a-z ]{0,12}".prop_map(|s| Mp::from(s.as_str())),
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Mp::Binary),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Mp::Array),
            proptest::collection::vec(("[a-z]{1,6}", inner), 0..6).prop_map(|kv| Mp::Map(
                kv.into_iter()
                    .map(|(k, v)| (Mp::from(k.as_str()), v))
                    .collect()
            )),
        ]
    })
}

/// `value` with `poison` put in at a place `at` picks: into an array, a map's value or an
/// allowed constructor's argument (a `HumanMessage`'s fields).
fn plant(value: Mp, poison: Mp, at: usize) -> Mp {
    match at % 3 {
        0 => Mp::Array(vec![value, poison]),
        1 => Mp::Map(vec![("v".into(), value), ("p".into(), poison)]),
        _ => construct(
            "langchain_core.messages.human",
            "HumanMessage",
            Mp::Map(vec![("content".into(), value), ("extra".into(), poison)]),
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), tag in prop_oneof![Just("msgpack"), Just("json"), Just("pickle"), Just("bytes")]) {
        let strict = Allowlist::strict();
        let _ = check(tag, &bytes, &strict);
        let shown = view(tag, &b64(&bytes), &strict);
        // whatever it could not read is labelled, never an error
        if check(tag, &bytes, &strict).is_err() && tag != "bytes" {
            prop_assert!(shown.to_string().contains(NOT_DECODED), "{tag}: {shown}");
        }
    }

    #[test]
    fn plain_data_passes_and_a_planted_constructor_is_refused_wherever_it_sits(value in plain(), at in any::<usize>(), module in "[a-z]{2,8}") {
        let strict = Allowlist::strict();
        let clean = bytes_of(&value);
        prop_assert_eq!(check("msgpack", &clean, &strict), Ok(()));
        prop_assert!(!view("msgpack", &b64(&clean), &strict).to_string().contains(NOT_DECODED));

        let poisoned = bytes_of(&plant(value, construct(&module, "system", "id".into()), at));
        prop_assert_eq!(
            check("msgpack", &poisoned, &strict),
            Err(BlobError::OutsideAllowlist(format!("{module}.system")))
        );
        let shown = view("msgpack", &b64(&poisoned), &strict).to_string();
        prop_assert!(shown.contains(NOT_DECODED), "{}", shown);
        prop_assert!(shown.contains(&format!("{module}.system")), "{}", shown);
        // widened on purpose, the same bytes pass
        let wide = Allowlist::with([(module.clone(), "system".to_string())]);
        prop_assert_eq!(check("msgpack", &poisoned, &wide), Ok(()));
    }
}
