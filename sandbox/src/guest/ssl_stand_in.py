# FrogNano's stand-in for CPython's `_ssl` extension, which the WebAssembly (WASI) build of
# CPython lacks (WASI has no TLS). With it the standard library's `ssl` module imports, so code
# that only makes and configures TLS contexts runs: HTTP clients built in tests and never
# connected (respx, pytest-httpx), type checks against `ssl.SSLContext`, configuration code.
# Anything that would need TLS itself (a handshake, reading certificates) raises an `SSLError`
# marked as a platform gap, which FrogNano's pytest plugin labels "ssl".
#
# Installed only in the sandbox's pytest layer as `_ssl`; native runs use the real module.

import os as _os

OPENSSL_VERSION = "OpenSSL 3.0.0 (FrogNano stand-in: WebAssembly has no TLS)"
OPENSSL_VERSION_INFO = (3, 0, 0, 0, 0)
OPENSSL_VERSION_NUMBER = 0x30000000
_OPENSSL_API_VERSION = (3, 0, 0, 0, 0)
_DEFAULT_CIPHERS = (
    "@SECLEVEL=2:ECDH+AESGCM:ECDH+CHACHA20:ECDH+AES:DHE+AES:!aNULL:!eNULL:!aDSS:!SHA1:!AESCCM"
)

HAS_SNI = HAS_ECDH = HAS_ALPN = HAS_PSK = HAS_TLS_UNIQUE = True
HAS_TLSv1 = HAS_TLSv1_1 = HAS_TLSv1_2 = HAS_TLSv1_3 = True
HAS_NPN = HAS_SSLv2 = HAS_SSLv3 = HAS_PHA = HAS_PSK_TLS13 = False

PROTOCOL_SSLv23 = PROTOCOL_TLS = 2
PROTOCOL_TLSv1, PROTOCOL_TLSv1_1, PROTOCOL_TLSv1_2 = 3, 4, 5
PROTOCOL_TLS_CLIENT, PROTOCOL_TLS_SERVER = 16, 17

PROTO_MINIMUM_SUPPORTED, PROTO_MAXIMUM_SUPPORTED = -2, -1
PROTO_SSLv3, PROTO_TLSv1, PROTO_TLSv1_1, PROTO_TLSv1_2, PROTO_TLSv1_3 = 768, 769, 770, 771, 772

CERT_NONE, CERT_OPTIONAL, CERT_REQUIRED = 0, 1, 2
ENCODING_PEM, ENCODING_DER = 1, 2

OP_ALL = 0x80000050
OP_NO_SSLv2 = OP_SINGLE_DH_USE = OP_SINGLE_ECDH_USE = 0
OP_LEGACY_SERVER_CONNECT = 0x4
OP_ENABLE_KTLS = 0x8
OP_IGNORE_UNEXPECTED_EOF = 0x80
OP_NO_TICKET = 0x4000
OP_NO_COMPRESSION = 0x20000
OP_ENABLE_MIDDLEBOX_COMPAT = 0x100000
OP_CIPHER_SERVER_PREFERENCE = 0x400000
OP_NO_SSLv3 = 0x2000000
OP_NO_TLSv1 = 0x4000000
OP_NO_TLSv1_2 = 0x8000000
OP_NO_TLSv1_1 = 0x10000000
OP_NO_TLSv1_3 = 0x20000000
OP_NO_RENEGOTIATION = 0x40000000

VERIFY_DEFAULT = 0
VERIFY_CRL_CHECK_LEAF = 0x4
VERIFY_CRL_CHECK_CHAIN = 0xC
VERIFY_X509_STRICT = 0x20
VERIFY_ALLOW_PROXY_CERTS = 0x40
VERIFY_X509_TRUSTED_FIRST = 0x8000
VERIFY_X509_PARTIAL_CHAIN = 0x80000

