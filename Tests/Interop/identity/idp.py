"""A test OpenID Connect provider on loopback: the discovery document and a JSON Web Key Set
served by `http.server`, and JSON Web Tokens signed with `cryptography` (RS256, ES256, EdDSA),
among them the malformed and hostile ones a real provider never issues. Its authorization
endpoint signs in `provider.login` (claims) at once, with no page, and its token endpoint
trades the code for an access token when the PKCE verifier matches (S256), as a browser's
sign-in needs.

    provider = Provider()              # serving on http://127.0.0.1:PORT
    key = provider.add_key("ES256")    # published in the key set
    token = provider.token(key, sub="ada", aud="roster", roles=["roster-writers"])
    provider.drop_key(key); provider.close()
"""
import base64
import hashlib
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64json(value):
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def uint(number, size=None):
    size = size or (number.bit_length() + 7) // 8
    return b64url(number.to_bytes(size, "big"))


class Key:
    """A signing key, its id and its public JSON Web Key."""

    def __init__(self, alg):
        self.alg, self.kid = alg, f"{alg.lower()}-{uuid.uuid4().hex[:8]}"
        if alg == "RS256":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            numbers = self.private.public_key().public_numbers()
            self.jwk = {"kty": "RSA", "n": uint(numbers.n), "e": uint(numbers.e)}
        elif alg == "ES256":
            self.private = ec.generate_private_key(ec.SECP256R1())
            numbers = self.private.public_key().public_numbers()
            self.jwk = {"kty": "EC", "crv": "P-256", "x": uint(numbers.x, 32), "y": uint(numbers.y, 32)}
        elif alg == "EdDSA":
            self.private = ed25519.Ed25519PrivateKey.generate()
            raw = self.private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            self.jwk = {"kty": "OKP", "crv": "Ed25519", "x": b64url(raw)}
        else:
            raise ValueError(alg)
        self.jwk.update({"kid": self.kid, "use": "sig", "alg": alg})

    def sign(self, data):
        if self.alg == "RS256":
            return self.private.sign(data, padding.PKCS1v15(), hashes.SHA256())
        if self.alg == "ES256":
            r, s = decode_dss_signature(self.private.sign(data, ec.ECDSA(hashes.SHA256())))
            return r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return self.private.sign(data)

    def public_pem(self):
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


class Provider:
    """Serves discovery and the key set on a free loopback port; counts key-set requests."""

    def __init__(self):
        self.keys, self.jwks_requests, self.lock = [], 0, threading.Lock()
        self.login, self.codes = None, {}
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                path, query = urlsplit(self.path).path, parse_qs(urlsplit(self.path).query)
                if path == "/.well-known/openid-configuration":
                    body = {"issuer": provider.issuer, "jwks_uri": provider.issuer + "/keys",
                            "authorization_endpoint": provider.issuer + "/authorize",
                            "token_endpoint": provider.issuer + "/token",
                            "id_token_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"]}
                elif path == "/keys":
                    with provider.lock:
                        provider.jwks_requests += 1
                        body = {"keys": [key.jwk for key in provider.keys]}
                elif path == "/authorize" and provider.login is not None:
                    code = uuid.uuid4().hex
                    with provider.lock:
                        provider.codes[code] = (query["code_challenge"][0], query["redirect_uri"][0])
                    self.send_response(302)
                    self.send_header("Location", query["redirect_uri"][0] + "?" + urlencode(
                        {"code": code, "state": query["state"][0]}))
                    self.end_headers()
                    return
                else:
                    self.send_error(404)
                    return
                self.reply(body)

            def do_POST(self):
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                with provider.lock:
                    challenge, redirect = provider.codes.pop(form.get("code", [""])[0], (None, None))
                verifier = form.get("code_verifier", [""])[0].encode()
                if urlsplit(self.path).path != "/token" or challenge is None \
                        or b64url(hashlib.sha256(verifier).digest()) != challenge \
                        or form.get("redirect_uri", [""])[0] != redirect:
                    self.reply({"error": "invalid_grant"}, status=400)
                    return
                self.reply({"access_token": provider.token(provider.keys[0], **provider.login),
                            "token_type": "Bearer", "expires_in": 3600})

            def reply(self, body, status=200):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                # A browser's page on another origin reads discovery and the token endpoint.
                self.send_header("Access-Control-Allow-Origin", "*")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add_key(self, alg):
        key = Key(alg)
        with self.lock:
            self.keys.append(key)
        return key

    def drop_key(self, key):
        with self.lock:
            self.keys.remove(key)

    def token(self, key, header=None, signing_input_hook=None, **claims):
        """A token signed by `key`: `iss` this provider's, `iat`/`nbf` now, `exp` in an hour,
        unless `claims` say otherwise (None removes a claim)."""
        now = int(time.time())
        payload = {"iss": self.issuer, "aud": "roster", "iat": now, "nbf": now, "exp": now + 3600}
        payload.update(claims)
        payload = {name: value for name, value in payload.items() if value is not None}
        head = {"alg": key.alg, "kid": key.kid, "typ": "JWT"}
        head.update(header or {})
        signing_input = f"{b64json(head)}.{b64json(payload)}"
        return f"{signing_input}.{b64url(key.sign(signing_input.encode()))}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
