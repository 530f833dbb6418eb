#!/usr/bin/env python3
"""An independent Tencent-IM peer for room-service's tests.

It checks every send_group_msg call the way Tencent does, with Tencent's own UserSig code
(the official `tls-sig-api-v2` package from PyPI computes the expected signature), and checks
the request body against SPEC §8. It shares no code with the Rust client or the Rust fake.

Usage: tencent_im_peer.py PORT SDKAPPID SECRET_KEY ADMIN_IDENTIFIER
GET /peer/messages answers the accepted messages as a JSON list.
"""
import base64
import json
import sys
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import TLSSigAPIv2

PORT, APP, KEY, ADMIN = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
OFFICIAL = TLSSigAPIv2.TLSSigAPIv2(APP, KEY)
ACCEPTED = []


def fail(code, info):
    return {"ActionStatus": "FAIL", "ErrorCode": code, "ErrorInfo": info}


def check_usersig(usersig, identifier):
    try:
        raw = usersig.replace("*", "+").replace("-", "/").replace("_", "=")
        doc = json.loads(zlib.decompress(base64.b64decode(raw)))
    except Exception:  # noqa: BLE001 - any decoding failure is Tencent's 70003
        return fail(70003, "usersig undecodable")
    if doc.get("TLS.identifier") != identifier:
        return fail(70013, "identifier mismatch")
    if int(doc.get("TLS.sdkappid", 0)) != APP:
        return fail(70014, "sdkappid mismatch")
    t, expire = int(doc["TLS.time"]), int(doc["TLS.expire"])
    # Tencent's own HMAC, from the official package.
    expected = OFFICIAL._TLSSigAPIv2__hmacsha256(identifier, t, expire, base64_userbuf=None).decode()
    if doc.get("TLS.sig") != expected:
        return fail(70009, "bad signature")
    if t + expire < time.time():
        return fail(70001, "usersig expired")
    return None


def check_body(body):
    if not isinstance(body.get("GroupId"), str) or not body["GroupId"] or len(body["GroupId"].encode()) > 48:
        return fail(10015, "bad GroupId")
    if not isinstance(body.get("Random"), int) or not 0 <= body["Random"] <= 0xFFFFFFFF:
        return fail(10004, "bad Random")
    # One message carries 1..N custom elements, one per event, in order (a pack).
    elems = body.get("MsgBody")
    if not isinstance(elems, list) or not elems or any(e.get("MsgType") != "TIMCustomElem" for e in elems):
        return fail(10004, "bad MsgBody")
    custom = json.loads(body.get("CloudCustomData", "{}"))
    ids = custom.get("event_ids")
    if not isinstance(ids, list) or len(ids) != len(elems):
        return fail(10004, "CloudCustomData does not name one event per element")
    size = 0
    for event_id, elem in zip(ids, elems):
        content = elem.get("MsgContent", {})
        if not isinstance(content.get("Data"), str) or not isinstance(content.get("Desc"), str):
            return fail(10004, "bad MsgContent")
        envelope = json.loads(content["Data"])
        if event_id != envelope.get("event_id") or content["Desc"] != envelope.get("event_type"):
            return fail(10004, "CloudCustomData/Desc disagree with the envelope")
        size += len(content["Data"].encode()) + len(content["Desc"].encode())
    if body.get("MsgPriority") not in ("High", "Normal", "Low", "Lowest"):
        return fail(10004, "bad MsgPriority")
    # Tencent bounds a message's content at 12 KB.
    if size > 12 * 1024:
        return fail(80002, "message too long")
    return None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, doc):
        data = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer(ACCEPTED)

    def do_POST(self):
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if url.path != "/v4/group_open_http_svc/send_group_msg" or q.get("contenttype") != "json":
            return self.answer(fail(10004, "bad path or contenttype"))
        if q.get("sdkappid") != str(APP) or q.get("identifier") != ADMIN or "random" not in q:
            return self.answer(fail(10004, "bad query"))
        problem = check_usersig(q.get("usersig", ""), q["identifier"])
        if problem is None:
            try:
                doc = json.loads(body)
                problem = check_body(doc)
            except Exception:  # noqa: BLE001 - an unparsable body is 10004
                problem = fail(10004, "body is not JSON")
        if problem is not None:
            return self.answer(problem)
        ACCEPTED.append(doc)
        self.answer({"ActionStatus": "OK", "ErrorCode": 0, "ErrorInfo": "", "MsgTime": int(time.time()), "MsgSeq": len(ACCEPTED)})


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    print("ready", flush=True)
    server.serve_forever()
