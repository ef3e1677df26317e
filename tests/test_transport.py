"""The stdio transport's line framing (weavehost/mcp/transport.py, LineFramer): lines split
across reads, several lines in one read, and lines over the cap kept as head, tail and size.
The transport itself, with real processes, is tested through the pool in test_servers.py."""

from __future__ import annotations

from weavehost.mcp.transport import LineFramer, Oversized


def framed(framer: LineFramer, *chunks: bytes) -> list[bytes | Oversized]:
    return [item for chunk in chunks for item in framer.feed(chunk)]


def test_a_line_split_across_reads_comes_out_whole_once_it_ends() -> None:
    framer = LineFramer(cap=100)
    assert framed(framer, b'{"jsonrpc":', b' "2.0"') == []
    assert framed(framer, b', "id": 1}\n') == [b'{"jsonrpc": "2.0", "id": 1}']


def test_several_lines_in_one_read_come_out_in_order_and_an_unended_one_waits() -> None:
    framer = LineFramer(cap=100)
    assert framed(framer, b"one\n\ntwo\nthr") == [b"one", b"", b"two"]
    assert framed(framer, b"ee\n") == [b"three"]


def test_a_line_over_the_cap_is_its_head_tail_and_size_and_the_next_line_is_whole() -> None:
    framer = LineFramer(cap=4)
    items = framed(framer, b"ab", b"cdef", b"gh\nok\n")
    assert items == [Oversized(head=b"abcdef", tail=b"cdefgh", size=8), b"ok"]


def test_a_long_line_keeps_only_a_window_of_its_head_and_tail() -> None:
    framer = LineFramer(cap=1000)
    line = b"h" * 300 + b"m" * 4400 + b"t" * 300
    chunks = [line[i : i + 700] for i in range(0, len(line), 700)] + [b"\n"]
    [item] = framed(framer, *chunks)
    assert item == Oversized(head=b"h" * 256, tail=b"t" * 256, size=5000)
