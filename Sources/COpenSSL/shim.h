#ifndef CALLEND_COPENSSL_SHIM_H
#define CALLEND_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <openssl/x509v3.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/srtp.h>

/* Macros and variadic calls of OpenSSL that Swift cannot use directly. */
static inline const char *copenssl_version_text(void) { return OpenSSL_version(OPENSSL_VERSION); }
static inline int copenssl_ctx_require_tls12(SSL_CTX *ctx) { return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); }
static inline int copenssl_set_server_name(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }
static inline void copenssl_ctx_enable_partial_writes(SSL_CTX *ctx) {
    /* Non-blocking writes may complete partially and be retried from a moved buffer. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

/* DTLS-SRTP (RFC 5763/5764): an ECDSA P-256 key, DTLS timers and MTU, the SRTP profile chosen. */
static inline EVP_PKEY *copenssl_generate_p256_key(void) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, NULL);
    if (!ctx) return NULL;
    if (EVP_PKEY_keygen_init(ctx) <= 0 || EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx, NID_X9_62_prime256v1) <= 0
        || EVP_PKEY_keygen(ctx, &key) <= 0) key = NULL;
    EVP_PKEY_CTX_free(ctx);
    return key;
}
static inline int copenssl_ctx_require_dtls12(SSL_CTX *ctx) { return (int)SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION); }
static inline void copenssl_set_dtls_mtu(SSL *ssl, long mtu) {
    SSL_set_options(ssl, SSL_OP_NO_QUERY_MTU);
    DTLS_set_link_mtu(ssl, mtu);
}
/* Milliseconds until the DTLS retransmission timer fires, or -1 when none runs. */
static inline long copenssl_dtls_timeout_ms(SSL *ssl) {
    struct timeval tv;
    if (DTLSv1_get_timeout(ssl, &tv) != 1) return -1;
    return (long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}
static inline int copenssl_dtls_handle_timeout(SSL *ssl) { return (int)DTLSv1_handle_timeout(ssl); }
/* Retransmission timer: 200 ms, doubling to 3 s (RFC 6347's 1 s start would add a second to
   call setup for every lost flight). */
static inline unsigned int copenssl_dtls_timer(SSL *ssl, unsigned int previous_us) {
    (void)ssl;
    return previous_us == 0 ? 200000u : (previous_us >= 1500000u ? 3000000u : previous_us * 2);
}
static inline void copenssl_dtls_use_short_timer(SSL *ssl) { DTLS_set_timer_cb(ssl, copenssl_dtls_timer); }
static inline void copenssl_bio_mem_eof_retry(BIO *bio) { BIO_set_mem_eof_return(bio, -1); }
static inline unsigned long copenssl_selected_srtp_profile(SSL *ssl) {
    SRTP_PROTECTION_PROFILE *p = SSL_get_selected_srtp_profile(ssl);
    return p ? p->id : 0;
}
#endif
