//! Outbound capture for mesh sidecars: the iptables `nat` rules that send a pod's outbound TCP
//! to its sidecar's outbound listener ([`crate::proxy::MESH_OUTBOUND_PORT`]), which recovers
//! the original destination (`SO_ORIGINAL_DST`, Envoy's `original_dst` listener filter).
//!
//! Generated here, as `iptables-restore` input, and installed by `envoy-operator mesh-init`
//! (the init container the injector adds) in the pod's network namespace, for IPv4 (and IPv6
//! when asked: the served outbound listener binds IPv4 only):
//!
//! ```text
//! *nat
//! :ENVOY_MESH_OUTPUT - [0:0]
//! -A OUTPUT -p tcp -j ENVOY_MESH_OUTPUT
//! -A ENVOY_MESH_OUTPUT -m owner --uid-owner 101 -j RETURN      the proxy's own connections
//! -A ENVOY_MESH_OUTPUT -o lo -j RETURN                          to the pod itself
//! -A ENVOY_MESH_OUTPUT -d 127.0.0.0/8 -j RETURN                 (::1/128 for IPv6)
//! -A ENVOY_MESH_OUTPUT -p tcp -m multiport --dports 5432 -j RETURN   opted-out ports
//! -A ENVOY_MESH_OUTPUT -d 10.0.0.0/8 -j RETURN                  opted-out CIDRs
//! -A ENVOY_MESH_OUTPUT -p tcp -j REDIRECT --to-ports 15001
//! COMMIT
//! ```
//!
//! Only `OUTPUT` is touched: inbound connections reach the application as they would without a
//! mesh (the routes a mesh serves are the client's, on the client's sidecar). The chain is
//! declared in the input, which empties it when it exists (`iptables-restore --noflush` keeps
//! everything else of the table), and the jump from `OUTPUT` is added only when absent
//! ([`is_installed`]), so running the init container again changes nothing.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// The chain of the capture's rules, jumped to from `nat OUTPUT`.
pub const CHAIN: &str = "ENVOY_MESH_OUTPUT";
/// At most this many ports, and this many CIDRs, may be opted out per pod: the annotations are
/// anyone's to write, and each costs a rule.
pub const MAX_EXCLUSIONS: usize = 64;
/// `multiport` takes at most 15 ports per rule.
const PORTS_PER_RULE: usize = 15;

/// What the capture redirects, and what it leaves alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    /// Connections of this uid (the proxy's) are never redirected: its own upstream
    /// connections would otherwise come back to it.
    pub proxy_uid: u32,
    /// The sidecar's outbound listener.
    pub outbound_port: u16,
    /// Destination ports left alone.
    pub exclude_ports: Vec<u16>,
    /// Destination networks left alone (each applies to its own family's rules).
    pub exclude_cidrs: Vec<Cidr>,
}

/// An IP family: which of `iptables-restore` and `ip6tables-restore` the rules are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub const ALL: [Family; 2] = [Family::V4, Family::V6];

    /// The program that installs the rules.
    pub fn restore_program(self) -> &'static str {
        match self {
            Self::V4 => "iptables-restore",
            Self::V6 => "ip6tables-restore",
        }
    }

    /// The program that prints the installed rules.
    pub fn save_program(self) -> &'static str {
        match self {
            Self::V4 => "iptables-save",
            Self::V6 => "ip6tables-save",
        }
    }

    fn loopback(self) -> &'static str {
        match self {
            Self::V4 => "127.0.0.0/8",
            Self::V6 => "::1/128",
        }
    }

    fn of(address: IpAddr) -> Self {
        if address.is_ipv4() { Self::V4 } else { Self::V6 }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        })
    }
}

/// The rule that sends `nat OUTPUT`'s TCP to [`CHAIN`], as `iptables-save` prints it.
const JUMP: &str = "-A OUTPUT -p tcp -j ENVOY_MESH_OUTPUT";

/// Whether the jump to the capture's chain is among the rules `saved` (what `iptables-save -t
/// nat` prints): the capture was installed before, in this network namespace.
pub fn is_installed(saved: &str) -> bool {
    saved.lines().any(|line| line.trim_end() == JUMP)
}

