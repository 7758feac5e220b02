#!/usr/bin/env python3
"""Writes the committed seed inputs in seeds/<target>/ (run from anywhere: python3 make_seeds.py).

Each target reads a few parameter bytes before its payload (see the target's header
comment); the seeds here use realistic payloads from the benchmark-server spec: a chunked
zlib /log response, JSON replies with Content-Length, a /data chunk stream, the /results
and /clusters_info examples.
"""
import gzip
import os
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))

LOG = (
    b"13:39:20.114 [info] [ API ] <0.1127.0> Starting benchmark 12\n"
    b"13:39:21.002 [info] [ API ] <0.1127.0> Stage 'pipeline - checking_script': started\n"
    b"14:02:47.080 [info] <0.237.0> Dummy print: \"FOO\"\n"
    b"14:02:48.080 [info] <0.237.0> Dummy print: \"FOO\"\r\n"
    b"14:02:49.080 [error] <0.238.0> worker crashed: {badarg,[{erlang,list_to_integer,[\"x\"]}]}\n"
)
DATA = (
    b"1439245024\tworkers.pool1.started\t3\n"
    b"1439245024\tworkers.pool1.started.rps\t0.3\n"
    b"1439245034\tprint\t30\n"
    b"1439245034\tprint.rps\t2.9975917348002614\n"
    b"1439245034\tlatency.95\t1.0e-5\n"
    b"1439245044\tsystemload.la1.mzb_director49_0\t1.0e20\n"
)
STATUS = b'{"create_time":"2015-11-03T13:39:20Z","finish_time":"2015-11-03T13:41:27Z","start_time":"2015-11-03T13:39:21Z","status":"complete"}'
NOT_FOUND = b'{"reason":"Benchmark 12 is not found","reason_code":"not_found"}'
RESULTS = (
    b'{"print":{"rps":{"50":2.99,"90":2.99,"95":2.99,"max":3.05,"min":2.99},"type":"counter","value":900},'
    b'"systemload.la1.mzb_director49_0":{"percentiles":{"50":0.1,"90":0.2,"95":0.2,"max":0.3,"min":0.0},"type":"gauge","value":0.1}}'
)
CLUSTERS = b'[{"bench_id":24,"hosts":["127.0.0.1"],"id":1,"n":2,"provider":"mzb_dummycloud_plugin","state":"allocated","timestamp":1479139259}]'
STARTED = b'{"id":12,"status":"pending"}'
SEED = b"\x01\x02\x03\x04"


def zlib_log(data, cut=False):
    """One zlib stream with a sync flush mid-way, like the server's log writer."""
    c = zlib.compressobj(6, zlib.DEFLATED, 15)
    half = len(data) // 2
    out = c.compress(data[:half]) + c.flush(zlib.Z_SYNC_FLUSH)
    out += c.compress(data[half:])
    out += c.flush(zlib.Z_SYNC_FLUSH) if cut else c.flush(zlib.Z_FINISH)
    return out