HOSTFLAG_ALWAYS_CHECK_SUBJECT = 0x1
HOSTFLAG_NO_WILDCARDS = 0x2
HOSTFLAG_NO_PARTIAL_WILDCARDS = 0x4
HOSTFLAG_MULTI_LABEL_WILDCARDS = 0x8
HOSTFLAG_SINGLE_LABEL_SUBDOMAINS = 0x10
HOSTFLAG_NEVER_CHECK_SUBJECT = 0x20

SSL_ERROR_SSL = 1
SSL_ERROR_WANT_READ = 2
SSL_ERROR_WANT_WRITE = 3
SSL_ERROR_WANT_X509_LOOKUP = 4
SSL_ERROR_SYSCALL = 5
SSL_ERROR_ZERO_RETURN = 6
SSL_ERROR_WANT_CONNECT = 7
SSL_ERROR_EOF = 8
SSL_ERROR_INVALID_ERROR_CODE = 10

ALERT_DESCRIPTION_CLOSE_NOTIFY = 0
ALERT_DESCRIPTION_UNEXPECTED_MESSAGE = 10
ALERT_DESCRIPTION_BAD_RECORD_MAC = 20
ALERT_DESCRIPTION_RECORD_OVERFLOW = 22
ALERT_DESCRIPTION_DECOMPRESSION_FAILURE = 30
ALERT_DESCRIPTION_HANDSHAKE_FAILURE = 40
ALERT_DESCRIPTION_BAD_CERTIFICATE = 42
ALERT_DESCRIPTION_UNSUPPORTED_CERTIFICATE = 43
ALERT_DESCRIPTION_CERTIFICATE_REVOKED = 44
ALERT_DESCRIPTION_CERTIFICATE_EXPIRED = 45
ALERT_DESCRIPTION_CERTIFICATE_UNKNOWN = 46
ALERT_DESCRIPTION_ILLEGAL_PARAMETER = 47
ALERT_DESCRIPTION_UNKNOWN_CA = 48
ALERT_DESCRIPTION_ACCESS_DENIED = 49
ALERT_DESCRIPTION_DECODE_ERROR = 50
ALERT_DESCRIPTION_DECRYPT_ERROR = 51
ALERT_DESCRIPTION_PROTOCOL_VERSION = 70
ALERT_DESCRIPTION_INSUFFICIENT_SECURITY = 71
ALERT_DESCRIPTION_INTERNAL_ERROR = 80
ALERT_DESCRIPTION_USER_CANCELLED = 90
ALERT_DESCRIPTION_NO_RENEGOTIATION = 100
ALERT_DESCRIPTION_UNSUPPORTED_EXTENSION = 110
ALERT_DESCRIPTION_CERTIFICATE_UNOBTAINABLE = 111
ALERT_DESCRIPTION_UNRECOGNIZED_NAME = 112
ALERT_DESCRIPTION_BAD_CERTIFICATE_STATUS_RESPONSE = 113
ALERT_DESCRIPTION_BAD_CERTIFICATE_HASH_VALUE = 114
ALERT_DESCRIPTION_UNKNOWN_PSK_IDENTITY = 115


class SSLError(OSError):
    """An error in the SSL implementation."""

    library = None
    reason = None

    def __str__(self):
        return self.strerror if self.strerror else super().__str__()


class SSLZeroReturnError(SSLError):
    """SSL/TLS session closed cleanly."""


class SSLWantReadError(SSLError):
    """Non-blocking SSL socket needs to read more data."""


class SSLWantWriteError(SSLError):
    """Non-blocking SSL socket needs to write more data."""


class SSLSyscallError(SSLError):
    """System error when attempting SSL operation."""


class SSLEOFError(SSLError):
    """SSL/TLS connection terminated abruptly."""


class SSLCertVerificationError(SSLError, ValueError):
    """A certificate could not be verified."""


def _unavailable(what):
    error = SSLError(
        SSL_ERROR_SSL,
        f"{what} is not possible here: WebAssembly (WASI) has no TLS (FrogNano's `_ssl` "
        "stand-in only makes and configures contexts)",
    )
    error.library, error.reason = "FROGNANO", "TLS_UNAVAILABLE"
    # Read by FrogNano's pytest plugin: the failure is a platform gap, labelled "ssl".
    error.frognano_platform_gap = "ssl"
    return error


