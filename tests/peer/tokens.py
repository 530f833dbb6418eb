#!/usr/bin/env python3
"""An independent token maker for room-service's authentication tests (SPEC §12.3).

JWTs come from PyJWT with keys made by `cryptography`; UserSigs from Tencent's official
`tls-sig-api-v2` package. Nothing here shares code with the service.

Usage: tokens.py < spec.json > made.json, where the spec is
  {"hs_secret": "...", "sdk_app_id": N, "im_key": "...",
   "jwts": {"name": {"alg": "RS256", "key": "a|b|hs|hs_other|public_as_hs|none",
                     "kid": "ka" (optional), "claims": {...}}, ...},
   "usersigs": {"name": {"user": "alice", "sdk_app_id": N, "key": "...", "expire": 3600,
                         "age": 0}, ...}}
Claims "exp", "nbf" and "iat" are offsets in seconds from now. The answer is
  {"public_pem": "<RSA key a, PEM>", "jwks": {"keys": [key a as kid "ka"]},
   "tokens": {"name": "<token>", ...}}
"""
import base64
import hashlib
import hmac
import json
import sys
import time

import jwt
import TLSSigAPIv2
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

SPEC = json.load(sys.stdin)
NOW = int(time.time())
KEYS = {name: rsa.generate_private_key(public_exponent=65537, key_size=2048) for name in ("a", "b")}
PUBLIC_PEM = KEYS["a"].public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def claims_of(spec):
    claims = dict(spec.get("claims", {}))
    for key in ("exp", "nbf", "iat"):
        if key in claims:
            claims[key] = NOW + int(claims[key])
    return claims


def make_jwt(spec):
    claims, alg = claims_of(spec), spec["alg"]
    headers = {"kid": spec["kid"]} if "kid" in spec else None
    key = spec["key"]
    if key == "public_as_hs":
        # The classic key-confusion forgery: HMAC keyed with the verifier's public key. PyJWT
        # refuses to do it, so it is written out here.
        header = {"alg": alg, "typ": "JWT", **(headers or {})}
        signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
        mac = hmac.new(PUBLIC_PEM, signing_input.encode(), hashlib.sha256).digest()
        return signing_input + "." + b64url(mac)
    if key == "none":
        return jwt.encode(claims, None, algorithm="none", headers=headers)
    secret = {"hs": SPEC["hs_secret"], "hs_other": SPEC["hs_secret"] + "-other"}.get(key)
    signing_key = secret if secret is not None else KEYS[key]
    return jwt.encode(claims, signing_key, algorithm=alg, headers=headers)


def make_usersig(spec):
    real_time = time.time
    time.time = lambda: real_time() - int(spec.get("age", 0))
    try:
        return TLSSigAPIv2.TLSSigAPIv2(spec["sdk_app_id"], spec["key"]).gen_sig(spec["user"], int(spec["expire"]))
    finally:
        time.time = real_time


jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEYS["a"].public_key()))
jwk.update({"kid": "ka", "alg": "RS256", "use": "sig"})
tokens = {name: make_jwt(spec) for name, spec in SPEC.get("jwts", {}).items()}
tokens.update({name: make_usersig(spec) for name, spec in SPEC.get("usersigs", {}).items()})
json.dump({"public_pem": PUBLIC_PEM.decode(), "jwks": {"keys": [jwk]}, "tokens": tokens}, sys.stdout)
