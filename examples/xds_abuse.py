#!/usr/bin/env python3
"""Connections that hold the xDS port without using it, against `xds_load`'s server.

800 TLS clients without a client certificate, one after another, then 800 with the client
certificate of the identity CA that send only HTTP/2's preface and an empty SETTINGS frame and
open no stream. Prints the server's RSS before, at once and 2 s later, how many are still open
2 s later, and for the second kind 31 s later (past the 30 s idle timeout).

    cargo build --release --example xds_load
    python3 examples/xds_abuse.py target/release/examples/xds_load
"""
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time

CLIENTS = 800
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def main(server_exe):
    with tempfile.TemporaryDirectory() as ca:
        server = subprocess.Popen(
            [server_exe, "--serve", "--streams", "1", "--ca-out", ca],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        host, port = server.stdout.readline().split()[1].rsplit(":", 1)
        try:
            for with_certificate in (False, True):
                before = rss(server.pid)
                sockets, refused = connect(host, int(port), ca, with_certificate)
                at_once = rss(server.pid)
                time.sleep(2)
                kind = "with" if with_certificate else "without"
                print(f"{CLIENTS} clients {kind} a certificate: RSS {before} -> {at_once} at once, "
                      f"{rss(server.pid)} 2 s later; {refused} failed their handshake; "
                      f"open 2 s later: {still_open(sockets)}")
                if with_certificate:
                    time.sleep(31)
                    print(f"  31 s later: RSS {rss(server.pid)}, open: {still_open(sockets)}")
                for sock in sockets:
                    sock.close()
                time.sleep(1)
        finally:
            server.stdin.close()
            server.wait()


def rss(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return f"{int(line.split()[1]) / 1024:.1f} MiB"
    return "?"


def connect(host, port, ca, with_certificate):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    if with_certificate:
        context.load_cert_chain(os.path.join(ca, "client.pem"), os.path.join(ca, "client.key"))
    sockets, refused = [], 0
    for _ in range(CLIENTS):
        sock = socket.create_connection((host, port))
        try:
            tls = context.wrap_socket(sock, server_hostname="xds")
            if with_certificate:
                tls.sendall(PREFACE)
            sockets.append(tls)
        except (ssl.SSLError, OSError):
            refused += 1
            sockets.append(sock)
    return sockets, refused


def still_open(sockets):
    """Open while a read would block; closed at EOF or an error (TLS 1.3 refuses a missing
    certificate after the client's handshake, with an alert; the idle timeout sends GOAWAY)."""
    count = 0
    for sock in sockets:
        sock.setblocking(False)
        try:
            while sock.recv(65536) != b"":
                pass
        except (BlockingIOError, ssl.SSLWantReadError):
            count += 1
        except (ssl.SSLError, OSError):
            pass
    return count


if __name__ == "__main__":
    main(sys.argv[1])
