#ifndef CALLEND_CSRTP_SHIM_H
#define CALLEND_CSRTP_SHIM_H
#include <srtp2/srtp.h>
#endif
