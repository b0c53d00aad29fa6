"""hosts/framing.py over socketpairs and 127.0.0.1: the header layout, whole reads from
partial ones, peers closing between and in the middle of frames, oversize lengths,
timeouts, and the sockets' options."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from hosts import framing
from hosts.framing import HEADER, Header, PeerClosed, PeerError


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    yield a, b
    a.close()
    b.close()


def later(delay_s: float, action, *args) -> threading.Thread:
    def run():
        time.sleep(delay_s)
        action(*args)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_header_is_17_bytes_in_network_order():
    assert HEADER.size == 17
    data = framing.pack_header(Header(kind=2, iteration=17, word=2, length=1_300_000))
    assert data.hex() == "02" "00000011" "00000002" "000000000013d620"
    assert framing.unpack_header(data) == (2, 17, 2, 1_300_000)
    with pytest.raises(struct.error):  # a field past its width never reaches the wire
        framing.pack_header(Header(0, 1 << 32, 0, 0))


def test_a_frame_sent_one_byte_at_a_time_is_read_whole(pair):
    a, b = pair
    frame = framing.pack_header(Header(7, 3, 5, 6)) + b"hello" + b"world!"

    def trickle():
        for i in range(len(frame)):
            a.sendall(frame[i:i + 1])
            time.sleep(0.001)
    later(0, trickle)
    header = framing.recv_header(b)
    assert header == (7, 3, 5, 6)
    assert framing.recv_body(b, header.word) == b"hello"
    assert framing.recv_body(b, header.length) == b"world!"


def test_frames_back_to_back_stay_apart(pair):
    a, b = pair
    framing.send_frame(a, Header(1, 0, 0, 3), b"abc")
    framing.send_frame(a, Header(3, 9, 1, 0))
    assert framing.recv_header(b) == (1, 0, 0, 3) and framing.recv_body(b, 3) == b"abc"
    assert framing.recv_header(b) == (3, 9, 1, 0)
    assert framing.recv_body(b, 0) == b""


def test_a_bulk_body_is_sent_from_one_chunk_and_drained_in_constant_memory(pair):
    a, b = pair
    nbytes, chunk = 1_300_000, memoryview(bytearray(b"x" * 512 * 1024))

    def send():
        framing.send_frame(a, Header(2, 0, 0, nbytes))
        framing.send_repeated(a, nbytes, chunk)
        framing.send_frame(a, Header(3, 0, 0, nbytes))
    sender = later(0, send)
    scratch = memoryview(bytearray(64 * 1024))
    assert framing.recv_header(b).length == nbytes
    framing.recv_discard(b, nbytes, scratch)
    assert bytes(scratch[:1]) == b"x"
    assert framing.recv_header(b) == (3, 0, 0, nbytes), "the body ended exactly where the header said"
    sender.join()


def test_a_peer_closing_between_frames_is_done(pair):
    a, b = pair
    framing.send_frame(a, Header(1, 0, 0, 2), b"ok")
    a.close()
    framing.recv_header(b)
    framing.recv_body(b, 2)
    with pytest.raises(PeerClosed):
        framing.recv_header(b)


@pytest.mark.parametrize("sent, read", [
    (framing.pack_header(Header(1, 0, 0, 10))[:5], "header"),
    (framing.pack_header(Header(1, 0, 0, 10)) + b"1234", "body"),
    (framing.pack_header(Header(1, 0, 0, 10)) + b"1234", "discard"),
])
def test_a_peer_closing_mid_frame_broke_it(pair, sent, read):
    a, b = pair
    a.sendall(sent)
    a.close()
    with pytest.raises(PeerError) as caught:
        if read == "header":
            framing.recv_header(b)
        else:
            assert framing.recv_header(b).length == 10
            if read == "body":
                framing.recv_body(b, 10)
            else:
                framing.recv_discard(b, 10, memoryview(bytearray(3)))
    assert not isinstance(caught.value, PeerClosed)
    assert str(caught.value) == ("peer closed after 5 of 17 bytes" if read == "header"
                                 else "peer closed after 4 of 10 bytes")


def test_an_oversize_length_is_refused_before_allocating(pair):
    a, b = pair
    a.sendall(framing.pack_header(Header(1, 0, 0, (1 << 64) - 1)))
    length = framing.recv_header(b).length
    started = time.monotonic()
    with pytest.raises(PeerError, match="announces 18446744073709551615 bytes, over the limit"):
        framing.recv_body(b, length)
    with pytest.raises(PeerError, match="over the limit of 16"):
        framing.recv_body(b, 17, limit=16)
    assert time.monotonic() - started < 1


def test_a_silent_peer_times_out_mid_frame(pair):
    a, b = pair
    b.settimeout(0.2)
    a.sendall(framing.pack_header(Header(1, 0, 0, 10))[:4])
    with pytest.raises(TimeoutError):
        framing.recv_header(b)


def test_a_paced_header_waits_for_its_first_byte_but_not_for_the_rest(pair):
    a, b = pair
    b.settimeout(0.2)
    later(0.5, a.sendall, framing.pack_header(Header(2, 4, 0, 0)))
    assert framing.recv_header(b, paced=True) == (2, 4, 0, 0), "the first byte may come after the timeout"
    assert b.gettimeout() == 0.2
    a.sendall(b"\x02")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        framing.recv_header(b, paced=True)
    assert time.monotonic() - started < 1
    assert b.gettimeout() == 0.2


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_connect_retries_until_the_peer_listens_and_sets_the_options():
    port, source_port = free_port(), free_port()
    listeners = []
    later(0.3, lambda: listeners.append(framing.listen(("127.0.0.1", port), 1, 5)))
    sock = framing.connect(("127.0.0.1", port), 5, source_port=source_port)
    try:
        conn, address = framing.accept(listeners[0], 2.5)
        assert address[1] == sock.getsockname()[1] == source_port
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
        assert listeners[0].getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
        for s, timeout in ((sock, 5), (conn, 2.5)):
            assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) and s.gettimeout() == timeout
        conn.close()
    finally:
        sock.close()
        listeners[0].close()


def test_connect_gives_up_naming_the_peer():
    port = free_port()
    started = time.monotonic()
    with pytest.raises(PeerError, match=rf"^PS 0 at 127.0.0.1:{port} not listening within 0.5 s"):
        framing.connect(("127.0.0.1", port), 0.5, peer="PS 0")
    assert 0.4 < time.monotonic() - started < 2


def test_taken_ports_fail_in_one_line():
    with framing.listen(("127.0.0.1", 0), 1, 0.2) as listener:
        taken = listener.getsockname()
        with pytest.raises(PeerError, match=f"cannot listen on 127.0.0.1:{taken[1]}"):
            framing.listen(taken, 1, 1)
        with pytest.raises(PeerError, match=f"cannot bind source port {taken[1]}"):
            framing.connect(taken, 1, source_port=taken[1])
        with pytest.raises(TimeoutError):
            framing.accept(listener, 1)


def test_sockets_use_the_requested_congestion_control():
    for name in ("reno", "bbr"):
        with framing.tcp_socket(name) as sock:
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0") == name.encode()
    with pytest.raises(OSError):
        framing.tcp_socket("no-such-algorithm")


@pytest.mark.parametrize("text, parsed", [("10.0.0.1:5201", ("10.0.0.1", 5201)), (" 10.0.1.2:1 ", ("10.0.1.2", 1))])
def test_an_address_is_ipv4_and_a_port(text, parsed):
    assert framing.ipv4_address(text) == parsed


@pytest.mark.parametrize("text", ["10.0.0.1", "tbh1:5201", "10.0.0.1:0", "10.0.0.1:65536", "10.0.0.1:x", ":80",
                                  "[::1]:80"])
def test_anything_else_is_refused_naming_the_text(text):
    with pytest.raises(ValueError, match=r"^not IPv4:PORT: "):
        framing.ipv4_address(text)
