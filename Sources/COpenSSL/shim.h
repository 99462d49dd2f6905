#ifndef CALLEND_COPENSSL_SHIM_H
#define CALLEND_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <openssl/x509v3.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/srtp.h>
#include <openssl/pem.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

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

/* The DNS names of a server context's certificate (subjectAltName), each ended by a NUL, into
   buf (up to cap bytes); returns the bytes all of them need. */
static inline size_t copenssl_ctx_dns_names(SSL_CTX *ctx, char *buf, size_t cap) {
    X509 *cert = SSL_CTX_get0_certificate(ctx);
    if (!cert) return 0;
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    if (!names) return 0;
    size_t used = 0;
    for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *name = sk_GENERAL_NAME_value(names, i);
        if (name->type != GEN_DNS) continue;
        const unsigned char *text = ASN1_STRING_get0_data(name->d.dNSName);
        size_t length = (size_t)ASN1_STRING_length(name->d.dNSName);
        if (used + length + 1 <= cap) { memcpy(buf + used, text, length); buf[used + length] = 0; }
        used += length + 1;
    }
    GENERAL_NAMES_free(names);
    return used;
}
/* When the context's certificate stops being valid, in seconds since 1970 UTC (0: no certificate,
   or a time OpenSSL cannot read). */
static inline int64_t copenssl_ctx_not_after(SSL_CTX *ctx) {
    X509 *cert = SSL_CTX_get0_certificate(ctx);
    if (!cert) return 0;
    struct tm tm;
    if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) return 0;
    return (int64_t)timegm(&tm);
}
static inline int copenssl_handshake_done(SSL *ssl) { return SSL_is_init_finished(ssl); }
/* Adds a v3 extension written as OpenSSL's configuration text ("DNS:a,IP:1.2.3.4",
   "critical,CA:TRUE"), with `issuer` (the certificate itself when self-signed) as its issuer. */
static inline int copenssl_add_extension(X509 *cert, X509 *issuer, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext) return 0;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}
/* The bytes a memory BIO holds (BIO_get_mem_data is a macro). */
static inline long copenssl_bio_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }
static inline int copenssl_write_key_pem(BIO *bio, EVP_PKEY *key) { return PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL); }
static inline X509 *copenssl_read_cert_pem(BIO *bio) { return PEM_read_bio_X509(bio, NULL, NULL, NULL); }
static inline EVP_PKEY *copenssl_read_key_pem(BIO *bio) { return PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL); }
/* The DER SubjectPublicKeyInfo of a certificate's key (i2d_PUBKEY), for a key pin. */
static inline int copenssl_certificate_spki(X509 *cert, unsigned char *out, int cap) {
    EVP_PKEY *key = X509_get0_pubkey(cert);
    if (!key) return -1;
    int length = i2d_PUBKEY(key, NULL);
    if (length <= 0 || length > cap) return -1;
    unsigned char *p = out;
    return i2d_PUBKEY(key, &p);
}
static inline int copenssl_nid_subject_alt_name(void) { return NID_subject_alt_name; }
static inline int copenssl_nid_basic_constraints(void) { return NID_basic_constraints; }
static inline int copenssl_nid_key_usage(void) { return NID_key_usage; }
static inline int copenssl_nid_ext_key_usage(void) { return NID_ext_key_usage; }
static inline int copenssl_nid_subject_key_identifier(void) { return NID_subject_key_identifier; }
static inline int copenssl_nid_authority_key_identifier(void) { return NID_authority_key_identifier; }
#endif
