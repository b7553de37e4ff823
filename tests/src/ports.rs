//! Free loopback ports for the kit's servers, picked below the kernel's
//! ephemeral range: a port found free there is not taken meanwhile by the
//! source port of some test's outgoing connection (the kernel picks those
//! from the ephemeral range), only, rarely, by another of the kit's servers
//! that picked the same one, which their starts try again on.

use std::net::TcpListener;

use rand::Rng;

/// Where the kit's ports come from when the ephemeral range leaves room
/// below it.
const LOWEST: u16 = 10_000;

/// The first port of the kernel's ephemeral range.
fn ephemeral_start() -> u16 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range");
    let first = range
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok());
    first.unwrap_or(32_768)
}

/// `n` distinct free loopback ports: each listener is held until all are
/// picked, so none comes up twice.
pub(crate) fn free_ports(n: usize) -> Vec<u16> {
    let below = ephemeral_start();
    let mut rng = rand::rng();
    let mut held: Vec<TcpListener> = Vec::with_capacity(n);
    while held.len() < n {
        let listener = match below > LOWEST + 1_000 {
            true => TcpListener::bind(("127.0.0.1", rng.random_range(LOWEST..below))),
            // No room below it: any port the kernel gives.
            false => TcpListener::bind("127.0.0.1:0"),
        };
        if let Ok(listener) = listener {
            held.push(listener);
        }
    }
    held.iter()
        .map(|listener| listener.local_addr().expect("local addr").port())
        .collect()
}

/// One free loopback port ([`free_ports`]).
pub(crate) fn free_port() -> u16 {
    free_ports(1)[0]
}
