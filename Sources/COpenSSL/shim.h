#ifndef CALLEND_COPENSSL_SHIM_H
#define CALLEND_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <openssl/x509v3.h>

/* Macros and variadic calls of OpenSSL that Swift cannot use directly. */
static inline const char *copenssl_version_text(void) { return OpenSSL_version(OPENSSL_VERSION); }
static inline int copenssl_ctx_require_tls12(SSL_CTX *ctx) { return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); }
static inline int copenssl_set_server_name(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }
static inline void copenssl_ctx_enable_partial_writes(SSL_CTX *ctx) {
    /* Non-blocking writes may complete partially and be retried from a moved buffer. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}
#endif
