//! Compile-time errors of `#[distributed_lock]` (trybuild): each case's
//! `.stderr` shows the message and the token it points at.

#[test]
fn bad_attributes_and_signatures_are_compile_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