_OBJECTS = (
    (129, "serverAuth", "TLS Web Server Authentication", "1.3.6.1.5.5.7.3.1"),
    (130, "clientAuth", "TLS Web Client Authentication", "1.3.6.1.5.5.7.3.2"),
)


def txt2obj(txt, name=False):
    for obj in _OBJECTS:
        if txt == obj[3] or (name and txt in obj[1:3]):
            return obj
    raise ValueError(f"unknown object '{txt}'")


def nid2obj(nid):
    for obj in _OBJECTS:
        if nid == obj[0]:
            return obj
    raise ValueError(f"unknown NID {nid}")


def RAND_status():
    return True


def RAND_add(string, entropy):
    pass


def RAND_bytes(n):
    return _os.urandom(n)


def get_sigalgs():
    return []


def get_default_verify_paths():
    return ("SSL_CERT_FILE", "/etc/ssl/cert.pem", "SSL_CERT_DIR", "/etc/ssl/certs")


def _test_decode_cert(path):
    raise _unavailable("decoding a certificate")


class MemoryBIO:
    """A buffer of bytes, as the real memory BIO keeps them."""

    def __init__(self):
        self._buffer = bytearray()
        self._eof_written = False

    @property
    def pending(self):
        return len(self._buffer)

    @property
    def eof(self):
        return self._eof_written and not self._buffer

    def read(self, size=-1):
        size = len(self._buffer) if size < 0 else min(size, len(self._buffer))
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def write(self, data):
        if self._eof_written:
            raise SSLError(SSL_ERROR_SSL, "cannot write() after write_eof()")
        data = memoryview(data).tobytes()
        self._buffer += data
        return len(data)

    def write_eof(self):
        self._eof_written = True


class SSLSession:
    def __new__(cls, *args, **kwargs):
        raise TypeError("cannot create '_ssl.SSLSession' instances")


class Certificate:
    def __new__(cls, *args, **kwargs):
        raise TypeError("cannot create '_ssl.Certificate' instances")


class _SSLSocket:
    def __new__(cls, *args, **kwargs):
        raise TypeError("cannot create '_ssl._SSLSocket' instances")


def _readable(path):
    # The real context reads the file at once; a missing one fails the same way here.
    if path is not None:
        with open(path, "rb"):
            pass


def _value_property(name, check=None):
    def get(self):
        return getattr(self, name)

    def set(self, value):
        if check is not None:
            check(self, value)
        object.__setattr__(self, name, value)

    return property(get, set)


def _check_verify_mode(context, value):
    if value not in (CERT_NONE, CERT_OPTIONAL, CERT_REQUIRED):
        raise ValueError("invalid value for verify_mode")
    if value == CERT_NONE and context._check_hostname_value:
        raise ValueError("Cannot set verify_mode to CERT_NONE when check_hostname is enabled.")