/// The `iptables-restore --noflush` input installing `capture` for `family`; the jump from
/// `OUTPUT` only when not `installed` already.
pub fn rules(capture: &Capture, family: Family, installed: bool) -> String {
    let mut out = String::from("*nat\n");
    out.push_str(&format!(":{CHAIN} - [0:0]\n"));
    if !installed {
        out.push_str(JUMP);
        out.push('\n');
    }
    let mut rule = |matches: &str, target: &str| out.push_str(&format!("-A {CHAIN} {matches} -j {target}\n"));
    rule(&format!("-m owner --uid-owner {}", capture.proxy_uid), "RETURN");
    rule("-o lo", "RETURN");
    rule(&format!("-d {}", family.loopback()), "RETURN");
    for ports in capture.exclude_ports.chunks(PORTS_PER_RULE) {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        rule(&format!("-p tcp -m multiport --dports {}", ports.join(",")), "RETURN");
    }
    for cidr in capture.exclude_cidrs.iter().filter(|cidr| Family::of(cidr.address) == family) {
        rule(&format!("-d {cidr}"), "RETURN");
    }
    rule("-p tcp", &format!("REDIRECT --to-ports {}", capture.outbound_port));
    out.push_str("COMMIT\n");
    out
}

/// A network: an address and a prefix length, its host bits cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    pub address: IpAddr,
    pub prefix: u8,
}

impl FromStr for Cidr {
    type Err = String;

