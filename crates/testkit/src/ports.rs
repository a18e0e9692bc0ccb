//! Ports for servers a test starts a moment later (Envoy's listeners, the operator's own ports).
//!
//! A port from `bind(…:0)` comes from the kernel's ephemeral range, so in the moment between
//! releasing it and the server binding it, the kernel may hand it to any outgoing connection of
//! a test running beside it, and the server's bind fails with "Address already in use". These
//! ports are taken below that range, which the kernel never hands out by itself, and each is
//! checked free where a server binds (every address and loopback).

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Mutex;

/// The lowest port handed out: above the well-known and the usual registered services.
const LOWEST: u16 = 10_000;

/// A port no socket holds now and the kernel does not hand out by itself, on 127.0.0.1. Ports
/// are taken in turn from a start that differs between processes, so test binaries running at
/// once rarely try the same port; one that is taken is skipped.
pub fn unclaimed_port() -> SocketAddr {
    static NEXT: Mutex<Option<u16>> = Mutex::new(None);
    let highest = ephemeral_range_start().saturating_sub(1).max(LOWEST + 1);
    let span = u32::from(highest - LOWEST) + 1;
    let mut next = NEXT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut port = next.unwrap_or_else(|| LOWEST + (std::process::id().wrapping_mul(7_919) % span) as u16);
    for _ in 0..span {
        let candidate = port;
        port = if port >= highest { LOWEST } else { port + 1 };
        if free_everywhere(candidate) {
            *next = Some(port);
            return SocketAddr::from((Ipv4Addr::LOCALHOST, candidate));
        }
    }
    panic!("no free TCP port between {LOWEST} and {highest}");
}

/// Whether a server could bind `port` on every address, which is how Envoy binds its
/// listeners, and on loopback.
fn free_everywhere(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).is_ok()
        && TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// The first port of the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), 32768
/// where it cannot be read.
fn ephemeral_range_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_distinct_and_free() {
        let ports: Vec<u16> = (0..50).map(|_| unclaimed_port().port()).collect();
        let start = ephemeral_range_start();
        assert!(ports.iter().all(|port| (LOWEST..start).contains(port)), "{ports:?} not below {start}");
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "a port handed out twice: {ports:?}");
        // A port someone holds is skipped.
        let held = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).unwrap();
        let held_port = held.local_addr().unwrap().port();
        assert!(!free_everywhere(held_port));
    }
}