def chunked(body, size=1024):
    out = b""
    for i in range(0, len(body), size):
        piece = body[i : i + size]
        out += b"%x\r\n" % len(piece) + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def head(status, headers, version=b"HTTP/1.1"):
    reason = {200: b"OK", 404: b"Not Found", 100: b"Continue"}[status]
    lines = [version + b" %d " % status + reason]
    lines += [k + b": " + v for k, v in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def json_reply(status, body):
    return head(
        status,
        [
            (b"content-length", b"%d" % len(body)),
            (b"content-type", b"application/json"),
            (b"date", b"Tue, 03 Nov 2015 13:39:20 GMT"),
            (b"server", b"Cowboy"),
            (b"connection", b"keep-alive"),
        ],
    ) + body


def log_response(cut=False):
    body = zlib_log(LOG, cut)
    return head(
        200,
        [
            (b"transfer-encoding", b"chunked"),
            (b"content-encoding", b"deflate"),
            (b"content-type", b"text/plain"),
            (b"server", b"Cowboy"),
        ],
    ) + chunked(body, 40)


def data_response():
    body = b"".join(b"%x\r\n" % len(line) + line + b"\r\n" for line in DATA.splitlines(True))
    return head(
        200,
        [
            (b"transfer-encoding", b"chunked"),
            (b"content-encoding", b"identity"),
            (b"content-type", b"text/plain"),
        ],
    ) + body + b"0\r\n\r\n"


SEEDS = {
    "http_response": {
        "log_chunked_zlib": b"\x00" + SEED + log_response(),
        "log_chunked_zlib_cut": b"\x00" + SEED + log_response(cut=True),
        "status_then_404": b"\x00" + SEED + json_reply(200, STATUS) + json_reply(404, NOT_FOUND),
        "data_chunks": b"\x00" + SEED + data_response(),
        "gzip_after_100_continue": b"\x00" + SEED + head(100, []) + head(
            200, [(b"Content-Encoding", b"gzip"), (b"Content-Length", b"%d" % len(gzip.compress(LOG, mtime=0)))]
        ) + gzip.compress(LOG, mtime=0),
        "close_delimited_eof": b"\x40" + SEED + head(200, [(b"Content-Type", b"text/plain")], b"HTTP/1.0") + LOG,
        "head_request": b"\x08" + SEED + json_reply(200, STATUS)[: -len(STATUS)],
    },
    "http_chunked": {
        "log": b"\x00" + SEED + LOG,
        "data_small_chunks_ext_trailers": b"\x3D" + SEED + DATA,
        "results_limited": b"\x42" + SEED + RESULTS,
        "zlib_garbage": b"\x80" + SEED + zlib_log(LOG),
    },
    "inflate": {
        # f1: format | framing << 2 | level << 4; f2: strategy | cut 8 | spelling 16 |
        # small window 32 | raw bytes 64 | limit 128; f3: 0xFF repeats the data to 33 KB,
        # 0xFE to 3 KiB in 1 KiB segments
        "zlib_chunked_log": bytes([0x64, 0x00, 0x00]) + SEED + LOG,
        "zlib_chunked_log_cut": bytes([0x64, 0x08, 0x00]) + SEED + LOG,
        "raw_close_data": bytes([0x69, 0x10, 0x00]) + SEED + DATA,
        "gzip_length_results": bytes([0x92, 0x00, 0x00]) + SEED + RESULTS,
        "gzip2_small_window": bytes([0x6F, 0x20, 0x00]) + SEED + LOG * 4,
        "zlib_length_wrapping_window": bytes([0x60, 0x00, 0xFF]) + SEED + LOG,
        "raw_small_window_segments": bytes([0x61, 0x20, 0xFE]) + SEED + DATA,
        "gzip_cut_chunked_wrapping_window": bytes([0x56, 0x08, 0xFE]) + SEED + DATA,
        "raw_bytes_zlib_stream": bytes([0x04, 0x40, 0x00]) + SEED + zlib_log(LOG),
        "raw_bytes_gzip_limited": bytes([0x02, 0xC0, 0x00]) + SEED + gzip.compress(LOG * 20, mtime=0),
    },
    "metric_lines": {
        "data": b"\xff" + SEED + DATA,
        "log_crlf_limit_48": b"\x30" + SEED + LOG + b"\xff\xfe not utf-8\rlast",
        "data_bad_lines": b"\x40" + SEED + b"1439245024\tprint\n\n14x\tprint\t3\n1\tp\t1,5\n1\t\t2\n1\tok\t-0\r\n2\tok\t1e400",
    },
    "reply_json": {
        # [depth][status: < 128 is 200, 128 + i is STATUSES[i], bits 4-6 the reply type]
        # [picked value][body]
        "results": b"\x20\x10\x00" + RESULTS,
        "clusters": b"\x20\x20\x80" + CLUSTERS,
        "status": b"\x20\x00\x40" + STATUS,
        "started": b"\x20\x30\xc0" + STARTED,
        "not_found_404": b"\x20\x80\x00" + NOT_FOUND,
        "escapes_and_numbers": b'\x08\x40\x90 {"s":"a\\u00e9\\ud83d\\ude00\\n\\"","n":[-0,1.5e-3,18446744073709551615,1e400],"z":null,"b":[true,false,{}]} ',
    },
}

# RTM PDUs for the messaging targets.
RTM_DATA = b'{"action":"rtm/subscription/data","body":{"subscription_id":"chan","position":"1479315802:6","messages":[{"k":1},"two",null]}}'
RTM_FRAMES = {
    "data": RTM_DATA,
    "publish_ok": b'{"action":"rtm/publish/ok","id":7,"body":{"position":"1479315802:0"}}',
    "read_ok_escapes": b' {"action": "rtm/read/ok", "id": 0, "body": {"message": {"a":"\\u00e9\\ud83d\\ude00"}, "position": "1:2"}} ',
    "handshake_ok": b'{"action":"auth/handshake/ok","id":0,"body":{"data":{"nonce":"MTI0=="}}}',
    "sub_error": b'{"action":"rtm/subscription/error","body":{"subscription_id":"c","error":"out_of_sync","reason":"r","position":null}}',
    "fast_forward": b'{"action":"rtm/subscription/info","body":{"info":"fast_forward","subscription_id":"c","position":"5:1"}}',
    "general_error": b'{"action":"/error","body":{"error":"e","reason":"r"}}',
    "search_data_string_id": b'{"action":"rtm/search/data","id":"9","body":{"channels":["a","b"]}}',
    "missing_id": b'{"action":"rtm/subscribe/ok","body":{}}',
    "escaped_action": b'{"action":"rtm\\/publish\\/ok","id":1}',
}


def noise(seed, n):
    """Deterministic pseudo-random bytes (structured targets decode them into events)."""
    state = seed
    out = bytearray()
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        out.append(state >> 56)
    return bytes(out)


# ws_frames: [flags][seed][bytes]; flags bit 0 = built mode, bits 1-3 = buffer size.
SEEDS["ws_frames"] = {
    "rfc_fragments_ping_close": b"\x0c" + SEED + b"\x01\x03Hel\x89\x00\x80\x02lo\x89\x05Hello"
    + b"\x81" + bytes([len(RTM_DATA)]) + RTM_DATA + b"\x8a\x00\x88\x05\x03\xe8bye",
    "masked_error": b"\x0c" + SEED + b"\x81\x02{}\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58",
    "too_large_16bit": b"\x06" + SEED + b"\x82\x7e\x00\x80" + b"x" * 128,
    "built": b"\x01" + SEED + noise(1, 300),
    "built_slack": b"\x31" + SEED + bytes(range(256)),
}
# rtm_pdu: [mode][rest]; mode & 3: 0 or 3 = received frame (mode & 4: serde_json
# differential), 1 = a request to encode ((mode >> 2) % 3 picks the checks: 0 serde_json,
# 1 read back, 2 buffers), 2 = string (mode & 4: read back).
SEEDS["rtm_pdu"] = {"frame_" + k: b"\x00" + v for k, v in RTM_FRAMES.items()}
SEEDS["rtm_pdu"].update({
    "requests": b"\x01" + bytes(range(256)) + noise(2, 300),
    "requests2": b"\x01" + noise(3, 600),
    "requests_read_back": b"\x05" + bytes(range(256)) + noise(2, 300),
    "requests_read_back2": b"\x05" + noise(3, 600),
    "requests_buffers": b"\x09" + bytes(range(256)) + noise(2, 300),
    "requests_buffers2": b"\x09" + noise(3, 600),
    "string": b"\x02" + 'a"b\\c\x00\x1f\n\t\x7f é€😀'.encode(),
    "string_read_back": b"\x06" + 'a"b\\c\x00\x1f\n\t\x7f é€😀'.encode(),
    "frame_data_serde": b"\x04" + RTM_DATA,
})
# rtm_client: [capacities/options][event bytes]
SEEDS["rtm_client"] = {
    "events_%d" % i: bytes([opts]) + noise(10 + i, 900)
    for i, opts in enumerate([0x00, 0x05, 0x0E, 0x13, 0x1C])
}



class Unstructured:
    """Writes the bytes that `arbitrary::Unstructured` (1.x) turns back into the given
    choices: `int_in_range` reads big-endian bytes, as many as the range's width needs
    (at most the integer type's size), and takes them modulo the range's size."""

    def __init__(self):
        self.out = bytearray()

    def int(self, lo, hi, value, size=8):
        assert lo <= value <= hi, (lo, hi, value)
        delta, n = hi - lo, 0
        while n < size and delta >> (8 * n) > 0:
            n += 1
        self.out += (value - lo).to_bytes(n, "big") if n else b""
        return self

    def u8(self, lo, hi, value):
        return self.int(lo, hi, value, 1)

    def ratio(self, denominator, value):
        return self.int(1, denominator, 1 if value else 2)

    def choose(self, length, index):
        return self.int(0, length - 1, index)

    def raw(self, data):
        self.out += data
        return self


def link_setup(u, ping_ms=8000, dead_ms=30000, queue=20):
    """rtm_link's settings: buffer sizes, the client's config, the link's config."""
    u.u8(0, 255, 200).u8(0, 255, 40)  # rx, tx extra
    u.int(0, 3000, 500).int(0, 20000, 4000).int(0, 4, 0, 4).int(1, 40, queue)
    u.raw(b"\x5e\xed\x00\x00\x00\x00\x00\x01")  # jitter seed
    u.int(0, 20000, 5000).int(0, 40000, 10000)  # auth, connect timeouts
    u.int(0, 8000, ping_ms).int(0, 30000, dead_ms).int(0, 3000, 1000)
    u.ratio(3, False).raw(b"\x07\x00\x00\x00\x00\x00\x00\x00")  # user agent, seed


def op(u, n):
    return u.u8(0, 28, n)


def write_all(u):
    """The model adapter writes a whole transmit."""
    return u.u8(0, 9, 0)


def feed_whole(u):
    """Server bytes in one read, no write between."""
    return u.ratio(3, False).ratio(4, False)


def upgrade(u):
    op(u, 23).u8(0, 3, 1).ratio(2, False)
    feed_whole(u)


def reply(u, index_of_sent, suffix=0, pieces=1):
    """A reply to the `index_of_sent`-th PDU with an id, as one server frame."""
    u.ratio(5, False).choose(4, 0).u8(0, 7, 1)
    if index_of_sent == 0:
        u.ratio(2, True)
    else:
        u.ratio(2, False).choose(index_of_sent + 1, index_of_sent)
    u.choose(5, suffix).int(1, 3, pieces)


def publish(u, deadline_ms=None, connected=True):
    op(u, 7).ratio(10, False).choose(5, 0).ratio(10, False).choose(6, 1).ratio(3, False)
    if deadline_ms is None:
        u.u8(0, 5, 0)
    else:
        u.u8(0, 5, 4).int(1, 60000, deadline_ms)
    if connected:
        write_all(u)


def rtm_link_exchange():
    """Connect, publish with ack, reply, subscribe, reply and data, a ping answered,
    stop with the close handshake."""
    u = Unstructured().raw(b"\x08")
    link_setup(u)
    op(u, 4)  # start: Connect
    op(u, 16)  # connected
    write_all(u)  # the upgrade request
    upgrade(u)
    publish(u, 5000)
    op(u, 20).u8(1, 4, 1)
    reply(u, 0)
    feed_whole(u)
    # subscribe "b", simple, no position / history / filter
    op(u, 14).ratio(10, False).choose(5, 1).choose(3, 0)
    u.ratio(4, False).ratio(4, False).ratio(5, False)
    write_all(u)
    op(u, 20).u8(1, 4, 2)
    reply(u, 1)
    u.ratio(5, False).choose(4, 0).u8(0, 7, 5).ratio(8, False).int(1, 20, 3).int(1, 3, 1)
    feed_whole(u)
    # a ping, answered with a pong
    op(u, 24).u8(0, 4, 0).int(0, 125, 4).int(0, 8, 0).raw(b"ping")
    feed_whole(u)
    write_all(u)
    op(u, 5)  # stop: the close frame
    write_all(u)
    # the server's close frame; the link then asks to close the transport
    op(u, 25).int(0, 64, 4).raw(b"\x88\x02\x03\xe8")
    feed_whole(u)
    u.ratio(2, True)
    return u.out


def rtm_link_fragments_dead_peer():
    """A reply in three fragments with pings between, then silence: a ping after the
    interval, the dead peer, the reconnect."""
    u = Unstructured().raw(b"\x08")
    link_setup(u, ping_ms=2000, dead_ms=5000)
    op(u, 4)
    publish(u, connected=False)  # queued before the connection
    op(u, 16)
    write_all(u)
    upgrade(u)
    write_all(u)  # the queued publish
    op(u, 20).u8(1, 4, 1)
    u.ratio(5, False).choose(4, 0).u8(0, 7, 1).ratio(2, True).choose(5, 0).int(1, 3, 3)
    u.int(0, 64, 10).int(0, 64, 30)  # the cuts
    u.ratio(3, True).int(0, 125, 2).int(0, 8, 0).raw(b"p1").ratio(3, False)
    feed_whole(u)
    write_all(u)  # the pong
    op(u, 1).ratio(4, False)  # handle_timeout at the ping time
    write_all(u)  # our ping
    op(u, 1).ratio(4, False)  # dead peer
    u.ratio(2, True)  # closed at once; the reconnect was due already
    op(u, 16)
    write_all(u)
    upgrade(u)
    return u.out


def rtm_link_too_large():
    """Small buffers: a message larger than rx is refused with 1009."""
    u = Unstructured().raw(b"\x01")
    link_setup(u)
    op(u, 4)
    op(u, 16)
    write_all(u)
    upgrade(u)
    op(u, 27).int(0, 20000, 1000).ratio(2, True)
    feed_whole(u)
    write_all(u)  # the close frame with 1009
    u.ratio(2, False)
    op(u, 19)  # the transport closes
    return u.out


SEEDS["rtm_link"] = {
    "exchange": rtm_link_exchange(),
    "fragments_dead_peer": rtm_link_fragments_dead_peer(),
    "too_large": rtm_link_too_large(),
}



def server_frame(first, payload, masked=False, form=None):
    """A frame as a server writes it (unmasked, minimal length) unless told otherwise:
    `form` 7 / 16 / 64 forces a length form."""
    n = len(payload)
    mask_bit = 0x80 if masked else 0
    if form is None:
        form = 7 if n < 126 else (16 if n < 65536 else 64)
    out = bytes([first])
    if form == 7:
        out += bytes([mask_bit | n])
    elif form == 16:
        out += bytes([mask_bit | 126]) + n.to_bytes(2, "big")
    else:
        out += bytes([mask_bit | 127]) + n.to_bytes(8, "big")
    if masked:
        out += b"\0\0\0\0"
    return out + payload


# ws_differential: [flags: buffer 16/125/1000/70000, bit 2 built frames][seed][payload]
f = server_frame
SEEDS["ws_differential"] = {
    "messages": b"\x02" + SEED + f(0x81, b'{"action":"rtm/publish/ok","id":1}') + f(0x89, b"hb")
    + f(0x01, b"caf\xc3") + f(0x8A, b"") + f(0x80, b"\xa9!") + f(0x82, bytes(200))
    + f(0x88, b"\x03\xe8bye"),
    "close_1014": b"\x00" + SEED + f(0x88, b"\x03\xf6x"),
    "close_1005": b"\x00" + SEED + f(0x81, b"a") + f(0x88, b"\x03\xedx"),
    "non_minimal": b"\x01" + SEED + f(0x81, b"ok") + f(0x81, b"short", form=16) + f(0x81, b"later"),
    "reserved_bits_cut": b"\x02" + SEED + f(0x81, b"x") + f(0xC1, b"abcdef")[:4],
    "masked": b"\x02" + SEED + f(0x81, b"abc", masked=True),
    "too_large_fragments": b"\x00" + SEED + f(0x01, bytes(10)) + f(0x00, bytes(10)),
    "bad_utf8_fragment": b"\x02" + SEED + f(0x01, b"ok\xff") + f(0x80, b"x"),
    # built: text "hello"; a ping without FIN; binary with a non-minimal length; a close
    "built": b"\x06" + SEED + bytes([0x01, 5]) + b"hello" + bytes([0x0C, 2]) + b"hi"
    + bytes([0x12, 3]) + b"abc" + bytes([0x03, 2]) + b"\x03\xe8",
}

# rtm_cbor: [mode][rest]; 0 = a received CBOR frame, 1 = JSON text to write as CBOR.
# The frames are the Python SDK's (and a conforming server's) payloads.
CBOR_FRAMES = {
    "publish_ack": "a366616374696f6e6e72746d2f7075626c6973682f6f6b6269640064626f6479a168706f736974696f6e6c313530303030303030303a30",
    "data_with_bytes": "a266616374696f6e7572746d2f737562736372697074696f6e2f6461746164626f6479a36f737562736372697074696f6e5f696467616e696d616c7368706f736974696f6e6c313530303030303030303a32686d6573736167657381a36377686f657a65627261616e07637261774200ff",
    "publish_error": "a366616374696f6e7172746d2f7075626c6973682f6572726f726269640164626f6479a2656572726f7274617574686f72697a6174696f6e5f64656e69656466726561736f6e6c556e617574686f72697a6564",
    "auth_handshake": "a366616374696f6e6e617574682f68616e647368616b6564626f6479a2666d6574686f646b726f6c655f7365637265746464617461a164726f6c656973757065727573657262696400",
    # indefinite lengths, a tag, a half float, a non-minimal id
    "lenient": "bf66616374696f6e6e72746d2f7075626c6973682f6f6b626964180064626f6479bf61789f01c1f93e00ffffff",
}
SEEDS["rtm_cbor"] = {"frame_" + k: b"\x00" + bytes.fromhex(v) for k, v in CBOR_FRAMES.items()}
SEEDS["rtm_cbor"].update({
    "json_message": b"\x01" + '{"who":"zebra","n":7,"f":1.5,"neg":-9223372036854775809,"s":"\\u00e9\\n","a":[true,false,null,{}]}'.encode(),
    "json_deep": b"\x01" + b"[" * 33 + b"]" * 33,
})

for target, seeds in SEEDS.items():
    folder = os.path.join(HERE, "seeds", target)
    os.makedirs(folder, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
