//! Generates the gRPC client and server of `orders.Orders` from a service
//! description written in Rust (tonic-build's manual mode): no protoc, the
//! messages are hand-written prost types in `src/orders.rs`.

fn main() {
    let pay = tonic_build::manual::Method::builder()
        .name("pay")
        .route_name("Pay")
        .input_type("crate::orders::PayRequest")
        .output_type("crate::orders::PayReply")
        .codec_path("tonic_prost::ProstCodec")
        .build();
    let service = tonic_build::manual::Service::builder()
        .name("Orders")
        .package("orders")
        .method(pay)
        .build();
    tonic_build::manual::Builder::new().compile(&[service]);
}
