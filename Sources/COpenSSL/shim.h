#ifndef CALLEND_COPENSSL_SHIM_H
#define CALLEND_COPENSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>

static inline const char *copenssl_version_text(void) { return OpenSSL_version(OPENSSL_VERSION); }
#endif