class _SSLContext:
    """A TLS context that records its configuration; it cannot wrap a connection."""

    def __new__(cls, protocol=PROTOCOL_TLS):
        if protocol not in (PROTOCOL_TLS, PROTOCOL_TLS_CLIENT, PROTOCOL_TLS_SERVER,
                            PROTOCOL_TLSv1, PROTOCOL_TLSv1_1, PROTOCOL_TLSv1_2):
            raise ValueError("invalid or unsupported protocol version %r" % (protocol,))
        self = object.__new__(cls)
        client = protocol == PROTOCOL_TLS_CLIENT
        object.__setattr__(self, "_protocol", protocol)
        object.__setattr__(self, "_check_hostname_value", client)
        object.__setattr__(self, "_verify_mode_value", CERT_REQUIRED if client else CERT_NONE)
        object.__setattr__(
            self,
            "_options_value",
            OP_ALL | OP_NO_SSLv2 | OP_NO_SSLv3 | OP_NO_COMPRESSION
            | OP_CIPHER_SERVER_PREFERENCE | OP_ENABLE_MIDDLEBOX_COMPAT,
        )
        object.__setattr__(self, "_verify_flags_value", VERIFY_X509_TRUSTED_FIRST)
        object.__setattr__(self, "_minimum_version_value", PROTO_MINIMUM_SUPPORTED)
        object.__setattr__(self, "_maximum_version_value", PROTO_MAXIMUM_SUPPORTED)
        object.__setattr__(self, "_host_flags_value", 0)
        object.__setattr__(self, "_msg_callback_value", None)
        object.__setattr__(self, "_sni_callback_value", None)
        object.__setattr__(self, "_keylog_filename_value", None)
        object.__setattr__(self, "_post_handshake_auth_value", False)
        object.__setattr__(self, "_num_tickets_value", 2)
        object.__setattr__(self, "_ciphers", _DEFAULT_CIPHERS)
        object.__setattr__(self, "_alpn_protocols", b"")
        return self

    @property
    def protocol(self):
        return self._protocol

    @property
    def security_level(self):
        return 2

    @property
    def check_hostname(self):
        return self._check_hostname_value

    @check_hostname.setter
    def check_hostname(self, value):
        value = bool(value)
        if value and self._verify_mode_value == CERT_NONE:
            object.__setattr__(self, "_verify_mode_value", CERT_REQUIRED)
        object.__setattr__(self, "_check_hostname_value", value)

    verify_mode = _value_property("_verify_mode_value", _check_verify_mode)
    options = _value_property("_options_value")
    verify_flags = _value_property("_verify_flags_value")
    minimum_version = _value_property("_minimum_version_value")
    maximum_version = _value_property("_maximum_version_value")
    _host_flags = _value_property("_host_flags_value")
    _msg_callback = _value_property("_msg_callback_value")
    sni_callback = _value_property("_sni_callback_value")
    keylog_filename = _value_property("_keylog_filename_value")
    post_handshake_auth = _value_property("_post_handshake_auth_value")
    num_tickets = _value_property("_num_tickets_value")

    def load_verify_locations(self, cafile=None, capath=None, cadata=None):
        if cafile is None and capath is None and cadata is None:
            raise TypeError("cafile, capath and cadata cannot be all omitted")
        _readable(cafile)
        if capath is not None and not _os.path.isdir(capath):
            raise FileNotFoundError(2, "No such file or directory", capath)

    def load_cert_chain(self, certfile, keyfile=None, password=None):
        _readable(certfile)
        _readable(keyfile)

    def load_dh_params(self, path):
        _readable(path)

    def set_default_verify_paths(self):
        pass

    def set_ciphers(self, ciphers):
        object.__setattr__(self, "_ciphers", ciphers)

    def get_ciphers(self):
        return []

    def set_ecdh_curve(self, name):
        pass

    def set_groups(self, groups):
        pass

    def get_groups(self, *, include_aliases=False):
        return []

    def set_ciphersuites(self, ciphersuites):
        pass

    def set_client_sigalgs(self, sigalgs):
        pass

    def set_server_sigalgs(self, sigalgs):
        pass

    def _set_alpn_protocols(self, protos):
        object.__setattr__(self, "_alpn_protocols", bytes(protos))

    def set_psk_client_callback(self, callback):
        pass

    def set_psk_server_callback(self, callback, identity_hint=None):
        pass

    def session_stats(self):
        keys = ("number", "connect", "connect_good", "connect_renegotiate", "accept",
                "accept_good", "accept_renegotiate", "hits", "misses", "timeouts", "cache_full")
        return dict.fromkeys(keys, 0)

    def cert_store_stats(self):
        raise _unavailable("reading the certificate store")

    def get_ca_certs(self, binary_form=False):
        raise _unavailable("reading the certificate store")

    def _wrap_socket(self, sock, server_side, server_hostname=None, *, owner=None, session=None):
        raise _unavailable("a TLS connection")

    def _wrap_bio(self, incoming, outgoing, server_side, server_hostname=None, *, owner=None,
                  session=None):
        raise _unavailable("a TLS connection")