    /// `10.0.0.0/8`, `fd00::/8`, or an address alone (`/32`, `/128`).
    fn from_str(text: &str) -> Result<Self, String> {
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let address: IpAddr =
            address.parse().map_err(|_| format!("{text:?} is not an IP address or CIDR"))?;
        let max = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(prefix) => Some(prefix)
                .filter(|prefix| prefix.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|prefix| prefix.parse::<u8>().ok())
                .filter(|prefix| *prefix <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
        };
        let address = match address {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
                IpAddr::V4((u32::from(v4) & mask).into())
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
                IpAddr::V6((u128::from(v6) & mask).into())
            }
        };
        Ok(Self { address, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

/// A comma-separated list of ports (`5432, 6379`), sorted, without duplicates; empty items are
/// an error, an empty list is none.
pub fn parse_ports(list: &str) -> Result<Vec<u16>, String> {
    let mut ports = items(list)?
        .map(|item| {
            item.parse::<u16>()
                .ok()
                .filter(|port| *port != 0 && item.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| format!("{item:?} is not a port (1 to 65535)"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ports.sort_unstable();
    ports.dedup();
    bounded(ports, "ports")
}

/// A comma-separated list of CIDRs (`10.0.0.0/8, fd00::/8`), sorted, without duplicates.
pub fn parse_cidrs(list: &str) -> Result<Vec<Cidr>, String> {
    let mut cidrs = items(list)?.map(str::parse).collect::<Result<Vec<Cidr>, _>>()?;
    cidrs.sort_unstable();
    cidrs.dedup();
    bounded(cidrs, "CIDRs")
}

fn items(list: &str) -> Result<impl Iterator<Item = &str>, String> {
    let list = list.trim();
    let items: Vec<&str> =
        if list.is_empty() { Vec::new() } else { list.split(',').map(str::trim).collect() };
    if items.iter().any(|item| item.is_empty()) {
        return Err("an empty item in the list".to_owned());
    }
    // Counted before parsing, so a huge list costs nothing more than its split.
    if items.len() > MAX_EXCLUSIONS * 4 {
        return Err(format!("{} items, more than the {MAX_EXCLUSIONS} allowed", items.len()));
    }
    Ok(items.into_iter())
}

fn bounded<T>(items: Vec<T>, what: &str) -> Result<Vec<T>, String> {
    if items.len() > MAX_EXCLUSIONS {
        return Err(format!("{} {what}, more than the {MAX_EXCLUSIONS} allowed", items.len()));
    }
    Ok(items)
}

/// `items` as a comma-separated list: what [`parse_ports`] and [`parse_cidrs`] read back.
pub fn join<T: fmt::Display>(items: &[T]) -> String {
    items.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture() -> Capture {
        Capture { proxy_uid: 101, outbound_port: 15001, exclude_ports: Vec::new(), exclude_cidrs: Vec::new() }
    }

    #[test]
    fn the_rules_redirect_outbound_tcp_but_the_proxys_and_loopback() {
        assert_eq!(
            rules(&capture(), Family::V4, false),
            "*nat
:ENVOY_MESH_OUTPUT - [0:0]
-A OUTPUT -p tcp -j ENVOY_MESH_OUTPUT
-A ENVOY_MESH_OUTPUT -m owner --uid-owner 101 -j RETURN
-A ENVOY_MESH_OUTPUT -o lo -j RETURN
-A ENVOY_MESH_OUTPUT -d 127.0.0.0/8 -j RETURN
-A ENVOY_MESH_OUTPUT -p tcp -j REDIRECT --to-ports 15001
COMMIT
"
        );
        assert_eq!(
            rules(&capture(), Family::V6, true),
            "*nat
:ENVOY_MESH_OUTPUT - [0:0]
-A ENVOY_MESH_OUTPUT -m owner --uid-owner 101 -j RETURN
-A ENVOY_MESH_OUTPUT -o lo -j RETURN
-A ENVOY_MESH_OUTPUT -d ::1/128 -j RETURN
-A ENVOY_MESH_OUTPUT -p tcp -j REDIRECT --to-ports 15001
COMMIT
",
            "installed before: the chain is emptied and refilled, the jump kept"
        );
    }

    #[test]
    fn opted_out_ports_and_cidrs_return_before_the_redirect_each_in_its_family() {
        let capture = Capture {
            exclude_ports: (1..=16).collect(),
            exclude_cidrs: parse_cidrs("10.0.0.0/8, fd00::/8, 192.0.2.7").unwrap(),
            ..capture()
        };
        let v4 = rules(&capture, Family::V4, false);
        let lines: Vec<&str> = v4.lines().collect();
        assert_eq!(
            lines[6..10],
            [
                "-A ENVOY_MESH_OUTPUT -p tcp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 -j RETURN",
                "-A ENVOY_MESH_OUTPUT -p tcp -m multiport --dports 16 -j RETURN",
                "-A ENVOY_MESH_OUTPUT -d 10.0.0.0/8 -j RETURN",
                "-A ENVOY_MESH_OUTPUT -d 192.0.2.7/32 -j RETURN",
            ]
        );
        assert_eq!(lines[10], "-A ENVOY_MESH_OUTPUT -p tcp -j REDIRECT --to-ports 15001");
        let v6 = rules(&capture, Family::V6, false);
        assert!(v6.contains("-A ENVOY_MESH_OUTPUT -d fd00::/8 -j RETURN\n"), "{v6}");
        assert!(!v6.contains("10.0.0.0"), "{v6}");
    }

    #[test]
    fn an_installed_capture_is_recognized_in_iptables_save_output() {
        let saved = "# Generated by iptables-save v1.8.9 (nf_tables)
*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:ENVOY_MESH_OUTPUT - [0:0]
-A OUTPUT -p tcp -j ENVOY_MESH_OUTPUT
-A ENVOY_MESH_OUTPUT -p tcp -j REDIRECT --to-ports 15001
COMMIT
";
        assert!(is_installed(saved));
        assert!(!is_installed("*nat\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"));
        assert!(!is_installed(""));
    }

    #[test]
    fn lists_are_parsed_strictly_sorted_and_bounded() {
        assert_eq!(parse_ports(" 6379,5432 , 5432").unwrap(), [5432, 6379]);
        assert_eq!(parse_ports("").unwrap(), Vec::<u16>::new());
        for bad in ["0", "65536", "x", "80,", ",80", "+80", "80 81"] {
            assert!(parse_ports(bad).is_err(), "{bad}");
        }
        let many: Vec<String> = (1..=65).map(|p| p.to_string()).collect();
        assert!(parse_ports(&many.join(",")).unwrap_err().contains("more than the 64"));
        assert!(parse_ports(&"1,".repeat(100_000)).is_err());

        let cidrs = parse_cidrs("10.1.2.3/8,fd00::1/8,::1,192.0.2.1").unwrap();
        assert_eq!(join(&cidrs), "10.0.0.0/8,192.0.2.1/32,::1/128,fd00::/8");
        assert_eq!(parse_cidrs(&join(&cidrs)).unwrap(), cidrs);
        assert_eq!("0.0.0.0/0".parse::<Cidr>().unwrap().to_string(), "0.0.0.0/0");
        for bad in ["10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0/+8", "example.com", "10.0.0.0/8/8"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }
}
